//go:build !unix

package cache

// freeBytes is the room left on dir's file system, unknown here (-1).
var freeBytes = func(string) (int64, error) { return -1, nil }
