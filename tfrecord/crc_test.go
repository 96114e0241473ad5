package tfrecord

import "hash/crc32"

func crc32Update(crc uint32, p []byte) uint32 { return crc32.Update(crc, castagnoli, p) }
