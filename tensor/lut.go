package tensor

import "fmt"

// FloatLUT is a uint8 → float32 conversion with one 256-entry table per
// channel (the last axis): to_float, and a normalize after it, folded into
// lookups. It lets a pipeline carry an image as its uint8 levels, a
// quarter of the bytes, up to the point where it is copied anyway (the
// batch stacking it), and convert there.
type FloatLUT struct {
	// Tables holds one table per channel, or a single one for every channel.
	Tables [][256]float32
	// Op names the conversion in plans and errors, e.g. "to_float".
	Op string
	// sub and mul, set by AffineLUT, say that Tables[c][v] is
	// (float32(v)/255 - sub[c]) * mul[c]: Apply then computes the floats,
	// eight at a time where the CPU allows, instead of looking them up.
	sub, mul []float32
}

// minComputed is the shortest row Apply computes rather than looks up.
const minComputed = 256

// AffineLUT returns the FloatLUT of (level/255 - sub[c]) * mul[c] for
// channel c, each step rounded to float32: to_float is sub {0}, mul {1};
// a normalize after it is sub = mean, mul = 1/std. sub and mul have one
// value, for every channel, or one per channel, and the same length; they
// are copied. Apply may compute instead of reading the tables, so the
// tables of the FloatLUT returned must not be changed.
func AffineLUT(sub, mul []float32, op string) *FloatLUT {
	if len(sub) == 0 || len(sub) != len(mul) {
		panic("tensor: AffineLUT wants as many sub as mul values, at least one")
	}
	sub, mul = append([]float32(nil), sub...), append([]float32(nil), mul...)
	l := &FloatLUT{Tables: make([][256]float32, len(sub)), Op: op, sub: sub, mul: mul}
	for c := range l.Tables {
		for v := range l.Tables[c] {
			// The conversions keep each step rounded on its own, as the
			// SIMD path computes it: no fused operation may join them.
			f := float32(v) / 255
			l.Tables[c][v] = float32(f-sub[c]) * mul[c]
		}
	}
	return l
}

// Channels returns how many channels the tables are for; 1 means any.
func (l *FloatLUT) Channels() int { return len(l.Tables) }

// Apply converts the first len(dst) elements of src into dst; src must
// have that many. With per-channel tables the channel of element i is i mod
// Channels.
func (l *FloatLUT) Apply(dst []float32, src []byte) {
	src = src[:len(dst)]
	// A cgo call costs about as much as a hundred lookups.
	if affineFast && len(dst) >= minComputed && (len(l.sub) == 1 || len(l.sub) == 3) && len(l.sub) == len(l.Tables) {
		affineInto(dst, src, l.sub, l.mul)
		return
	}
	l.lookUp(dst, src)
}

// lookUp is Apply through the tables.
func (l *FloatLUT) lookUp(dst []float32, src []byte) {
	src = src[:len(dst)]
	switch len(l.Tables) {
	case 1:
		t := &l.Tables[0]
		for i, v := range src {
			dst[i] = t[v]
		}
	case 3:
		t0, t1, t2 := &l.Tables[0], &l.Tables[1], &l.Tables[2]
		i := 0
		for ; i+2 < len(src); i += 3 {
			s := src[i : i+3 : i+3]
			d := dst[i : i+3 : i+3]
			d[0], d[1], d[2] = t0[s[0]], t1[s[1]], t2[s[2]]
		}
		for ; i < len(src); i++ {
			dst[i] = l.Tables[i%3][src[i]]
		}
	default:
		c := len(l.Tables)
		for i, v := range src {
			dst[i] = l.Tables[i%c][v]
		}
	}
}

// Into writes the converted levels of t, a uint8 tensor that passed
// Check, to dst (len(dst) = t.Len()).
func (l *FloatLUT) Into(dst []float32, t *Tensor) { l.Apply(dst, t.Data) }

// Check returns an error when Into cannot convert t.
func (l *FloatLUT) Check(t *Tensor) error {
	if t.DType != Uint8 {
		return fmt.Errorf("%s: want uint8, got %s", l.Op, t.DType)
	}
	if c := len(l.Tables); c > 1 && (len(t.Shape) == 0 || t.Shape[len(t.Shape)-1] != c) {
		return fmt.Errorf("%s: has %d per-channel values but the tensor is %s", l.Op, c, t)
	}
	return nil
}
