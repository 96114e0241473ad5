package cache

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

func mustTensor(t testing.TB, dt tensor.DType, shape []int, data []byte) *tensor.Tensor {
	t.Helper()
	x, err := tensor.FromBytes(dt, shape, data)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// codecCases holds one sample per value type, plus edge cases, each as the
// decoder must return it.
func codecCases(t testing.TB) map[string]*sample.Sample {
	one := func(v any) *sample.Sample {
		return &sample.Sample{ID: 7, Epoch: 2, Origin: "data/a.tfrecord record 3", BatchSize: 0, Fields: map[string]any{"v": v}}
	}
	return map[string]*sample.Sample{
		"empty":       {Fields: map[string]any{}},
		"negative id": {ID: -1 << 63, Epoch: -3, BatchSize: 32, Origin: "ü", Fields: map[string]any{}},
		"nil":         one(nil),
		"int64":       one(int64(-1234567890123)),
		"int64 max":   one(int64(math.MaxInt64)),
		"float64":     one(3.25),
		"float64 nan": one(math.Float64frombits(0x7ff8000000000001)),
		"float64 -0":  one(math.Copysign(0, -1)),
		"true":        one(true),
		"false":       one(false),
		"string":      one("héllo"),
		"empty str":   one(""),
		"bytes":       one([]byte{0, 1, 2, 255}),
		"empty bytes": one([]byte{}),
		"tensor u8":   one(mustTensor(t, tensor.Uint8, []int{2, 3}, []byte{1, 2, 3, 4, 5, 6})),
		"tensor i32":  one(tensor.FromInt64s([]int64{1, -2, 3})),
		"tensor bool": one(&tensor.Tensor{DType: tensor.Uint8, Shape: []int{3}, Data: []byte{1, 0, 1}, Booleans: true}),
		"tensor f32":  one(tensor.FromFloat32s([]float32{1.5, -2, float32(math.Inf(1))})),
		"tensor f64":  one(mustTensor(t, tensor.Float64, []int{1, 1, 2}, bytes.Repeat([]byte{7}, 16))),
		"scalar":      one(tensor.New(tensor.Int32)),
		"zero dim":    one(tensor.New(tensor.Float32, 4, 0, 1<<30)),
		"bytes list":  one([][]byte{{1}, {}, {2, 3}}),
		"string list": one([]string{"a", "", "bc"}),
		"empty lists": {Fields: map[string]any{"a": [][]byte{}, "b": []string{}, "c": []any{}}},
		"nested": one([]any{int64(1), "x", []any{true, nil, []byte{9}, []any{}},
			tensor.FromFloat32s([]float32{1}), [][]byte{{4}}, []string{"s"}, 2.5}),
		"many fields": {ID: 1 << 40, Fields: map[string]any{
			"image/encoded": []byte(strings.Repeat("j", 300)),
			"label":         int64(3),
			"image":         tensor.New(tensor.Uint8, 8, 8, 3),
			"":              "empty name",
			"zz":            []any{int64(1)},
		}},
	}
}

func TestRoundTrip(t *testing.T) {
	for name, s := range codecCases(t) {
		t.Run(name, func(t *testing.T) {
			b := Encode(nil, s)
			for _, alias := range []bool{false, true} {
				got, err := decode(b, alias)
				if err != nil {
					t.Fatalf("decode(alias=%v): %v", alias, err)
				}
				if !sameSample(got, s) {
					t.Fatalf("decode(alias=%v) = %#v, want %#v", alias, got, s)
				}
				if again := Encode(nil, got); !bytes.Equal(again, b) {
					t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b)
				}
			}
		})
	}
}

func TestDecodeDoesNotAlias(t *testing.T) {
	s := &sample.Sample{Fields: map[string]any{"b": []byte{1, 2}, "t": tensor.FromFloat32s([]float32{1})}}
	b := Encode(nil, s)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0xff
	}
	if !sameSample(got, s) {
		t.Fatalf("decoded sample changed with its buffer: %#v", got)
	}
}

// TestEncodeAppends checks that Encode appends after existing bytes and
// that tensor data stays 8-byte aligned relative to the encoding's start.
func TestEncodeAppends(t *testing.T) {
	s := &sample.Sample{Fields: map[string]any{"t": tensor.FromFloat32s([]float32{1, 2})}}
	want := Encode(nil, s)
	got := Encode([]byte("abc"), s)
	if string(got[:3]) != "abc" || !bytes.Equal(got[3:], want) {
		t.Fatalf("Encode(prefix) = %x, want abc + %x", got, want)
	}
	if off := bytes.Index(want, s.Fields["t"].(*tensor.Tensor).Data); off%8 != 0 {
		t.Fatalf("tensor data at offset %d, not 8-aligned", off)
	}
}

func TestEncodeRejects(t *testing.T) {
	for name, v := range map[string]any{
		"int":        42,
		"float32":    float32(1),
		"map":        map[string]any{},
		"bad tensor": &tensor.Tensor{DType: tensor.Float32, Shape: []int{3}, Data: []byte{1}},
		"bad dtype":  &tensor.Tensor{DType: 99, Data: []byte{}},
		"neg dim":    &tensor.Tensor{DType: tensor.Uint8, Shape: []int{-1}, Data: []byte{}},
	} {
		if _, err := encode(nil, &sample.Sample{Fields: map[string]any{"f": v}}); err == nil {
			t.Errorf("%s: encode succeeded", name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Encode did not panic on an int field")
		}
	}()
	Encode(nil, &sample.Sample{Fields: map[string]any{"f": 1}})
}

func TestDecodeErrors(t *testing.T) {
	valid := Encode(nil, &sample.Sample{ID: 1, Fields: map[string]any{"t": tensor.FromFloat32s([]float32{1, 2})}})
	cases := map[string][]byte{
		"empty":            nil,
		"version":          {9},
		"truncated":        valid[:len(valid)-1],
		"trailing":         append(append([]byte{}, valid...), 0),
		"non-minimal":      {codecVersion, 0x80, 0x00},
		"huge field count": {codecVersion, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"unsorted":         {codecVersion, 0, 0, 0, 0, 2, 1, 'b', tagNil, 1, 'a', tagNil},
		"duplicate":        {codecVersion, 0, 0, 0, 0, 2, 1, 'a', tagNil, 1, 'a', tagNil},
		"bad tag":          {codecVersion, 0, 0, 0, 0, 1, 1, 'a', numTags},
		"bad dtype":        {codecVersion, 0, 0, 0, 0, 1, 1, 'a', tagTensor, 0, 0},
		"tensor too big":   {codecVersion, 0, 0, 0, 0, 1, 1, 'a', tagTensor, byte(tensor.Uint8), 1, 0x7f, 0, 0, 0, 0, 0, 0, 0},
		"tensor overflow":  {codecVersion, 0, 0, 0, 0, 1, 1, 'a', tagTensor, byte(tensor.Uint8), 3, 0xff, 0xff, 0xff, 0xff, 0x07, 0xff, 0xff, 0xff, 0xff, 0x07, 0xff, 0xff, 0xff, 0xff, 0x07},
		"nonzero padding":  {codecVersion, 0, 0, 0, 0, 1, 1, 'a', tagTensor, byte(tensor.Uint8), 0, 1, 0, 0, 0, 0, 0, 0, 7},
		"list count":       {codecVersion, 0, 0, 0, 0, 1, 1, 'a', tagList, 5, tagNil},
		"deep":             append([]byte{codecVersion, 0, 0, 0, 0, 1, 1, 'a'}, bytes.Repeat([]byte{tagList, 1}, maxDepth+1)...),
		"string past end":  {codecVersion, 0, 0, 5, 'a'},
		"float truncated":  {codecVersion, 0, 0, 0, 0, 1, 1, 'a', tagFloat, 1, 2},
	}
	for name, b := range cases {
		s, err := Decode(b)
		if err == nil {
			t.Errorf("%s: Decode(%x) = %#v, want an error", name, b, s)
			continue
		}
		if !strings.HasPrefix(err.Error(), "cache: decode: ") {
			t.Errorf("%s: error %q lacks the cache: decode: prefix", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range codecCases(f) {
		f.Add(Encode(nil, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, alias := range []bool{false, true} {
			s, err := decode(b, alias)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "cache: decode: ") {
					t.Fatalf("error %q lacks the prefix", err)
				}
				continue
			}
			again, err := encode(nil, s)
			if err != nil {
				t.Fatalf("decoded sample does not encode: %v", err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b)
			}
		}
	})
}

// sameSample is reflect.DeepEqual except that float64 values compare by
// their bits, so that NaN equals itself and -0 differs from 0: exactly what
// a byte-exact cache must preserve; and tensors by dtype, shape and bytes,
// not by whether their buffers are recyclable.
func sameSample(a, b *sample.Sample) bool {
	if a.ID != b.ID || a.Epoch != b.Epoch || a.Origin != b.Origin || a.BatchSize != b.BatchSize || len(a.Fields) != len(b.Fields) {
		return false
	}
	for k, va := range a.Fields {
		vb, ok := b.Fields[k]
		if !ok || !sameValue(va, vb) {
			return false
		}
	}
	return true
}

func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case *tensor.Tensor:
		y, ok := b.(*tensor.Tensor)
		return ok && tensor.Equal(x, y) && x.Booleans == y.Booleans
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
