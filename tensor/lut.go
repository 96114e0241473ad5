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
}

// Channels returns how many channels the tables are for; 1 means any.
func (l *FloatLUT) Channels() int { return len(l.Tables) }

// Apply converts the first len(dst) elements of src into dst; src must
// have that many. With per-channel tables the channel of element i is i mod
// Channels.
func (l *FloatLUT) Apply(dst []float32, src []byte) {
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
