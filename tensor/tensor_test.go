package tensor

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestFromBytesRejects: shapes that do not match the data, including ones
// whose element count overflows int and so could wrap around to match it.
func TestFromBytesRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dt    DType
		shape []int
		data  int
		want  string
	}{
		{"negative", Uint8, []int{2, -1}, 0, "negative dimension in [2 -1]"},
		{"short", Float32, []int{2, 3}, 23, "[2 3] float32 needs 24 bytes, got 23"},
		{"2^62 float32", Float32, []int{1 << 62}, 0, "[4611686018427387904] float32 is larger than memory can hold"},
		{"wraps to 0", Uint8, []int{1 << 32, 1 << 32}, 0, "[4294967296 4294967296] uint8 is larger than memory can hold"},
		{"zero dim then huge", Float64, []int{0, 1 << 62}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := FromBytes(tc.dt, tc.shape, make([]byte, tc.data))
			if tc.want == "" {
				if err != nil || x.Len() != 0 {
					t.Errorf("got %v, %v; want an empty tensor", x, err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrShape) || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrShape ending %q", err, tc.want)
			}
		})
	}
}

// TestIntegerCastsAreExact: integer elements read and cast between integer
// dtypes exactly, not through a float64 (which holds 2^53+1 as 2^53).
func TestIntegerCastsAreExact(t *testing.T) {
	src := FromInt64s([]int64{1<<53 + 1, -(1<<53 + 1), 1<<40 + 7, 300, -5})
	for i, want := range []int64{1<<53 + 1, -(1<<53 + 1), 1<<40 + 7, 300, -5} {
		if got := src.IntAt(i); got != want {
			t.Errorf("IntAt(%d) = %d, want %d", i, got, want)
		}
	}
	for _, tc := range []struct {
		dt   DType
		want []int64
	}{
		{Int64, []int64{1<<53 + 1, -(1<<53 + 1), 1<<40 + 7, 300, -5}},
		{Int32, []int64{1, -1, 7, 300, -5}},   // the low 32 bits, as numpy's astype
		{Uint8, []int64{255, 0, 255, 255, 0}}, // saturated, as Set does
	} {
		c := src.Cast(tc.dt)
		for i, want := range tc.want {
			if got := c.IntAt(i); got != want {
				t.Errorf("Cast(%s)[%d] = %d, want %d", tc.dt, i, got, want)
			}
		}
	}
	if got := src.Cast(Float64).At(2); got != float64(1<<40+7) {
		t.Errorf("Cast(float64)[2] = %v", got)
	}
	// 2^60 + 2^36 + 1 is nearest the float32 2^60 + 2^37; through a
	// float64 it lands on the midpoint first and rounds down.
	const v int64 = 1<<60 + 1<<36 + 1
	if got := FromInt64s([]int64{v}).Cast(Float32).Float32()[0]; got != float32(1<<60+1<<37) {
		t.Errorf("Cast(float32) = %v, want %v", got, float32(1<<60+1<<37))
	}
}

// TestBooleansSurviveCopies: a copy of batched booleans that keeps the
// values (Clone, a Cast to uint8) keeps the mark; a Cast to another dtype
// makes numbers of them.
func TestBooleansSurviveCopies(t *testing.T) {
	b := &Tensor{DType: Uint8, Shape: []int{3}, Data: []byte{1, 0, 1}, Booleans: true}
	for _, tc := range []struct {
		name string
		t    *Tensor
		want bool
	}{
		{"clone", b.Clone(), true},
		{"cast uint8", b.Cast(Uint8), true},
		{"cast int64", b.Cast(Int64), false},
	} {
		if tc.t.Booleans != tc.want {
			t.Errorf("%s: Booleans %v, want %v", tc.name, tc.t.Booleans, tc.want)
		}
	}
}

// TestFloatCastsSaturate: a float out of an integer dtype's range
// saturates, and NaN becomes 0, on every machine; Go's own conversion is
// implementation-defined there (amd64 turned 1e30 into -2147483648).
func TestFloatCastsSaturate(t *testing.T) {
	src := New(Float64, 9)
	for i, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e30, -1e30, 2147483647.9, -2147483648.9, 255.9, -0.9} {
		src.Set(i, v)
	}
	for _, tc := range []struct {
		dt   DType
		want []int64
	}{
		{Int64, []int64{0, math.MaxInt64, math.MinInt64, math.MaxInt64, math.MinInt64, 2147483647, -2147483648, 255, 0}},
		{Int32, []int64{0, math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32, 2147483647, -2147483648, 255, 0}},
		{Uint8, []int64{0, 255, 0, 255, 0, 255, 0, 255, 0}},
	} {
		c := src.Cast(tc.dt)
		for i, want := range tc.want {
			if got := c.IntAt(i); got != want {
				t.Errorf("Cast(%s) of %v = %d, want %d", tc.dt, src.At(i), got, want)
			}
		}
	}
}
