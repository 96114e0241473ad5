package imageops

import (
	"bytes"
	"errors"
	"image"
	"image/png"
	"sync"
	"testing"
)

// TestDecodeMemoryBound: a decode whose frame cannot fit in the decode
// memory fails before allocating, naming the sizes; ones that fit run,
// and give the memory back (a new-user test took a 256 MiB run to 1.9 GB
// decoding 144-megapixel PNGs, under the pixel limit).
func TestDecodeMemoryBound(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 1000, 700))); err != nil {
		t.Fatal(err)
	}
	big := buf.Bytes()
	defer SetDecodeMemory(4 << 20)()
	// 700 000 pixels, 4 bytes each in image/png's RGBA image and 3 in
	// the tensor: 4.9 MB, over 4 MiB.
	_, err := Decode(big, 3, DecodeOptions{})
	want := "imageops: decode: image too large: decoding this 1000x700 (width×height) image takes about 4.7MiB, more than the 4.0MiB that decodes may hold beyond the memory budget " +
		"(a quarter of resources.memory, at least 128MiB): raise resources.memory, or shrink such images before the pipeline"
	if err == nil || err.Error() != want || !errors.Is(err, ErrTooLarge) {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	// One channel: 3.5 MB fits; run several at once, each waiting its turn.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = Decode(big, 1, DecodeOptions{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("decode %d: %v", i, err)
		}
	}
	decodeMem.mu.Lock()
	used := decodeMem.used
	decodeMem.mu.Unlock()
	if used != 0 {
		t.Errorf("%d bytes still held after every decode ended", used)
	}
	if got := DecodeMemoryFor(256 << 20); got != 128<<20 {
		t.Errorf("DecodeMemoryFor(256MiB) = %d", got)
	}
	if got := DecodeMemoryFor(2 << 30); got != 512<<20 {
		t.Errorf("DecodeMemoryFor(2GiB) = %d", got)
	}
}

// TestOverlappingRunsLeaveNoStaleDecodeBound: runs overlapping in one
// process set the decode bound from their budgets; the largest in force
// holds, and when all have ended the default is back, whatever order they
// end in (restoring the value each found left 512 MiB behind a 2 GiB run
// that ended before a 64 MiB one; a concurrency review).
func TestOverlappingRunsLeaveNoStaleDecodeBound(t *testing.T) {
	limit := func() int64 {
		decodeMem.mu.Lock()
		defer decodeMem.mu.Unlock()
		return decodeMem.limit
	}
	for _, tc := range []struct {
		name           string
		firstEndsFirst bool
	}{{"first ends first", true}, {"last ends first", false}} {
		a := SetDecodeMemory(DecodeMemoryFor(2 << 30))
		b := SetDecodeMemory(DecodeMemoryFor(64 << 20))
		if got := limit(); got != 512<<20 {
			t.Errorf("%s: both running: %d, want %d", tc.name, got, 512<<20)
		}
		if tc.firstEndsFirst {
			a()
			if got := limit(); got != 128<<20 {
				t.Errorf("%s: the 64 MiB run alone: %d, want %d", tc.name, got, 128<<20)
			}
			b()
		} else {
			b()
			if got := limit(); got != 512<<20 {
				t.Errorf("%s: the 2 GiB run alone: %d, want %d", tc.name, got, 512<<20)
			}
			a()
		}
		if got := limit(); got != DefaultDecodeMemory {
			t.Errorf("%s: after both: %d, want the default %d", tc.name, got, DefaultDecodeMemory)
		}
	}
}
