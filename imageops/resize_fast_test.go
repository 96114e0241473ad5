package imageops

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestVpass8FastMatches checks that the vertical pass the resize uses
// (C and vectorized in cgo builds) gives exactly vpass8's bytes, across
// shrinking and enlarging, every filter, odd row widths and one-row inputs.
func TestVpass8FastMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ ih, oh, row int }{
		{375, 224, 224 * 3}, {224, 224, 5}, {1, 7, 3}, {7, 1, 33}, {100, 301, 17}, {64, 13, 8}, {2, 2, 1},
	} {
		for name, f := range filters {
			src := make([]byte, tc.ih*tc.row)
			for i := range src {
				src[i] = byte(rng.IntN(256))
			}
			cf := makeCoeffs(tc.ih, tc.oh, f, true)
			want := make([]byte, tc.oh*tc.row)
			got := make([]byte, tc.oh*tc.row)
			vpass8(src, tc.row, want, tc.oh, cf)
			vpass8Fast(src, tc.row, got, tc.oh, cf)
			if !bytes.Equal(got, want) {
				t.Errorf("%s %d→%d rows of %d: the fast vertical pass differs", name, tc.ih, tc.oh, tc.row)
			}
		}
	}
}

// TestVpass13FastMatches checks that the 13-bit vertical pass the resize
// uses for non-negative weights (C, two rows per 16-bit multiply-add, in
// cgo builds) gives exactly vpass13's bytes, across shrinking and
// enlarging, row widths below, at and past the 32-byte step, and extreme
// inputs (all 255, where a sum peaks).
func TestVpass13FastMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct{ ih, oh, row int }{
		{375, 224, 224 * 3}, {224, 224, 5}, {1, 7, 3}, {7, 1, 33}, {100, 301, 17}, {64, 13, 8}, {2, 2, 1},
		{500, 224, 32}, {333, 224, 95}, {3, 2, 64}, {1000, 7, 40},
	} {
		for _, name := range []string{Bilinear, Area} {
			cf := makeCoeffs(tc.ih, tc.oh, filters[name], true)
			if cf.w13 == nil {
				t.Fatalf("%s %d→%d: no 13-bit weights", name, tc.ih, tc.oh)
			}
			for _, fill := range []string{"random", "max"} {
				// Ending at a guard page, so a load or store past either
				// faults rather than landing in an allocator's slack.
				src := endGuarded(t, tc.ih*tc.row)
				for i := range src {
					src[i] = 255
					if fill == "random" {
						src[i] = byte(rng.IntN(256))
					}
				}
				want := make([]byte, tc.oh*tc.row)
				got := endGuarded(t, tc.oh*tc.row)
				vpass13(src, tc.row, want, tc.oh, cf)
				vpass13Fast(src, tc.row, got, tc.oh, cf)
				if !bytes.Equal(got, want) {
					t.Errorf("%s %d→%d rows of %d (%s): the fast vertical pass differs", name, tc.ih, tc.oh, tc.row, fill)
				}
				if fill == "max" && bytes.Count(want, []byte{255}) != len(want) {
					t.Errorf("%s %d→%d rows of %d: a flat 255 image does not stay 255", name, tc.ih, tc.oh, tc.row)
				}
			}
		}
	}
}

// BenchmarkVpass8 compares the vertical passes: vpass8 (22-bit weights)
// in Go and in C, vpass13 in Go, and the one the resize uses for
// bilinear (vpass13Fast: AVX2 in cgo builds, the Go loop otherwise), for a 375-row image
// of 224×3 bytes per row shrunk to 224 rows: the second half of a
// bilinear 500×375 → 224×224 resize.
func BenchmarkVpass8(b *testing.B) {
	const ih, oh, row = 375, 224, 224 * 3
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, ih*row)
	for i := range src {
		src[i] = byte(rng.IntN(256))
	}
	cf := makeCoeffs(ih, oh, filters["bilinear"], true)
	dst := make([]byte, oh*row)
	for _, bc := range []struct {
		name string
		fn   func([]byte, int, []byte, int, *coeffs)
	}{{"go", vpass8}, {"c22", vpass8Fast}, {"go13", vpass13}, {"used", vpass13Fast}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				bc.fn(src, row, dst, oh, cf)
			}
		})
	}
}

// TestHpass3PackedFastMatches checks that the packed RGB horizontal pass
// the resize uses (C in cgo builds, with AVX2 where the CPU has it, and
// the C SWAR loop where it lacks it or the weights have no AVX2 layout)
// gives exactly hrow3packed's bytes: for every shape up to 24 pixels,
// shrinks of one to twenty taps a group, enlargements and random shapes.
// Source and destination end at a guard page, so a load or store past
// either faults rather than passing unseen (the slack
// after an exact-length make hid both).
func TestHpass3PackedFastMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []struct{ iw, ow, h int }{
		{500, 224, 3}, {448, 224, 2}, {224, 224, 1}, {1, 7, 2}, {7, 1, 3}, {100, 301, 2}, {13, 64, 1},
		{4000, 224, 2}, {1000, 20, 2},
	}
	fixed := len(cases)
	for iw := 1; iw <= 24; iw++ {
		for ow := 1; ow <= 24; ow++ {
			cases = append(cases, struct{ iw, ow, h int }{iw, ow, 1 + (iw+ow)%3})
		}
	}
	for range 60 {
		cases = append(cases, struct{ iw, ow, h int }{1 + rng.IntN(3000), 1 + rng.IntN(400), 1 + rng.IntN(3)})
	}
	for i, tc := range cases {
		for _, name := range []string{Bilinear, Area} {
			cf := makeCoeffs(tc.iw, tc.ow, filters[name], true)
			if cf.w13 == nil {
				if i >= fixed {
					continue // a shrink too steep for 13-bit weights
				}
				t.Fatalf("%s %d→%d: no packed weights", name, tc.iw, tc.ow)
			}
			src := endGuarded(t, tc.h*tc.iw*3)
			for i := range src {
				src[i] = byte(rng.IntN(256))
			}
			want := make([]byte, tc.h*tc.ow*3)
			hpass3Packed(src, tc.h, tc.iw, want, tc.ow, cf)
			swar := *cf
			swar.w16 = nil // the C SWAR loop, which AVX2 machines otherwise never run
			for _, c := range []struct {
				path string
				cf   *coeffs
			}{{"fast", cf}, {"swar", &swar}} {
				got := endGuarded(t, tc.h*tc.ow*3)
				hpass3PackedFast(src, tc.h, tc.iw, got, tc.ow, c.cf)
				if !bytes.Equal(got, want) {
					t.Errorf("%s pass, %s %d→%d, %d rows: differs from hrow3packed", c.path, name, tc.iw, tc.ow, tc.h)
				}
			}
		}
	}
}

// BenchmarkHpass3Packed compares the Go packed RGB horizontal pass with the
// one the resize uses, for 448 → 224 pixels over 448 rows: the first half
// of W1's resize after a DCT-scaled decode.
func BenchmarkHpass3Packed(b *testing.B) {
	const iw, ow, h = 448, 224, 448
	rng := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, h*iw*3)
	for i := range src {
		src[i] = byte(rng.IntN(256))
	}
	cf := makeCoeffs(iw, ow, filters["bilinear"], true)
	dst := make([]byte, h*ow*3)
	for _, bc := range []struct {
		name string
		fn   func([]byte, int, int, []byte, int, *coeffs)
	}{{"go", hpass3Packed}, {"used", hpass3PackedFast}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				bc.fn(src, h, iw, dst, ow, cf)
			}
		})
	}
}
