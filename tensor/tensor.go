// Package tensor holds the dense n-dimensional arrays that flow through a
// pipeline: one contiguous little-endian buffer, a dtype and a shape.
//
// A Tensor owns its buffer. Typed views (Uint8, Float32, ...) alias the
// buffer without copying, so hot loops index plain Go slices rather than
// calling through an interface per element.
package tensor

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"
)

// DType is the element type of a tensor.
type DType uint8

// The element types a tensor can hold.
const (
	Invalid DType = iota
	Uint8
	Int32
	Int64
	Float32
	Float64
)

var dtypeNames = [...]string{"invalid", "uint8", "int32", "int64", "float32", "float64"}
var dtypeSizes = [...]int{0, 1, 4, 8, 4, 8}

// String returns the dtype's name as written in specs and expressions.
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size returns the number of bytes one element occupies.
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether d is a floating-point dtype.
func (d DType) IsFloat() bool { return d == Float32 || d == Float64 }

// ParseDType returns the dtype named s.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if i > 0 && n == s {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q (want uint8, int32, int64, float32 or float64)", s)
}

// ErrShape is returned when a shape is negative or does not match a buffer.
var ErrShape = errors.New("tensor: bad shape")

// Tensor is a dense array. Data holds NumElements()*DType.Size() bytes in
// row-major (C) order, little-endian.
type Tensor struct {
	DType DType
	Shape []int
	Data  []byte
	// Booleans marks a uint8 tensor whose elements are booleans, 0 or 1:
	// batch sets it when it stacks bool values, so that a sink writes them
	// as booleans also where the field's type is known only at run time
	// (a jsonl key), which the spec's types cannot tell it.
	Booleans bool
	// recyclable says Data came from the pool and t is its only reference
	// (see Alloc, Share and Recycle in pool.go).
	recyclable atomic.Bool
	// pooled is the byte size of the pool buffer Data begins, for a tensor
	// from Alloc, AllocShort or WrapRecyclable, whether or not it has been
	// shared since; 0 for any other.
	pooled int
}

// HeldBytes is the memory t's data keeps alive: the whole pool buffer for
// a tensor that got one, which for a short batch (AllocShort) is more than
// its data, even once shared; otherwise its data's length, as a view into
// a larger value holds no more than that of its own.
func (t *Tensor) HeldBytes() int {
	if t.pooled > 0 {
		return t.pooled
	}
	return len(t.Data)
}

// New allocates a zeroed tensor.
func New(dt DType, shape ...int) *Tensor {
	n := NumElements(shape)
	return &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: make([]byte, n*dt.Size())}
}

// FromBytes wraps data, which must hold exactly the elements the shape needs.
func FromBytes(dt DType, shape []int, data []byte) (*Tensor, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("%w: negative dimension in %v", ErrShape, shape)
		}
		// Shapes come from files and sockets: a product past int would
		// wrap around and could match the data's length.
		if d != 0 && n > math.MaxInt/d/max(1, dt.Size()) {
			return nil, fmt.Errorf("%w: %v %s is larger than memory can hold", ErrShape, shape, dt)
		}
		n *= d
	}
	if want := n * dt.Size(); want != len(data) {
		return nil, fmt.Errorf("%w: %v %s needs %d bytes, got %d", ErrShape, shape, dt, want, len(data))
	}
	return &Tensor{DType: dt, Shape: append([]int(nil), shape...), Data: data}, nil
}

// NumElements returns the product of the dimensions (1 for a scalar).
func NumElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Len returns the number of elements.
func (t *Tensor) Len() int { return NumElements(t.Shape) }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.Shape) }

// Bytes returns the size of the element buffer.
func (t *Tensor) Bytes() int { return len(t.Data) }

// String describes the tensor without its contents, e.g. "uint8[224 224 3]".
func (t *Tensor) String() string {
	var b strings.Builder
	b.WriteString(t.DType.String())
	b.WriteByte('[')
	for i, d := range t.Shape {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{DType: t.DType, Shape: append([]int(nil), t.Shape...), Data: append([]byte(nil), t.Data...), Booleans: t.Booleans}
}

func view[T any](t *Tensor, want DType) []T {
	if t.DType != want {
		panic(fmt.Sprintf("tensor: %s view of a %s tensor", want, t.DType))
	}
	if len(t.Data) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&t.Data[0])), len(t.Data)/want.Size())
}

// Uint8 returns the elements of a uint8 tensor; it panics on another dtype.
func (t *Tensor) Uint8() []uint8 {
	if t.DType != Uint8 {
		panic(fmt.Sprintf("tensor: uint8 view of a %s tensor", t.DType))
	}
	return t.Data
}

// Int32 returns the elements of an int32 tensor, aliasing Data.
func (t *Tensor) Int32() []int32 { return view[int32](t, Int32) }

// Int64 returns the elements of an int64 tensor, aliasing Data.
func (t *Tensor) Int64() []int64 { return view[int64](t, Int64) }

// Float32 returns the elements of a float32 tensor, aliasing Data.
func (t *Tensor) Float32() []float32 { return view[float32](t, Float32) }

// Float64 returns the elements of a float64 tensor, aliasing Data.
func (t *Tensor) Float64() []float64 { return view[float64](t, Float64) }

// Float32Decimal widens f to the float64 of its shortest decimal: 17.65
// as 17.65, not 17.649999618530273. So a float32 compares equal to the
// number a spec writes for it, as TensorFlow's float32 comparison does,
// prints as it was written, and narrows back to the very float32.
func Float32Decimal(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil { // NaN and the infinities format as words that parse back
		return float64(f)
	}
	return v
}

// At returns element i (flat index) converted to float64, for any dtype.
func (t *Tensor) At(i int) float64 {
	switch t.DType {
	case Uint8:
		return float64(t.Data[i])
	case Int32:
		return float64(t.Int32()[i])
	case Int64:
		return float64(t.Int64()[i])
	case Float32:
		return float64(t.Float32()[i])
	case Float64:
		return t.Float64()[i]
	}
	panic("tensor: At on invalid dtype")
}

// IntAt returns element i of an integer tensor exactly (At goes through a
// float64, which holds integers only up to 2^53); for a float tensor, the
// element truncated toward zero.
func (t *Tensor) IntAt(i int) int64 {
	switch t.DType {
	case Uint8:
		return int64(t.Data[i])
	case Int32:
		return int64(t.Int32()[i])
	case Int64:
		return t.Int64()[i]
	}
	return int64(t.At(i))
}

// SetInt stores the integer v at flat index i, exactly where the dtype
// holds it: int32 keeps the low 32 bits, uint8 saturates to [0, 255] as
// Set does, and the float dtypes round to nearest.
func (t *Tensor) SetInt(i int, v int64) {
	switch t.DType {
	case Uint8:
		t.Data[i] = uint8(min(max(v, 0), 255))
	case Int32:
		t.Int32()[i] = int32(v) // the low 32 bits, as numpy's astype: the same on every machine
	case Int64:
		t.Int64()[i] = v
	case Float32:
		t.Float32()[i] = float32(v) // once: through a float64 it could round twice
	default:
		t.Set(i, float64(v))
	}
}

// Set stores v at flat index i, converting to the tensor's dtype. Integer
// dtypes truncate toward zero and saturate at their range, and NaN
// becomes 0 (truncSat).
func (t *Tensor) Set(i int, v float64) {
	switch t.DType {
	case Uint8:
		t.Data[i] = uint8(truncSat(v, 0, math.MaxUint8))
	case Int32:
		t.Int32()[i] = int32(truncSat(v, math.MinInt32, math.MaxInt32))
	case Int64:
		t.Int64()[i] = truncSat(v, math.MinInt64, math.MaxInt64)
	case Float32:
		t.Float32()[i] = float32(v)
	case Float64:
		t.Float64()[i] = v
	default:
		panic("tensor: Set on invalid dtype")
	}
}

// truncSat truncates v toward zero into [lo, hi], and NaN to 0, as Rust's
// `as` does. Go's conversion of a float out of an integer's range is
// implementation-defined (amd64 gives the lowest value, so 1e30 became
// -2147483648 in an int32; arm64 saturates): a cast must give the same
// samples on every machine.
func truncSat(v float64, lo, hi int64) int64 {
	switch {
	case v != v:
		return 0
	case v <= float64(lo):
		return lo
	case v >= float64(hi):
		// float64(math.MaxInt64) is 2^63: past every int64.
		return hi
	}
	return int64(v)
}

// FromInt64s builds a rank-1 int64 tensor.
func FromInt64s(v []int64) *Tensor {
	t := New(Int64, len(v))
	copy(t.Int64(), v)
	return t
}

// FromFloat32s builds a rank-1 float32 tensor.
func FromFloat32s(v []float32) *Tensor {
	t := New(Float32, len(v))
	copy(t.Float32(), v)
	return t
}

// Cast returns a new tensor with every element converted to dt.
func (t *Tensor) Cast(dt DType) *Tensor {
	out := New(dt, t.Shape...)
	if dt == t.DType {
		copy(out.Data, t.Data)
		out.Booleans = t.Booleans // still the same 0s and 1s
		return out
	}
	switch {
	case t.DType == Uint8 && dt == Float32:
		dst := out.Float32()
		for i, b := range t.Data {
			dst[i] = float32(b)
		}
	case !t.DType.IsFloat():
		// From integers exactly: not through a float64 (which loses
		// int64s past 2^53, and rounds twice on the way to a float32).
		for i, n := 0, t.Len(); i < n; i++ {
			out.SetInt(i, t.IntAt(i))
		}
	default:
		for i, n := 0, t.Len(); i < n; i++ {
			out.Set(i, t.At(i))
		}
	}
	return out
}

// Equal reports whether a and b have the same dtype, shape and bytes.
func Equal(a, b *Tensor) bool {
	if a.DType != b.DType || len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return string(a.Data) == string(b.Data)
}
