package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// The encoding of one sample, all integers varints (signed ones zig-zag)
// unless said otherwise:
//
//	version(1 byte) id epoch len(origin) origin batch_size nfields
//	nfields × { len(name) name value }        names strictly increasing
//
// and a value is a one-byte tag followed by:
//
//	nil, false, true   nothing
//	int64              varint
//	float64            8 bytes, little-endian IEEE 754 bits
//	string, bytes      len bytes
//	tensor             dtype(1 byte) rank dims… zero padding to a multiple
//	                   of 8 from the start of the encoding, then the raw data,
//	                   whose length the dtype and shape imply
//	[][]byte, []string count × { len bytes }
//	[]any              count × value
//
// The encoding is canonical: Decode rejects non-minimal varints, unsorted or
// repeated names, non-zero padding and trailing bytes, so every buffer that
// decodes re-encodes to the same bytes. The padding keeps tensor data 8-byte
// aligned inside the buffer, so that a decoded tensor may alias an aligned
// buffer and still be viewed as []float64 without a misaligned pointer.

// codecVersion is the first byte of every encoding; a new layout gets a new
// version so that old caches are rejected instead of misread.
const codecVersion = 1

// Value tags.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagInt
	tagFloat
	tagString
	tagBytes
	tagTensor
	tagBytesList
	tagStringList
	tagList
	// tagBoolTensor is a tagTensor whose tensor.Booleans is set: batched
	// booleans. Caches written before it existed never hold it, so the
	// format stays 1.
	tagBoolTensor
	numTags
)

// maxDepth bounds the nesting of []any values, so that a hostile buffer of
// nested list tags cannot exhaust the stack.
const maxDepth = 64

// Encode appends the encoding of s to dst and returns the extended buffer.
// Fields are written in sorted name order, so equal samples encode to equal
// bytes. Encode panics if a field holds a value outside the closed set of
// the sample package or a tensor whose data does not match its shape; Put
// reports those as errors instead.
func Encode(dst []byte, s *sample.Sample) []byte {
	out, err := encode(dst, s)
	if err != nil {
		panic(err)
	}
	return out
}

// encode is Encode returning an error for values it cannot represent.
func encode(dst []byte, s *sample.Sample) ([]byte, error) {
	e := encoder{buf: dst, start: len(dst)}
	e.buf = append(e.buf, codecVersion)
	e.buf = binary.AppendVarint(e.buf, s.ID)
	e.buf = binary.AppendVarint(e.buf, int64(s.Epoch))
	e.str(s.Origin)
	e.buf = binary.AppendVarint(e.buf, int64(s.BatchSize))
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s.Fields)))
	// Sorting a small slice of names per sample is cheaper than it looks next
	// to the value bytes, and it is what makes the encoding canonical.
	for _, name := range sample.SortedKeys(s.Fields) {
		e.str(name)
		if err := e.value(s.Fields[name], 0); err != nil {
			return dst, fmt.Errorf("cache: encode field %q: %w", name, err)
		}
	}
	return e.buf, nil
}

type encoder struct {
	buf   []byte
	start int // offset of the encoding in buf, the origin of tensor alignment
}

func (e *encoder) str(s string) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s)))
	e.buf = append(e.buf, s...)
}

func (e *encoder) bytes(b []byte) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) value(v any, depth int) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, tagNil)
	case bool:
		if x {
			e.buf = append(e.buf, tagTrue)
		} else {
			e.buf = append(e.buf, tagFalse)
		}
	case int64:
		e.buf = append(e.buf, tagInt)
		e.buf = binary.AppendVarint(e.buf, x)
	case float64:
		e.buf = append(e.buf, tagFloat)
		e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(x))
	case string:
		e.buf = append(e.buf, tagString)
		e.str(x)
	case []byte:
		e.buf = append(e.buf, tagBytes)
		e.bytes(x)
	case *tensor.Tensor:
		if x == nil {
			e.buf = append(e.buf, tagNil)
			return nil
		}
		return e.tensor(x)
	case [][]byte:
		e.buf = append(e.buf, tagBytesList)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(x)))
		for _, b := range x {
			e.bytes(b)
		}
	case []string:
		e.buf = append(e.buf, tagStringList)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(x)))
		for _, s := range x {
			e.str(s)
		}
	case []any:
		if depth >= maxDepth {
			return fmt.Errorf("lists nested deeper than %d", maxDepth)
		}
		e.buf = append(e.buf, tagList)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(x)))
		for _, el := range x {
			if err := e.value(el, depth+1); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unsupported value type %T", v)
	}
	return nil
}

func (e *encoder) tensor(t *tensor.Tensor) error {
	size := t.DType.Size()
	if size == 0 {
		return fmt.Errorf("tensor of invalid dtype %d", uint8(t.DType))
	}
	for _, d := range t.Shape {
		if d < 0 || d > math.MaxInt32 {
			return fmt.Errorf("tensor shape %v has a dimension out of range", t.Shape)
		}
	}
	n, overflow := numElements(t.Shape)
	if overflow || n > uint64(len(t.Data)/size) || int(n)*size != len(t.Data) {
		return fmt.Errorf("tensor %v %s holds %d bytes, which its shape does not match", t.Shape, t.DType, len(t.Data))
	}
	tag := tagTensor
	if t.Booleans {
		tag = tagBoolTensor
	}
	e.buf = append(e.buf, tag, byte(t.DType))
	e.buf = binary.AppendUvarint(e.buf, uint64(len(t.Shape)))
	for _, d := range t.Shape {
		e.buf = binary.AppendUvarint(e.buf, uint64(d))
	}
	for (len(e.buf)-e.start)%8 != 0 {
		e.buf = append(e.buf, 0)
	}
	e.buf = append(e.buf, t.Data...)
	return nil
}

// errTruncated is wrapped by decode errors caused by a buffer too short for
// what it declares.
var errTruncated = errors.New("truncated")

// Decode parses a buffer written by Encode. The returned sample owns its
// memory: it does not alias b. Decode never panics; it checks every length
// against the buffer before allocating, so a corrupt or hostile buffer costs
// at most a small multiple of its own size.
func Decode(b []byte) (*sample.Sample, error) {
	return decode(b, false)
}

// decode parses b; with alias set, byte slices and tensor data point into b
// instead of being copied, which saves a copy of every large value when b is
// a fresh buffer that nothing else will modify.
func decode(b []byte, alias bool) (*sample.Sample, error) {
	d := decoder{buf: b, alias: alias}
	s, err := d.sample()
	if err != nil {
		return nil, fmt.Errorf("cache: decode: %w", err)
	}
	return s, nil
}

type decoder struct {
	buf   []byte
	pos   int
	alias bool
}

func (d *decoder) remaining() int { return len(d.buf) - d.pos }

func (d *decoder) sample() (*sample.Sample, error) {
	if d.remaining() == 0 {
		return nil, fmt.Errorf("empty buffer")
	}
	if v := d.buf[0]; v != codecVersion {
		return nil, fmt.Errorf("unknown format version %d (want %d)", v, codecVersion)
	}
	d.pos = 1
	id, err := d.varint("id")
	if err != nil {
		return nil, err
	}
	epoch, err := d.intValue("epoch")
	if err != nil {
		return nil, err
	}
	origin, err := d.str("origin")
	if err != nil {
		return nil, err
	}
	batch, err := d.intValue("batch size")
	if err != nil {
		return nil, err
	}
	// Each field takes at least two bytes (an empty name and a tag), which
	// bounds the map before it is allocated.
	n, err := d.count("field count", 2)
	if err != nil {
		return nil, err
	}
	s := &sample.Sample{ID: id, Epoch: epoch, Origin: origin, BatchSize: batch, Fields: make(map[string]any, n)}
	prev := ""
	for i := 0; i < n; i++ {
		name, err := d.str("field name")
		if err != nil {
			return nil, err
		}
		if i > 0 && strings.Compare(name, prev) <= 0 {
			return nil, fmt.Errorf("field %q out of order after %q", name, prev)
		}
		v, err := d.value(0)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
		s.Fields[name] = v
		prev = name
	}
	if d.remaining() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", d.remaining())
	}
	return s, nil
}

// uvarint reads a minimal unsigned varint; a longer-than-needed encoding of
// the same number is rejected to keep decode∘encode the identity.
func (d *decoder) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(d.buf[d.pos:])
	if n == 0 {
		return 0, fmt.Errorf("%s: %w", what, errTruncated)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: varint overflows 64 bits", what)
	}
	if n != uvarintLen(v) {
		return 0, fmt.Errorf("%s: non-minimal varint", what)
	}
	d.pos += n
	return v, nil
}

func (d *decoder) varint(what string) (int64, error) {
	u, err := d.uvarint(what)
	if err != nil {
		return 0, err
	}
	// Zig-zag, as binary.Varint decodes it.
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x, nil
}

func (d *decoder) intValue(what string) (int, error) {
	x, err := d.varint(what)
	if err != nil {
		return 0, err
	}
	if int64(int(x)) != x {
		return 0, fmt.Errorf("%s %d overflows int", what, x)
	}
	return int(x), nil
}

// count reads a length or element count and checks that the buffer can hold
// that many items of at least minSize bytes each.
func (d *decoder) count(what string, minSize int) (int, error) {
	u, err := d.uvarint(what)
	if err != nil {
		return 0, err
	}
	if u > uint64(d.remaining()/minSize) {
		return 0, fmt.Errorf("%s %d exceeds the %d remaining bytes: %w", what, u, d.remaining(), errTruncated)
	}
	return int(u), nil
}

func (d *decoder) raw(what string) ([]byte, error) {
	n, err := d.count(what, 1)
	if err != nil {
		return nil, err
	}
	b := d.buf[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return b, nil
}

func (d *decoder) str(what string) (string, error) {
	b, err := d.raw(what)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (d *decoder) bytes(what string) ([]byte, error) {
	b, err := d.raw(what)
	if err != nil {
		return nil, err
	}
	if d.alias {
		return b, nil
	}
	return append(make([]byte, 0, len(b)), b...), nil
}

func (d *decoder) value(depth int) (any, error) {
	if d.remaining() == 0 {
		return nil, fmt.Errorf("value tag: %w", errTruncated)
	}
	tag := d.buf[d.pos]
	d.pos++
	switch tag {
	case tagNil:
		return nil, nil
	case tagFalse:
		return false, nil
	case tagTrue:
		return true, nil
	case tagInt:
		return d.varint("int64")
	case tagFloat:
		if d.remaining() < 8 {
			return nil, fmt.Errorf("float64: %w", errTruncated)
		}
		x := math.Float64frombits(binary.LittleEndian.Uint64(d.buf[d.pos:]))
		d.pos += 8
		return x, nil
	case tagString:
		return d.str("string")
	case tagBytes:
		return d.bytes("bytes")
	case tagTensor:
		return d.tensor()
	case tagBoolTensor:
		t, err := d.tensor()
		if err != nil {
			return nil, err
		}
		t.Booleans = true
		return t, nil
	case tagBytesList:
		n, err := d.count("bytes list length", 1)
		if err != nil {
			return nil, err
		}
		out := make([][]byte, n)
		for i := range out {
			if out[i], err = d.bytes("bytes list element"); err != nil {
				return nil, err
			}
		}
		return out, nil
	case tagStringList:
		n, err := d.count("string list length", 1)
		if err != nil {
			return nil, err
		}
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.str("string list element"); err != nil {
				return nil, err
			}
		}
		return out, nil
	case tagList:
		if depth >= maxDepth {
			return nil, fmt.Errorf("lists nested deeper than %d", maxDepth)
		}
		n, err := d.count("list length", 1)
		if err != nil {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = d.value(depth + 1); err != nil {
				return nil, fmt.Errorf("list element %d: %w", i, err)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown value tag %d", tag)
}

func (d *decoder) tensor() (*tensor.Tensor, error) {
	if d.remaining() == 0 {
		return nil, fmt.Errorf("tensor dtype: %w", errTruncated)
	}
	dt := tensor.DType(d.buf[d.pos])
	d.pos++
	size := dt.Size()
	if size == 0 {
		return nil, fmt.Errorf("tensor of invalid dtype %d", uint8(dt))
	}
	rank, err := d.count("tensor rank", 1)
	if err != nil {
		return nil, err
	}
	// A scalar keeps a nil shape, as tensor.New and tensor.FromBytes give it.
	var shape []int
	if rank > 0 {
		shape = make([]int, rank)
	}
	// The element count is computed with overflow checks; a zero dimension
	// makes it zero whatever the others declare.
	for i := range shape {
		u, err := d.uvarint("tensor dimension")
		if err != nil {
			return nil, err
		}
		if u > math.MaxInt32 {
			return nil, fmt.Errorf("tensor dimension %d too large", u)
		}
		shape[i] = int(u)
	}
	elems, overflow := numElements(shape)
	for d.pos%8 != 0 {
		if d.pos >= len(d.buf) {
			return nil, fmt.Errorf("tensor padding: %w", errTruncated)
		}
		if d.buf[d.pos] != 0 {
			return nil, fmt.Errorf("non-zero tensor padding")
		}
		d.pos++
	}
	if overflow || elems > uint64(d.remaining()/size) {
		return nil, fmt.Errorf("tensor %s%v needs more than the %d remaining bytes: %w", dt, shape, d.remaining(), errTruncated)
	}
	n := int(elems) * size
	data := d.buf[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	if d.alias {
		return &tensor.Tensor{DType: dt, Shape: shape, Data: data}, nil
	}
	// A copy of its own, from the recycling pool: replayed samples are
	// as disposable as computed ones.
	own := tensor.AllocBytes(n)
	copy(own, data)
	return tensor.WrapRecyclable(dt, shape, own), nil
}

// uvarintLen is the length of the minimal varint encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// numElements multiplies dimensions in [0, MaxInt32], reporting overflow of
// int64 unless a zero dimension makes the product zero anyway.
func numElements(shape []int) (n uint64, overflow bool) {
	n = 1
	for _, d := range shape {
		if d == 0 {
			return 0, false
		}
	}
	for _, d := range shape {
		u := uint64(d)
		if n > math.MaxInt64/u {
			return 0, true
		}
		n *= u
	}
	return n, false
}
