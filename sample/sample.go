// Package sample defines what flows between stages: a Sample is a set of
// named fields, and a Schema is the static type of those fields, known at
// validate time so that expressions can be type-checked without running.
//
// Field values use a small closed set of Go types:
//
//	int64, float64, bool, string, []byte, *tensor.Tensor,
//	[][]byte and []string (variable-length bytes/string features),
//	[]any (lists built by expressions).
package sample

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/piperun/piperun/tensor"
)

// Sample is one element of the stream.
type Sample struct {
	// ID is the sample's position in its epoch at the stage that created it.
	// It seeds per-sample randomness, so it must not depend on parallelism.
	ID int64
	// Epoch is the pass over the sources that produced the sample (from 0).
	Epoch int
	// Origin says where the sample came from, for error messages, such as
	// "data/train-0.tfrecord record 17".
	Origin string
	// Fields maps field names to values of the types listed in the package doc.
	Fields map[string]any
	// BatchSize is the number of samples stacked into this one by batch;
	// 0 for a plain sample.
	BatchSize int
	// Held is the number of bytes the engine reserved for this sample in the
	// memory budget. Only the engine writes it.
	Held int64
	// Shared, when set, is a reservation this sample holds together with
	// the other copies a fan-out made of it; SharedPart is this copy's
	// part of it, for accounts of who holds what. Only the engine writes
	// them.
	Shared     *Shared
	SharedPart int64
	// Stands is set on a sample passed through undone because a cache
	// below holds its result: about the bytes that result takes. It is
	// reserved with the sample on its way down, so the stages above the
	// cache, not the cache, wait for the memory the result needs. Only the
	// engine writes it.
	Stands int64
}

// New returns an empty sample.
func New(id int64, epoch int, origin string) *Sample {
	return &Sample{ID: id, Epoch: epoch, Origin: origin, Fields: make(map[string]any, 4)}
}

// fieldOverhead approximates the bytes a map entry and its interface header
// cost, so that samples of many tiny fields are not counted as free.
const fieldOverhead = 64

// sampleOverhead approximates the Sample struct and its map header.
const sampleOverhead = 128

// Size estimates the bytes of host memory the sample holds.
func (s *Sample) Size() int64 {
	own, vals := s.Sizes()
	return own + vals
}

// Sizes splits Size into what the sample's own struct and field map hold,
// which every copy of it has its own of, and what its values hold, which
// copies share.
func (s *Sample) Sizes() (own, values int64) {
	own = int64(sampleOverhead + len(s.Origin))
	for k, v := range s.Fields {
		own += fieldOverhead + int64(len(k))
		values += ValueSize(v)
	}
	return own, values
}

// TextBytes is the bytes of v's text where v is a string, a byte string
// or a list of either, and 0 for any other value: a lower bound of what
// writing it out takes.
func TextBytes(v any) int64 {
	var n int64
	switch x := v.(type) {
	case []byte:
		n = int64(len(x))
	case string:
		n = int64(len(x))
	case [][]byte:
		for _, b := range x {
			n += int64(len(b))
		}
	case []string:
		for _, b := range x {
			n += int64(len(b))
		}
	}
	return n
}

// ValueBytes is the part of Size that the field values hold; the rest is
// the sample's own struct and field map, which every copy has its own of.
func (s *Sample) ValueBytes() int64 {
	var n int64
	for _, v := range s.Fields {
		n += ValueSize(v)
	}
	return n
}

// Charge is the budget this sample accounts for: its own reservation and
// its part of a shared one.
func (s *Sample) Charge() int64 { return s.Held + s.SharedPart }

// Retained is the budget that stays reserved while this copy lives: its own
// reservation and all of a shared one, which the other copies may already
// have left to it.
func (s *Sample) Retained() int64 {
	if s.Shared != nil {
		return s.Held + s.Shared.Bytes
	}
	return s.Held
}

// Clone returns a copy whose field map can be changed without affecting s.
// Values are shared: stages never mutate a value in place, and tensors are
// marked shared so that neither copy's holder recycles their buffers.
func (s *Sample) Clone() *Sample {
	c := &Sample{ID: s.ID, Epoch: s.Epoch, Origin: s.Origin, BatchSize: s.BatchSize, Fields: make(map[string]any, len(s.Fields))}
	for k, v := range s.Fields {
		ShareValue(v)
		c.Fields[k] = v
	}
	return c
}

// ShareValue marks every tensor in v as shared (see tensor.Tensor.Share).
func ShareValue(v any) {
	switch x := v.(type) {
	case *tensor.Tensor:
		x.Share()
	case []any:
		for _, e := range x {
			ShareValue(e)
		}
	}
}

// Recycle gives the buffers of s's recyclable tensors back to the pool and
// removes them from s. Only the last holder of a sample may call it.
func (s *Sample) Recycle() {
	for k, v := range s.Fields {
		if t, ok := v.(*tensor.Tensor); ok && t.Recyclable() {
			t.Recycle()
			delete(s.Fields, k)
		}
	}
}

// Describe names the sample for an error message.
func (s *Sample) Describe() string {
	if s.Origin != "" {
		return s.Origin
	}
	return fmt.Sprintf("sample %d (epoch %d)", s.ID, s.Epoch)
}

// ValueSize estimates the bytes held by one field value.
func ValueSize(v any) int64 { return valueSize(v, false) }

// DataSize is Size with each tensor counted by its data, not by the buffer
// it may have borrowed: an epoch's short last batch sits in an idle full
// batch's buffer (tensor.AllocShort) or in one of its own, as the pool's
// timing has it. Decisions that shape the output (what a shuffle held to
// its share of the budget keeps, what an in-memory cache finds too large)
// size samples by it, so that the same spec and seed give the same output
// every run; the budget is charged what they hold (Size, Retained).
func (s *Sample) DataSize() int64 {
	n := int64(sampleOverhead + len(s.Origin))
	for k, v := range s.Fields {
		n += fieldOverhead + int64(len(k)) + valueSize(v, true)
	}
	return n
}

// valueSize is ValueSize, with a tensor counted by its data alone where
// data is set.
func valueSize(v any, data bool) int64 {
	switch x := v.(type) {
	case nil:
		return 0
	case int64, float64, bool, int, float32, int32:
		return 8
	case string:
		return int64(len(x))
	case []byte:
		return int64(len(x))
	case *tensor.Tensor:
		if data {
			return int64(len(x.Data)) + 64
		}
		return int64(x.HeldBytes()) + 64
	case [][]byte:
		n := int64(24 * len(x))
		for _, b := range x {
			n += int64(len(b))
		}
		return n
	case []string:
		n := int64(16 * len(x))
		for _, b := range x {
			n += int64(len(b))
		}
		return n
	case []any:
		n := int64(16 * len(x))
		for _, e := range x {
			n += valueSize(e, data)
		}
		return n
	}
	return 16
}

// Kind is the broad type of a field.
type Kind uint8

// The field kinds. Any means the type is not known until run time, e.g. a
// key of a JSON line.
const (
	Any Kind = iota
	Int
	Float
	Bool
	String
	Bytes
	Tensor
	List
)

var kindNames = [...]string{"any", "int64", "float64", "bool", "string", "bytes", "tensor", "list"}

// String returns the kind's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Type is the static type of a field.
type Type struct {
	Kind Kind
	// DType is the element type of a Tensor.
	DType tensor.DType
	// Shape is a Tensor's shape; -1 marks a dimension known only at run time.
	// A nil Shape on a Tensor means even the rank is unknown.
	Shape []int
	// Elem is a List's element kind (Bytes, String or Any).
	Elem Kind
	// Deferred, on a uint8 Tensor, says the value is float32 in the spec's
	// terms but travels as its uint8 levels until the next batch converts
	// it through these tables while stacking (see spec.DeferrableField).
	Deferred *tensor.FloatLUT
}

// Common types.
var (
	TAny    = Type{Kind: Any}
	TInt    = Type{Kind: Int}
	TFloat  = Type{Kind: Float}
	TBool   = Type{Kind: Bool}
	TString = Type{Kind: String}
	TBytes  = Type{Kind: Bytes}
)

// TensorOf returns a tensor type.
func TensorOf(dt tensor.DType, shape ...int) Type {
	if shape == nil {
		shape = []int{}
	}
	return Type{Kind: Tensor, DType: dt, Shape: shape}
}

// ListOf returns a list type.
func ListOf(elem Kind) Type { return Type{Kind: List, Elem: elem} }

// String writes the type as validate prints it, e.g. "tensor<uint8>[224 224 3]".
func (t Type) String() string {
	switch t.Kind {
	case Tensor:
		dt := t.DType.String()
		if t.Deferred != nil {
			dt += "→float32"
		}
		if t.Shape == nil {
			return fmt.Sprintf("tensor<%s>[?]", dt)
		}
		dims := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			if d < 0 {
				dims[i] = "?"
			} else {
				dims[i] = fmt.Sprint(d)
			}
		}
		return fmt.Sprintf("tensor<%s>[%s]", dt, strings.Join(dims, " "))
	case List:
		return fmt.Sprintf("list<%s>", t.Elem)
	case Float:
		if t.DType == tensor.Float32 {
			return "float32" // a parse_example feature; held as a float64
		}
	}
	return t.Kind.String()
}

// KnownShape reports whether every dimension of a tensor type is known.
func (t Type) KnownShape() bool {
	if t.Kind != Tensor || t.Shape == nil {
		return false
	}
	for _, d := range t.Shape {
		if d < 0 {
			return false
		}
	}
	return true
}

// EstimateBytes estimates the size of one value of type t, or -1 when it
// cannot be known without looking at data (bytes, strings, unknown shapes).
func (t Type) EstimateBytes() int64 {
	switch t.Kind {
	case Int, Float, Bool:
		return 8
	case Tensor:
		if !t.KnownShape() {
			return -1
		}
		return int64(tensor.NumElements(t.Shape)*t.DType.Size()) + 64
	}
	return -1
}

// TypeOf returns the type of a run-time value.
func TypeOf(v any) Type {
	switch x := v.(type) {
	case int64, int, int32:
		return TInt
	case float64, float32:
		return TFloat
	case bool:
		return TBool
	case string:
		return TString
	case []byte:
		return TBytes
	case *tensor.Tensor:
		return TensorOf(x.DType, x.Shape...)
	case [][]byte:
		return ListOf(Bytes)
	case []string:
		return ListOf(String)
	}
	return ListOf(Any)
}

// Field is a named type in a schema.
type Field struct {
	Name string
	Type Type
}

// Schema is the ordered set of fields a stage emits. Open means fields not
// listed may also appear, with type Any (e.g. JSON lines).
type Schema struct {
	Fields []Field
	Open   bool
}

// Lookup returns the type of a field.
func (s Schema) Lookup(name string) (Type, bool) {
	for _, f := range s.Fields {
		if f.Name == name {
			return f.Type, true
		}
	}
	if s.Open {
		return TAny, true
	}
	return Type{}, false
}

// With returns a copy of s with the field set, replacing one of the same name.
func (s Schema) With(name string, t Type) Schema {
	out := Schema{Fields: make([]Field, 0, len(s.Fields)+1), Open: s.Open}
	replaced := false
	for _, f := range s.Fields {
		if f.Name == name {
			out.Fields = append(out.Fields, Field{name, t})
			replaced = true
			continue
		}
		out.Fields = append(out.Fields, f)
	}
	if !replaced {
		out.Fields = append(out.Fields, Field{name, t})
	}
	return out
}

// Names returns the field names in order.
func (s Schema) Names() []string {
	out := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		out[i] = f.Name
	}
	return out
}

// EstimateBytes estimates one sample's size, or -1 if any field's size is
// unknown without data, or the schema is open (fields it does not list).
func (s Schema) EstimateBytes() int64 { return s.EstimateBytesStrings(-1) }

// MinBytes is a lower bound of what a sample of the schema holds: the
// fields whose size the schema knows, with strings, bytes, lists and
// tensors of unknown shape counted empty and the unlisted fields of an
// open schema absent. Where EstimateBytes is unknown, MinBytes still lets
// a budget be found too small before a run.
func (s Schema) MinBytes() int64 {
	n := int64(sampleOverhead)
	for _, f := range s.Fields {
		n += fieldOverhead + int64(len(f.Name)) + max(0, f.Type.EstimateBytes())
	}
	return n
}

// EstimateBytesStrings is EstimateBytes counting each string field as
// str bytes; a negative str leaves strings unknown.
func (s Schema) EstimateBytesStrings(str int64) int64 {
	if s.Open {
		return -1
	}
	n := int64(sampleOverhead)
	for _, f := range s.Fields {
		b := f.Type.EstimateBytes()
		if f.Type.Kind == String {
			b = str
		}
		if b < 0 {
			return -1
		}
		n += fieldOverhead + int64(len(f.Name)) + b
	}
	return n
}

// String lists the fields, e.g. "{image: tensor<uint8>[? ? 3], label: int64}".
func (s Schema) String() string {
	parts := make([]string, 0, len(s.Fields)+1)
	for _, f := range s.Fields {
		parts = append(parts, f.Name+": "+f.Type.String())
	}
	if s.Open {
		parts = append(parts, "...")
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// SortedKeys returns a sample's field names in sorted order, for output
// that must not depend on map iteration.
func SortedKeys(fields map[string]any) []string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Normalize converts values produced by expressions to the closed set of
// field types: other integer types become int64, float32 becomes float64.
func Normalize(v any) (any, error) {
	switch x := v.(type) {
	case int64, float64, bool, string, []byte, *tensor.Tensor, [][]byte, []string, nil:
		return v, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return nil, fmt.Errorf("value %d overflows int64", x)
		}
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return nil, fmt.Errorf("value %d overflows int64", x)
		}
		return int64(x), nil
	case float32:
		return float64(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := Normalize(e)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case []int64:
		return tensor.FromInt64s(x), nil
	case []float32:
		return tensor.FromFloat32s(x), nil
	case []float64:
		t := tensor.New(tensor.Float64, len(x))
		copy(t.Float64(), x)
		return t, nil
	case []int:
		t := tensor.New(tensor.Int64, len(x))
		for i, e := range x {
			t.Int64()[i] = int64(e)
		}
		return t, nil
	}
	return nil, fmt.Errorf("%s cannot be a sample's value (numbers, strings, bytes, booleans, lists of them and tensors can)", valueWord(v))
}

// valueWord names a value's type as a spec's author knows it.
func valueWord(v any) string {
	t := reflect.TypeOf(v)
	switch {
	case t.Kind() == reflect.Map:
		return "a map ({…})"
	case t.String() == "time.Time":
		return "a time"
	case t.String() == "time.Duration":
		return "a duration"
	}
	return "a value of Go type " + t.String()
}

// Shared is the memory reservation that the copies of one sample, sent by
// a fan-out to several consumers, hold together: the bytes of the values
// they share, reserved once and released by the last copy. Each copy
// still reserves its own field map (Held), and a copy whose values have
// changed since (a map set a field) leaves the Shared and reserves what it
// now holds on its own.
type Shared struct {
	// Bytes is what the shared values hold.
	Bytes int64
	refs  atomic.Int32
	keys  []string
	vals  []any
}

// Share starts a Shared for s and the n-1 clones a fan-out is about to
// make of it, covering s's current values. It does not touch s.
func Share(s *Sample, n int) *Shared {
	sh := &Shared{Bytes: s.ValueBytes(), keys: make([]string, 0, len(s.Fields)), vals: make([]any, 0, len(s.Fields))}
	for k, v := range s.Fields {
		sh.keys = append(sh.keys, k)
		sh.vals = append(sh.vals, v)
	}
	sh.refs.Store(int32(n))
	return sh
}

// AddRefs counts n more copies holding sh.
func (sh *Shared) AddRefs(n int) { sh.refs.Add(int32(n)) }

// Drop counts one copy fewer and reports whether it was the last, whose
// caller releases Bytes.
func (sh *Shared) Drop() bool { return sh.refs.Add(-1) == 0 }

// Covers reports whether s holds exactly the values sh was made of, by
// identity: a field set anew, added or removed means s holds memory the
// Shared does not count. It relies on stages never changing a value in
// place (see Clone): a list edited element by element over the same
// backing array would still count as the same.
func (sh *Shared) Covers(s *Sample) bool {
	if len(s.Fields) != len(sh.keys) {
		return false
	}
	for i, k := range sh.keys {
		v, ok := s.Fields[k]
		if !ok || !sameValue(v, sh.vals[i]) {
			return false
		}
	}
	return true
}

// sameValue reports whether a and b are the same value in memory (not
// merely equal): the same tensor, or slices and strings over the same
// bytes. Scalars only need the same type: their size never changes, and
// each copy's field map holds its own.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case *tensor.Tensor:
		y, ok := b.(*tensor.Tensor)
		return ok && x == y
	case []byte:
		y, ok := b.([]byte)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	case string:
		y, ok := b.(string)
		return ok && len(x) == len(y) && unsafe.StringData(x) == unsafe.StringData(y)
	case [][]byte:
		y, ok := b.([][]byte)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	case []string:
		y, ok := b.([]string)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	case nil, int64, float64, bool, int, float32, int32:
		return reflect.TypeOf(a) == reflect.TypeOf(b)
	}
	return false
}
