// Package example encodes and decodes tf.train.Example protocol buffers
// by hand, without generated code. Only the wire format of
//
//	message Example   { Features features = 1; }
//	message Features  { map<string, Feature> feature = 1; }
//	message Feature   { oneof kind { BytesList bytes_list = 1;
//	                                 FloatList float_list = 2;
//	                                 Int64List int64_list = 3; } }
//	message BytesList { repeated bytes value = 1; }
//	message FloatList { repeated float value = 1 [packed = true]; }
//	message Int64List { repeated int64 value = 1 [packed = true]; }
//
// is needed; decoding by hand lets byte values alias the record instead
// of being copied, and skips the features a spec does not ask for.
package example

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// Kind says which list a Feature holds: the oneof member that is set.
type Kind uint8

// The kinds of a Feature. KindNone is a Feature with no list set, which
// TensorFlow writes for example for missing CSV values.
const (
	KindNone Kind = iota
	KindBytes
	KindFloat
	KindInt64
)

// String returns the protobuf field name of the kind, or "none".
func (k Kind) String() string {
	switch k {
	case KindNone:
		return "none"
	case KindBytes:
		return "bytes_list"
	case KindFloat:
		return "float_list"
	case KindInt64:
		return "int64_list"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Feature is one value list of an Example. Only the list selected by Kind is
// meaningful; Marshal ignores the others.
type Feature struct {
	Kind   Kind
	Bytes  [][]byte
	Floats []float32
	Ints   []int64
}

// Len returns the number of values in the list selected by Kind.
func (f *Feature) Len() int {
	switch f.Kind {
	case KindBytes:
		return len(f.Bytes)
	case KindFloat:
		return len(f.Floats)
	case KindInt64:
		return len(f.Ints)
	}
	return 0
}

// Example is a decoded tf.train.Example: a map from feature name to value
// list.
type Example struct {
	Features map[string]*Feature
}

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireStart   = 3
	wireEnd     = 4
	wireFixed32 = 5
)

// Errors for malformed wire data; they are wrapped with the path to the
// field in which they occurred.
var (
	errTruncVarint = errors.New("truncated varint")
	errTruncLength = errors.New("truncated length")
	errTruncFixed  = errors.New("truncated fixed-width value")
	errOverflow    = errors.New("varint overflows 64 bits")
	errGroup       = errors.New("groups are not supported")
	errFieldZero   = errors.New("invalid field number 0")
)

// ErrMalformed is matched (with errors.Is) by every error Unmarshal and
// ParseInto return for input that is not a valid Example.
var ErrMalformed = errors.New("malformed tf.train.Example")

// parseError carries the field path ("feature \"x\": bytes_list") and cause.
type parseError struct {
	path string
	err  error
}

func (e *parseError) Error() string {
	if e.path == "" {
		return "example: " + e.err.Error()
	}
	return "example: " + e.path + ": " + e.err.Error()
}

func (e *parseError) Unwrap() []error { return []error{e.err, ErrMalformed} }

func wrap(path string, err error) error {
	if pe, ok := err.(*parseError); ok {
		if path != "" {
			if pe.path != "" {
				pe.path = path + ": " + pe.path
			} else {
				pe.path = path
			}
		}
		return pe
	}
	return &parseError{path: path, err: err}
}

// varint decodes a base-128 varint at b[i:], returning the value and the
// index after it. It is written here rather than calling
// protowire.ConsumeVarint because the compiler inlines it: ParseInto ran
// 6-25 % slower calling protowire's (BenchmarkParseTabular).
func varint(b []byte, i int) (uint64, int, error) {
	// Single-byte values dominate (tags, short lengths, small ints).
	if i < len(b) && b[i] < 0x80 {
		return uint64(b[i]), i + 1, nil
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if i >= len(b) {
			return 0, 0, errTruncVarint
		}
		c := b[i]
		i++
		if shift == 63 && c > 1 {
			return 0, 0, errOverflow
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i, nil
		}
	}
}

// field is one decoded tag and value.
type field struct {
	num  uint64
	wire int
	val  uint64 // varint, fixed32 or fixed64 value
	data []byte // payload of a length-delimited field
}

// next decodes the field at b[i:] and returns the index after it.
func next(b []byte, i int) (field, int, error) {
	tag, i, err := varint(b, i)
	if err != nil {
		return field{}, 0, err
	}
	f := field{num: tag >> 3, wire: int(tag & 7)}
	if f.num == 0 {
		return f, 0, errFieldZero
	}
	switch f.wire {
	case wireVarint:
		f.val, i, err = varint(b, i)
	case wireFixed64:
		if len(b)-i < 8 {
			return f, 0, errTruncFixed
		}
		f.val = binary.LittleEndian.Uint64(b[i:])
		i += 8
	case wireFixed32:
		if len(b)-i < 4 {
			return f, 0, errTruncFixed
		}
		f.val = uint64(binary.LittleEndian.Uint32(b[i:]))
		i += 4
	case wireBytes:
		var n uint64
		n, i, err = varint(b, i)
		if err != nil {
			if err == errTruncVarint {
				err = errTruncLength
			}
			return f, 0, err
		}
		if n > uint64(len(b)-i) {
			return f, 0, fmt.Errorf("length %d past end of message (%d bytes left)", n, len(b)-i)
		}
		f.data = b[i : i+int(n) : i+int(n)]
		i += int(n)
	case wireStart, wireEnd:
		return f, 0, errGroup
	default:
		return f, 0, fmt.Errorf("invalid wire type %d", f.wire)
	}
	return f, i, err
}

func wrongWire(name string, f field) error {
	return fmt.Errorf("%s: wrong wire type %d for field %d", name, f.wire, f.num)
}

// Unmarshal decodes a serialized tf.train.Example. Byte values alias b, so b
// must not be modified while the result is in use. Unknown fields are
// skipped; a key that appears twice keeps its last value, as in protobuf.
func Unmarshal(b []byte) (*Example, error) {
	ex := &Example{Features: make(map[string]*Feature)}
	// Features come from one slab rather than one allocation each; tabular
	// records have dozens of tiny features.
	var slab []Feature
	err := walkExample(b, func(key []byte, values [][]byte) error {
		if len(slab) == 0 {
			slab = make([]Feature, 16)
		}
		f := &slab[0]
		slab = slab[1:]
		for _, v := range values {
			if err := parseFeature(v, f); err != nil {
				return wrap("feature "+strconv.Quote(string(key)), err)
			}
		}
		ex.Features[string(key)] = f
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// ParseInto decodes only the features named in want, calling fn with the
// index want gives for each one found, in wire order. Features not in want
// are skipped without decoding their values (so damage inside them goes
// unreported), and no map is built, which is what makes this cheaper than
// Unmarshal for the usual parse stage that keeps a few of many features. A key repeated on the wire calls fn again and
// the last call wins, as in protobuf. Byte values alias b; fn may keep f.
func ParseInto(b []byte, want map[string]int, fn func(idx int, f *Feature) error) error {
	return walkExample(b, func(key []byte, values [][]byte) error {
		idx, ok := want[string(key)]
		if !ok {
			return nil
		}
		f := &Feature{}
		for _, v := range values {
			if err := parseFeature(v, f); err != nil {
				return wrap("feature "+strconv.Quote(string(key)), err)
			}
		}
		return fn(idx, f)
	})
}

// walkExample calls fn for every map entry of the Example in b with the
// entry's key and its Feature payloads (a map entry may carry the value field
// more than once, in which case protobuf merges them).
func walkExample(b []byte, fn func(key []byte, values [][]byte) error) error {
	var values [][]byte
	for i := 0; i < len(b); {
		f, j, err := next(b, i)
		if err != nil {
			return wrap("", err)
		}
		i = j
		if f.num != 1 {
			continue
		}
		if f.wire != wireBytes {
			return wrap("", wrongWire("features", f))
		}
		if err := walkMap(f.data, "features", "feature", &values, fn); err != nil {
			return err
		}
	}
	return nil
}

// walkMap calls fn for every entry of the map<string, message> in field 1
// of b (a Features or a FeatureLists message) with its key and value
// payloads; what and entry name the message and an entry in errors, and
// values is scratch.
func walkMap(fb []byte, what, entry string, values *[][]byte, fn func(key []byte, values [][]byte) error) error {
	for k := 0; k < len(fb); {
		e, l, err := next(fb, k)
		if err != nil {
			return wrap(what, err)
		}
		k = l
		if e.num != 1 {
			continue
		}
		if e.wire != wireBytes {
			return wrap(what, wrongWire(entry, e))
		}
		var key []byte
		*values = (*values)[:0]
		for m := 0; m < len(e.data); {
			kv, n, err := next(e.data, m)
			if err != nil {
				return wrap(what+": map entry", err)
			}
			m = n
			switch kv.num {
			case 1:
				if kv.wire != wireBytes {
					return wrap(what+": map entry", wrongWire("key", kv))
				}
				key = kv.data
			case 2:
				if kv.wire != wireBytes {
					return wrap(what+": map entry", wrongWire("value", kv))
				}
				*values = append(*values, kv.data)
			}
		}
		// Another message can parse as an Example by accident (an
		// ExampleListWithContext puts whole Examples where keys go);
		// real feature keys are text.
		if !isText(key) {
			return wrap(what, &NotTextError{Key: key})
		}
		if err := fn(key, *values); err != nil {
			return err
		}
	}
	return nil
}

// HasFeatureLists reports whether b, a serialized message, holds a
// length-delimited field 2, as a tf.train.SequenceExample's feature_lists
// is: a field 2 of another wire type is an unknown field of an Example.
func HasFeatureLists(b []byte) bool {
	for i := 0; i < len(b); {
		f, j, err := next(b, i)
		if err != nil {
			return false
		}
		if f.num == 2 && f.wire == wireBytes {
			return true
		}
		i = j
	}
	return false
}

// FeatureLists decodes the feature_lists of a serialized
// tf.train.SequenceExample: each key's steps, in order. The context of a
// SequenceExample is in the field an Example keeps its features in, so
// Unmarshal reads it; FeatureLists reads the rest, and returns an empty
// map for an Example. Byte values alias b.
func FeatureLists(b []byte) (map[string][]*Feature, error) {
	out := map[string][]*Feature{}
	var values [][]byte
	for i := 0; i < len(b); {
		f, j, err := next(b, i)
		if err != nil {
			return nil, wrap("", err)
		}
		i = j
		if f.num != 2 {
			continue
		}
		if f.wire != wireBytes {
			return nil, wrap("", wrongWire("feature_lists", f))
		}
		err = walkMap(f.data, "feature_lists", "feature list", &values, func(key []byte, vals [][]byte) error {
			steps := []*Feature{} // FeatureList: repeated Feature in field 1; maybe none
			for _, v := range vals {
				for m := 0; m < len(v); {
					st, n, err := next(v, m)
					if err != nil {
						return wrap("feature list "+strconv.Quote(string(key)), err)
					}
					m = n
					if st.num != 1 {
						continue
					}
					if st.wire != wireBytes {
						return wrap("feature list "+strconv.Quote(string(key)), wrongWire("feature", st))
					}
					ft := &Feature{}
					if err := parseFeature(st.data, ft); err != nil {
						return wrap(fmt.Sprintf("feature list %q step %d", key, len(steps)), err)
					}
					steps = append(steps, ft)
				}
			}
			out[string(key)] = steps
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errFound ends HasFeatureList's walk at the key.
var errFound = errors.New("found")

// HasFeatureList reports whether serialized b is a tf.train.SequenceExample
// with a feature list named key (an empty one too). It decodes no steps,
// so a reader may ask of every record missing a feature; a record it
// cannot read says no.
func HasFeatureList(b []byte, key string) bool {
	var values [][]byte
	for i := 0; i < len(b); {
		f, j, err := next(b, i)
		if err != nil {
			return false
		}
		i = j
		if f.num != 2 || f.wire != wireBytes {
			continue
		}
		err = walkMap(f.data, "feature_lists", "feature list", &values, func(k []byte, _ [][]byte) error {
			if string(k) == key {
				return errFound
			}
			return nil
		})
		if err == errFound {
			return true
		}
	}
	return false
}

// NotTextError is the error of a record whose feature key is not text: the
// record is some other message that happens to parse as an Example. Key
// aliases the input.
type NotTextError struct{ Key []byte }

// Error implements error.
func (e *NotTextError) Error() string {
	return fmt.Sprintf("feature key %s is not text: the record is not a tf.train.Example", preview(e.Key))
}

// isText reports whether a feature key is text: valid UTF-8 without
// control characters.
func isText(key []byte) bool {
	// Keys are nearly always printable ASCII; check that byte by byte
	// before decoding runes (ParseInto runs this for every feature).
	ascii := true
	for _, c := range key {
		if c < 0x20 || c >= 0x7f {
			ascii = false
			break
		}
	}
	if ascii {
		return true
	}
	for len(key) > 0 {
		r, size := utf8.DecodeRune(key)
		if r == utf8.RuneError && size <= 1 || unicode.IsControl(r) {
			return false
		}
		key = key[size:]
	}
	return true
}

// previewBytes is how much of a key an error quotes.
const previewBytes = 40

// preview quotes b, cut to previewBytes with its length.
func preview(b []byte) string {
	if len(b) <= previewBytes {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(string(b[:previewBytes])), len(b))
}

// parseFeature merges the serialized Feature in b into f. Setting a
// different oneof member than f holds replaces it; the same member merges
// (lists concatenate), matching protobuf merge semantics.
func parseFeature(b []byte, f *Feature) error {
	for i := 0; i < len(b); {
		fl, j, err := next(b, i)
		if err != nil {
			return err
		}
		i = j
		var kind Kind
		switch fl.num {
		case 1:
			kind = KindBytes
		case 2:
			kind = KindFloat
		case 3:
			kind = KindInt64
		default:
			continue
		}
		if fl.wire != wireBytes {
			return wrongWire(kind.String(), fl)
		}
		if f.Kind != kind {
			*f = Feature{Kind: kind}
		}
		switch kind {
		case KindBytes:
			err = parseBytesList(fl.data, f)
		case KindFloat:
			err = parseFloatList(fl.data, f)
		case KindInt64:
			err = parseInt64List(fl.data, f)
		}
		if err != nil {
			return wrap(kind.String(), err)
		}
	}
	return nil
}

func parseBytesList(b []byte, f *Feature) error {
	if f.Bytes == nil {
		f.Bytes = [][]byte{}
	}
	for i := 0; i < len(b); {
		v, j, err := next(b, i)
		if err != nil {
			return err
		}
		i = j
		if v.num != 1 {
			continue
		}
		if v.wire != wireBytes {
			return wrongWire("value", v)
		}
		f.Bytes = append(f.Bytes, v.data)
	}
	return nil
}

func parseFloatList(b []byte, f *Feature) error {
	if f.Floats == nil {
		f.Floats = []float32{}
	}
	for i := 0; i < len(b); {
		v, j, err := next(b, i)
		if err != nil {
			return err
		}
		i = j
		if v.num != 1 {
			continue
		}
		switch v.wire {
		case wireFixed32:
			f.Floats = append(f.Floats, math.Float32frombits(uint32(v.val)))
		case wireBytes:
			if len(v.data)%4 != 0 {
				return fmt.Errorf("packed value length %d is not a multiple of 4", len(v.data))
			}
			f.Floats = slices.Grow(f.Floats, len(v.data)/4)
			for k := 0; k < len(v.data); k += 4 {
				f.Floats = append(f.Floats, math.Float32frombits(binary.LittleEndian.Uint32(v.data[k:])))
			}
		default:
			return wrongWire("value", v)
		}
	}
	return nil
}

func parseInt64List(b []byte, f *Feature) error {
	if f.Ints == nil {
		f.Ints = []int64{}
	}
	for i := 0; i < len(b); {
		v, j, err := next(b, i)
		if err != nil {
			return err
		}
		i = j
		if v.num != 1 {
			continue
		}
		switch v.wire {
		case wireVarint:
			f.Ints = append(f.Ints, int64(v.val))
		case wireBytes:
			// Every varint ends in exactly one byte below 0x80.
			n := 0
			for _, c := range v.data {
				if c < 0x80 {
					n++
				}
			}
			f.Ints = slices.Grow(f.Ints, n)
			for k := 0; k < len(v.data); {
				x, l, err := varint(v.data, k)
				if err != nil {
					return fmt.Errorf("packed value: %w", err)
				}
				k = l
				f.Ints = append(f.Ints, int64(x))
			}
		default:
			return wrongWire("value", v)
		}
	}
	return nil
}

// Marshal encodes ex the way TensorFlow does: features sorted by key (so the
// output is deterministic), numbers in packed encoding, and a Feature with
// KindNone written as an empty message. A nil Feature is written as KindNone.
func Marshal(ex *Example) []byte {
	if ex == nil || len(ex.Features) == 0 {
		return []byte{}
	}
	keys := make([]string, 0, len(ex.Features))
	for k := range ex.Features {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	// Sizes first, so the output is allocated exactly once.
	featuresLen := featuresLen(ex)
	out := make([]byte, 0, 1+protowire.SizeVarint(uint64(featuresLen))+featuresLen)
	out = append(out, 0x0a)
	out = binary.AppendUvarint(out, uint64(featuresLen))
	for _, k := range keys {
		f := ex.Features[k]
		fl := featureLen(f)
		entry := 1 + protowire.SizeVarint(uint64(len(k))) + len(k) + 1 + protowire.SizeVarint(uint64(fl)) + fl
		out = append(out, 0x0a)
		out = binary.AppendUvarint(out, uint64(entry))
		out = append(out, 0x0a)
		out = binary.AppendUvarint(out, uint64(len(k)))
		out = append(out, k...)
		out = append(out, 0x12)
		out = binary.AppendUvarint(out, uint64(fl))
		out = appendFeature(out, f)
	}
	return out
}

// Size returns the length of Marshal(ex), without marshalling it.
func Size(ex *Example) int {
	if ex == nil || len(ex.Features) == 0 {
		return 0
	}
	n := featuresLen(ex)
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

// featuresLen is the length of ex's features message.
func featuresLen(ex *Example) int {
	n := 0
	for k, f := range ex.Features {
		fl := featureLen(f)
		entry := 1 + protowire.SizeVarint(uint64(len(k))) + len(k) + 1 + protowire.SizeVarint(uint64(fl)) + fl
		n += 1 + protowire.SizeVarint(uint64(entry)) + entry
	}
	return n
}

// listLen returns the size of the BytesList/FloatList/Int64List message.
func listLen(f *Feature) int {
	switch f.Kind {
	case KindBytes:
		n := 0
		for _, v := range f.Bytes {
			n += 1 + protowire.SizeVarint(uint64(len(v))) + len(v)
		}
		return n
	case KindFloat:
		if len(f.Floats) == 0 {
			return 0
		}
		p := 4 * len(f.Floats)
		return 1 + protowire.SizeVarint(uint64(p)) + p
	case KindInt64:
		if len(f.Ints) == 0 {
			return 0
		}
		p := packedIntsLen(f.Ints)
		return 1 + protowire.SizeVarint(uint64(p)) + p
	}
	return 0
}

func packedIntsLen(v []int64) int {
	p := 0
	for _, x := range v {
		p += protowire.SizeVarint(uint64(x))
	}
	return p
}

// featureLen returns the size of the Feature message.
func featureLen(f *Feature) int {
	if f == nil || f.Kind < KindBytes || f.Kind > KindInt64 {
		return 0
	}
	l := listLen(f)
	return 1 + protowire.SizeVarint(uint64(l)) + l
}

func appendFeature(out []byte, f *Feature) []byte {
	if f == nil || f.Kind < KindBytes || f.Kind > KindInt64 {
		return out
	}
	out = append(out, byte(f.Kind)<<3|wireBytes)
	out = binary.AppendUvarint(out, uint64(listLen(f)))
	switch f.Kind {
	case KindBytes:
		for _, v := range f.Bytes {
			out = append(out, 0x0a)
			out = binary.AppendUvarint(out, uint64(len(v)))
			out = append(out, v...)
		}
	case KindFloat:
		if len(f.Floats) > 0 {
			out = append(out, 0x0a)
			out = binary.AppendUvarint(out, uint64(4*len(f.Floats)))
			for _, x := range f.Floats {
				out = binary.LittleEndian.AppendUint32(out, math.Float32bits(x))
			}
		}
	case KindInt64:
		if len(f.Ints) > 0 {
			out = append(out, 0x0a)
			out = binary.AppendUvarint(out, uint64(packedIntsLen(f.Ints)))
			for _, x := range f.Ints {
				out = binary.AppendUvarint(out, uint64(x))
			}
		}
	}
	return out
}
