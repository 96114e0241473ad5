package tfrecord

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func FuzzReader(f *testing.F) {
	for _, s := range beamStreams {
		b := beamBytes(f, s.hex, s.b64)
		f.Add(b, uint8(None))
		f.Add(compress(f, Gzip, b), uint8(Gzip))
		f.Add(compress(f, Zlib, b), uint8(Zlib))
		bad := bytes.Clone(b)
		bad[9]++
		f.Add(bad, uint8(None))
	}
	f.Add([]byte{}, uint8(None))
	f.Add(writeAll(f, None, [][]byte{{}, []byte("x"), bytes.Repeat([]byte{0xab}, 300)}), uint8(None))
	// Small real files, when the shared data is present.
	{
		dir := os.Getenv("PIPERUN_SHARED_DATA")
		if dir == "" {
			dir = filepath.Join("..", "..", "shared", "data")
		}
		for _, name := range []string{"ranking/train_elwc.tfrecord", "tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz"} {
			b, err := os.ReadFile(filepath.Join(dir, "tfrecord", name))
			if err != nil {
				continue
			}
			f.Add(b, uint8(Detect(name, b)))
		}
	}
	// Seeds for the resync scan (comp's high bit turns it on): a bad length,
	// a bad length crc, garbage between records, a header cut short, two
	// bad headers in a row, and frames near the end whose length check
	// passes while their data or their length does not fit.
	{
		recs := [][]byte{[]byte("first"), {}, bytes.Repeat([]byte{7}, 40), []byte("last one")}
		b := writeAll(f, None, recs)
		var offs []int
		for o, i := 0, 0; i < len(recs); i++ {
			offs = append(offs, o)
			o += headerSize + len(recs[i]) + footerSize
		}
		mut := func(fn func([]byte) []byte) []byte { return fn(bytes.Clone(b)) }
		fake := func(n uint64) []byte {
			h := make([]byte, headerSize)
			binary.LittleEndian.PutUint64(h, n)
			binary.LittleEndian.PutUint32(h[8:], MaskedCRC(h[:8]))
			return h
		}
		for _, d := range [][]byte{
			mut(func(x []byte) []byte { x[offs[1]+2] ^= 8; return x }),
			mut(func(x []byte) []byte { x[offs[2]+9] ^= 1; return x }),
			mut(func(x []byte) []byte {
				return append(append(append([]byte{}, x[:offs[2]]...), "\x00garbage\xff\x01"...), x[offs[2]:]...)
			}),
			mut(func(x []byte) []byte { return x[:offs[3]+7] }),
			mut(func(x []byte) []byte { x[offs[1]] ^= 1; x[offs[2]] ^= 1; return x }),
			mut(func(x []byte) []byte {
				x[offs[3]] ^= 1
				x = append(append(x, fake(2)...), "ab\x00\x00\x00\x00"...)
				return append(x, fake(100)...)
			}),
		} {
			f.Add(d, uint8(None)|resyncBit)
			f.Add(compress(f, Gzip, d), uint8(Gzip)|resyncBit)
		}
	}
	// A stream that makes the scan give up: after a bad first header, a
	// header every 12 bytes that passes its check and claims the rest of
	// the stream, so each fits and fails only its data check, costing a
	// checksum over the rest (with fuzzMaxSize, the budget runs out after
	// 17 of them); then, in 600 bytes, headers claiming 100 bytes each,
	// against the small maximum record size (the budget runs out after
	// 26). Then a bad first header and a bad payload, with the small
	// buffer.
	{
		adv := adversarialResync(64<<10, 64<<10)
		f.Add(adv, uint8(None)|resyncBit)
		f.Add(compress(f, Gzip, adv), uint8(Gzip)|resyncBit)
		adv = adversarialResync(600, 100)
		f.Add(adv, uint8(None)|resyncBit|smallMaxBit)
		f.Add(adv, uint8(None)|resyncBit|smallMaxBit|smallBufBit)
		recs := [][]byte{[]byte("first"), {}, bytes.Repeat([]byte{7}, 40), []byte("last one")}
		b := writeAll(f, None, recs)
		b[0] ^= 1
		b[5+16+16+40+16+3] ^= 1 // a byte of the last record's data
		f.Add(b, uint8(None)|resyncBit|smallBufBit)
		f.Add(compress(f, Zlib, b), uint8(Zlib)|resyncBit|smallBufBit)
	}
	f.Fuzz(func(t *testing.T, data []byte, comp uint8) {
		c := Compression((comp & compMask) % 3)
		resync := comp&resyncBit != 0
		size := bufferSize
		if comp&smallBufBit != 0 {
			size = 16
		}
		r, err := newReaderSize(bytes.NewReader(data), c, "fuzz", size)
		if err != nil {
			return
		}
		// Keep hostile lengths from allocating much.
		maxSize := uint64(fuzzMaxSize)
		if comp&smallMaxBit != 0 {
			maxSize = 100
		}
		r.SetMaxRecordSize(int64(maxSize))
		if resync {
			r.SetResync(true)
			fuzzResync(t, r, data, c, maxSize)
			return
		}
		var recs [][]byte
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("non-corrupt error from in-memory input: %v", err)
				}
				if ce.Record != len(recs) {
					t.Fatalf("error names record %d after %d records", ce.Record, len(recs))
				}
				// A bad payload in an intact frame reads on (found by
				// this fuzzer once DataOnly came in); other errors stick.
				if again, _ := r.Next(); again != nil && !ce.DataOnly {
					t.Fatal("a record after an error")
				}
				break
			}
			recs = append(recs, rec)
		}
		// Compressors are costly to set up, so only re-compress when the
		// input was compressed.
		rewrite := []Compression{None}
		if c != None {
			rewrite = append(rewrite, c)
		}
		for _, cc := range rewrite {
			b := writeAll(t, cc, recs)
			r2, err := NewReader(bytes.NewReader(b), cc, "rewrite")
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, r2)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(recs) {
				t.Fatalf("re-read %d records, want %d", len(got), len(recs))
			}
			for i := range got {
				if !bytes.Equal(got[i], recs[i]) {
					t.Fatalf("record %d differs after rewrite", i)
				}
			}
		}
		if c == None && len(recs) > 0 {
			// Uncompressed framing is canonical: the consumed prefix is
			// reproduced byte for byte.
			if b := writeAll(t, None, recs); !bytes.Equal(b, data[:len(b)]) {
				t.Fatal("rewritten stream differs from the input prefix")
			}
		}
	})
}

// FuzzReader's comp argument: its bits under compMask pick the compression
// (modulo 3, so that older corpus entries keep their meaning); resyncBit
// turns resynchronisation on; smallBufBit gives the reader a buffer of 16
// bytes, so that most candidate records of a resync scan are larger than
// it; smallMaxBit lowers the maximum record size from fuzzMaxSize to 100
// bytes, so that small inputs can run a scan out of budget.
const (
	compMask    = 0x1f
	smallMaxBit = 0x20
	smallBufBit = 0x40
	resyncBit   = 0x80
	fuzzMaxSize = 1 << 20
)

// fuzzResync reads r, which resynchronises with the given maximum record
// size, to its end, and checks every record and error against refResync
// over the decompressed stream, when the compressed one (if any) is
// intact: the scan reads the decompressed stream, so compression must
// change nothing but the words "decompressed bytes".
func fuzzResync(t *testing.T, r *Reader, data []byte, c Compression, maxSize uint64) {
	plain, intact := decompressed(data, c)
	var got []string
	for range len(plain) + 2 { // each call consumes at least one byte, or ends
		off, idx := r.Offset(), r.Index()
		rec, err := r.Next()
		if err == io.EOF {
			got = append(got, fmt.Sprintf("eof %d %d", r.Offset(), r.Index()))
			break
		}
		var ce *CorruptError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("non-corrupt error from in-memory input: %v", err)
		}
		if err != nil {
			if rec != nil {
				t.Fatal("a record with an error")
			}
			if ce.Record != idx || ce.Offset != off {
				t.Fatalf("error names record %d at %d, the reader was at %d, %d: %v", ce.Record, ce.Offset, idx, off, err)
			}
			if !ce.ReadsOn() {
				if _, again := r.Next(); again != err {
					t.Fatalf("after an error that ends the stream, Next = %v", again)
				}
				got = append(got, fmt.Sprintf("end %d %d", ce.Record, ce.Offset))
				break
			}
			if ce.Skipped > 0 && (ce.DataOnly || r.Offset() != off+ce.Skipped || r.Index() != idx+1) {
				t.Fatalf("after skipping %d bytes from %d: at %d, record %d: %v", ce.Skipped, off, r.Offset(), r.Index(), err)
			}
			got = append(got, fmt.Sprintf("skip %d %d %d %v", ce.Record, ce.Offset, ce.Skipped, ce.Resumed))
			continue
		}
		got = append(got, recEvent(idx, off, rec))
	}
	if !intact {
		return
	}
	if want := refResync(plain, maxSize); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reader (%s):\n%q\nreference:\n%q", c, got, want)
	}
}

// recEvent is a record in fuzzResync's notation: its index, its offset and
// its bytes, or for a long one its length and checksum.
func recEvent[I int | int64](idx int, off I, rec []byte) string {
	if len(rec) > 64 {
		return fmt.Sprintf("rec %d %d (%d bytes, crc %08x)", idx, off, len(rec), CRC32C(rec))
	}
	return fmt.Sprintf("rec %d %d %x", idx, off, rec)
}

// decompressed returns data decompressed with c, as far as it goes, and
// whether the whole compressed stream was intact.
func decompressed(data []byte, c Compression) ([]byte, bool) {
	var (
		zr  io.Reader
		err error
	)
	switch c {
	case None:
		return data, true
	case Gzip:
		zr, err = gzip.NewReader(bytes.NewReader(data))
	case Zlib:
		zr, err = zlib.NewReader(bytes.NewReader(data))
	}
	if err != nil {
		return nil, false
	}
	const limit = 64 << 20
	b, err := io.ReadAll(io.LimitReader(zr, limit))
	return b, err == nil && len(b) < limit
}

// refResync is what a resynchronising reader with the given maximum record
// size makes of data, written as plainly as possible: the reader's events
// in fuzzResync's notation. It models the scan's budget (see SetResync)
// exactly: the data checks of all the scans, together, may cover at most
// 8 bytes per byte of the stream before the candidate being checked, plus
// maxSize; a candidate that fits past it ends the stream.
func refResync(data []byte, maxSize uint64) []string {
	var out []string
	var work uint64 // payload bytes checked by the scans so far
	// frame reports whether a whole valid record starts at data[at:], or
	// that checking its data would overrun the budget.
	frame := func(at int) (ok, giveUp bool) {
		if len(data)-at < headerSize {
			return false, false
		}
		n := binary.LittleEndian.Uint64(data[at:])
		if n > maxSize || MaskedCRC(data[at:at+8]) != binary.LittleEndian.Uint32(data[at+8:]) {
			return false, false
		}
		end := at + headerSize + int(n) + footerSize
		if end > len(data) {
			return false, false
		}
		if work+n > 8*uint64(at)+maxSize {
			return false, true
		}
		work += n
		return MaskedCRC(data[at+headerSize:end-footerSize]) == binary.LittleEndian.Uint32(data[end-footerSize:]), false
	}
	off, idx := 0, 0
	for {
		if off == len(data) {
			return append(out, fmt.Sprintf("eof %d %d", off, idx))
		}
		if len(data)-off < headerSize {
			return append(out, fmt.Sprintf("end %d %d", idx, off))
		}
		n := binary.LittleEndian.Uint64(data[off:])
		if MaskedCRC(data[off:off+8]) != binary.LittleEndian.Uint32(data[off+8:]) {
			at := off + 1
			for ; at < len(data); at++ {
				ok, giveUp := frame(at)
				if giveUp {
					return append(out, fmt.Sprintf("end %d %d", idx, off))
				}
				if ok {
					break
				}
			}
			out = append(out, fmt.Sprintf("skip %d %d %d %v", idx, off, at-off, at < len(data)))
			off, idx = at, idx+1
			continue
		}
		if n > maxSize || uint64(len(data)-off-headerSize) < n+footerSize {
			return append(out, fmt.Sprintf("end %d %d", idx, off))
		}
		end := off + headerSize + int(n) + footerSize
		rec := data[off+headerSize : end-footerSize]
		if MaskedCRC(rec) != binary.LittleEndian.Uint32(data[end-footerSize:]) {
			out = append(out, fmt.Sprintf("skip %d %d %d %v", idx, off, 0, false))
		} else {
			out = append(out, recEvent(idx, off, rec))
		}
		off, idx = end, idx+1
	}
}
