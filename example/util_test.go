package example

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// diff describes the first difference between two Examples, comparing
// floats by bits so NaNs compare equal; "" means equal.
func diff(a, b *Example) string {
	if len(a.Features) != len(b.Features) {
		return fmt.Sprintf("%d features vs %d", len(a.Features), len(b.Features))
	}
	for k, fa := range a.Features {
		fb, ok := b.Features[k]
		if !ok {
			return fmt.Sprintf("%q missing", k)
		}
		if fa == nil {
			fa = &Feature{}
		}
		if fb == nil {
			fb = &Feature{}
		}
		if fa.Kind != fb.Kind || fa.Len() != fb.Len() {
			return fmt.Sprintf("%q: %v[%d] vs %v[%d]", k, fa.Kind, fa.Len(), fb.Kind, fb.Len())
		}
		switch fa.Kind {
		case KindBytes:
			if !slices.EqualFunc(fa.Bytes, fb.Bytes, func(x, y []byte) bool { return string(x) == string(y) }) {
				return fmt.Sprintf("%q: bytes %q vs %q", k, fa.Bytes, fb.Bytes)
			}
		case KindFloat:
			if !slices.EqualFunc(fa.Floats, fb.Floats, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
				return fmt.Sprintf("%q: floats %v vs %v", k, fa.Floats, fb.Floats)
			}
		case KindInt64:
			if !slices.Equal(fa.Ints, fb.Ints) {
				return fmt.Sprintf("%q: ints %v vs %v", k, fa.Ints, fb.Ints)
			}
		}
	}
	return ""
}
