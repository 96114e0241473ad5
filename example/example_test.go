package example

import (
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// msg builds protobuf bytes from parts: each part is appended as is.
func msg(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func lenField(num protowire.Number, payload []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, payload)
}

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func fixed32Field(num protowire.Number, v uint32) []byte {
	return protowire.AppendFixed32(protowire.AppendTag(nil, num, protowire.Fixed32Type), v)
}

func fixed64Field(num protowire.Number, v uint64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(nil, num, protowire.Fixed64Type), v)
}

// entry builds an Example from map entries (key, Feature bytes).
func exampleOf(entries ...[]byte) []byte {
	return lenField(1, msg(entries...))
}

func entry(key string, feature []byte) []byte {
	return lenField(1, msg(lenField(1, []byte(key)), lenField(2, feature)))
}

// unknowns holds one unknown field of every wire type that protobuf allows.
var unknowns = msg(varintField(99, 300), fixed64Field(100, 1), lenField(101, []byte("skip me")), fixed32Field(102, 7))

func TestUnmarshalEncodings(t *testing.T) {
	packedInts := protowire.AppendVarint(protowire.AppendVarint(protowire.AppendVarint(nil, 1), math.MaxUint64), 1<<40)
	var packedFloats []byte
	for _, f := range []float32{1.5, -2, float32(math.Inf(1))} {
		packedFloats = protowire.AppendFixed32(packedFloats, math.Float32bits(f))
	}
	b := exampleOf(
		entry("packed_ints", lenField(3, lenField(1, packedInts))),
		entry("unpacked_ints", lenField(3, msg(varintField(1, 1), varintField(1, math.MaxUint64), unknowns, varintField(1, 1<<40)))),
		entry("packed_floats", lenField(2, lenField(1, packedFloats))),
		entry("unpacked_floats", lenField(2, msg(fixed32Field(1, math.Float32bits(1.5)), fixed32Field(1, math.Float32bits(-2)), fixed32Field(1, math.Float32bits(float32(math.Inf(1))))))),
		entry("mixed_floats", lenField(2, msg(fixed32Field(1, math.Float32bits(1.5)), lenField(1, packedFloats[4:])))),
		entry("bytes", lenField(1, msg(lenField(1, []byte("a")), unknowns, lenField(1, nil), lenField(1, []byte("ccc"))))),
		entry("none", nil),
		entry("empty_ints", lenField(3, nil)),
		lenField(1, lenField(2, lenField(1, lenField(1, []byte("no key"))))),
		unknowns,
	)
	b = msg(unknowns, b, unknowns)
	ex, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &Example{Features: map[string]*Feature{
		"packed_ints":     {Kind: KindInt64, Ints: []int64{1, -1, 1 << 40}},
		"unpacked_ints":   {Kind: KindInt64, Ints: []int64{1, -1, 1 << 40}},
		"packed_floats":   {Kind: KindFloat, Floats: []float32{1.5, -2, float32(math.Inf(1))}},
		"unpacked_floats": {Kind: KindFloat, Floats: []float32{1.5, -2, float32(math.Inf(1))}},
		"mixed_floats":    {Kind: KindFloat, Floats: []float32{1.5, -2, float32(math.Inf(1))}},
		"bytes":           {Kind: KindBytes, Bytes: [][]byte{[]byte("a"), {}, []byte("ccc")}},
		"none":            {},
		"empty_ints":      {Kind: KindInt64},
		"":                {Kind: KindBytes, Bytes: [][]byte{[]byte("no key")}},
	}}
	if d := diff(ex, want); d != "" {
		t.Error(d)
	}
	// Byte values alias the input rather than copying it.
	v := ex.Features["bytes"].Bytes[2]
	if &v[0] != &b[strings.Index(string(b), "ccc")] {
		t.Error("bytes value was copied")
	}
	if cap(v) != len(v) {
		t.Error("appending to a value would overwrite the input")
	}
}

func TestUnmarshalMergeSemantics(t *testing.T) {
	ints := func(v ...uint64) []byte {
		var p []byte
		for _, x := range v {
			p = protowire.AppendVarint(p, x)
		}
		return lenField(3, lenField(1, p))
	}
	b := msg(
		exampleOf(entry("k", ints(1)), entry("dup", ints(1))),
		// A second features field merges into the map; "dup" is replaced.
		exampleOf(entry("dup", ints(2, 3))),
		exampleOf(
			// Value twice in one entry: the same oneof member merges.
			lenField(1, msg(lenField(1, []byte("merged")), lenField(2, ints(4)), lenField(2, ints(5)))),
			// A different member replaces the earlier one.
			lenField(1, msg(lenField(2, ints(6)), lenField(1, []byte("replaced")), lenField(2, lenField(1, lenField(1, []byte("x")))))),
			// Two keys in one entry: the last one names it.
			lenField(1, msg(lenField(1, []byte("first")), lenField(1, []byte("second")), lenField(2, ints(7)))),
		),
	)
	ex, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &Example{Features: map[string]*Feature{
		"k":        {Kind: KindInt64, Ints: []int64{1}},
		"dup":      {Kind: KindInt64, Ints: []int64{2, 3}},
		"merged":   {Kind: KindInt64, Ints: []int64{4, 5}},
		"replaced": {Kind: KindBytes, Bytes: [][]byte{[]byte("x")}},
		"second":   {Kind: KindInt64, Ints: []int64{7}},
	}}
	if d := diff(ex, want); d != "" {
		t.Error(d)
	}
}

func TestUnmarshalEmpty(t *testing.T) {
	for _, b := range [][]byte{nil, {}, lenField(1, nil), unknowns} {
		ex, err := Unmarshal(b)
		if err != nil || ex.Features == nil || len(ex.Features) != 0 {
			t.Errorf("Unmarshal(%x) = %+v, %v", b, ex, err)
		}
	}
}

func TestUnmarshalMalformed(t *testing.T) {
	img := func(feature []byte) []byte { return exampleOf(entry("image/encoded", feature)) }
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated tag", []byte{0x80}, "example: truncated varint"},
		{"field zero", []byte{0x00}, "example: invalid field number 0"},
		{"wire type 6", []byte{0x0e}, "example: invalid wire type 6"},
		{"wire type 7", []byte{0x0f}, "example: invalid wire type 7"},
		{"group", []byte{0x0b, 0x0c}, "example: groups are not supported"},
		{"end group", []byte{0x0c}, "example: groups are not supported"},
		{"features wrong wire", []byte{0x08, 0x01}, "example: features: wrong wire type 0 for field 1"},
		{"features truncated length", []byte{0x0a, 0x80}, "example: truncated length"},
		{"features past end", []byte{0x0a, 0x05, 0x00}, "example: length 5 past end of message (1 bytes left)"},
		{"huge length", msg([]byte{0x0a}, protowire.AppendVarint(nil, math.MaxUint64)), "example: length 18446744073709551615 past end of message (0 bytes left)"},
		{"varint overflow", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, "example: varint overflows 64 bits"},
		{"truncated fixed64", []byte{0x09, 1, 2, 3}, "example: truncated fixed-width value"},
		{"truncated fixed32", []byte{0x0d, 1, 2, 3}, "example: truncated fixed-width value"},
		{"entry wrong wire", exampleOf(varintField(1, 3)), "example: features: feature: wrong wire type 0 for field 1"},
		{"entry garbage", exampleOf(lenField(1, []byte{0xff})), "example: features: map entry: truncated varint"},
		{"key wrong wire", exampleOf(lenField(1, varintField(1, 1))), "example: features: map entry: key: wrong wire type 0 for field 1"},
		{"value wrong wire", exampleOf(lenField(1, fixed32Field(2, 1))), "example: features: map entry: value: wrong wire type 5 for field 2"},
		{"bytes_list wrong wire", img(varintField(1, 1)), `example: feature "image/encoded": bytes_list: wrong wire type 0 for field 1`},
		{"bytes_list truncated length", img(lenField(1, []byte{0x0a, 0x80})), `example: feature "image/encoded": bytes_list: truncated length`},
		{"bytes_list past end", img(lenField(1, []byte{0x0a, 0x03, 'a'})), `example: feature "image/encoded": bytes_list: length 3 past end of message (1 bytes left)`},
		{"bytes_list value wrong wire", img(lenField(1, varintField(1, 1))), `example: feature "image/encoded": bytes_list: value: wrong wire type 0 for field 1`},
		{"float_list wrong wire", img(fixed32Field(2, 1)), `example: feature "image/encoded": float_list: wrong wire type 5 for field 2`},
		{"float_list value varint", img(lenField(2, varintField(1, 1))), `example: feature "image/encoded": float_list: value: wrong wire type 0 for field 1`},
		{"float_list packed length", img(lenField(2, lenField(1, []byte{1, 2, 3, 4, 5}))), `example: feature "image/encoded": float_list: packed value length 5 is not a multiple of 4`},
		{"float_list truncated", img(lenField(2, []byte{0x0d, 1, 2})), `example: feature "image/encoded": float_list: truncated fixed-width value`},
		{"int64_list value fixed32", img(lenField(3, fixed32Field(1, 1))), `example: feature "image/encoded": int64_list: value: wrong wire type 5 for field 1`},
		{"int64_list packed truncated", img(lenField(3, lenField(1, []byte{0x01, 0x80}))), `example: feature "image/encoded": int64_list: packed value: truncated varint`},
		{"int64_list varint truncated", img(lenField(3, []byte{0x08})), `example: feature "image/encoded": int64_list: truncated varint`},
		{"feature group", img([]byte{0x0b}), `example: feature "image/encoded": groups are not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, err := Unmarshal(tt.in)
			if err == nil {
				t.Fatalf("Unmarshal(%x) = %+v, want error %q", tt.in, ex, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error %q, want %q", err, tt.want)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Error("error does not match ErrMalformed")
			}
			if ex != nil {
				t.Error("non-nil Example with an error")
			}
			perr := ParseInto(tt.in, map[string]int{"image/encoded": 0}, func(int, *Feature) error { return nil })
			if perr == nil || perr.Error() != tt.want {
				t.Errorf("ParseInto error %v, want %q", perr, tt.want)
			}
		})
	}
}

func TestMarshalBytes(t *testing.T) {
	tests := []struct {
		name string
		ex   *Example
		want string
	}{
		{"nil", nil, ""},
		{"empty", &Example{}, ""},
		{"int", &Example{Features: map[string]*Feature{"a": {Kind: KindInt64, Ints: []int64{1}}}},
			"0a0c" + "0a0a" + "0a0161" + "1205" + "1a03" + "0a0101"},
		{"negative", &Example{Features: map[string]*Feature{"a": {Kind: KindInt64, Ints: []int64{-1}}}},
			"0a15" + "0a13" + "0a0161" + "120e" + "1a0c" + "0a0a" + "ffffffffffffffffff01"},
		{"float", &Example{Features: map[string]*Feature{"f": {Kind: KindFloat, Floats: []float32{1, 2}}}},
			"0a13" + "0a11" + "0a0166" + "120c" + "120a" + "0a08" + "0000803f" + "00000040"},
		{"sorted keys, none and bytes", &Example{Features: map[string]*Feature{
			"b": {Kind: KindBytes, Bytes: [][]byte{[]byte("xy"), nil}},
			"a": nil,
			"c": {Kind: KindNone, Ints: []int64{5}}, // lists of other kinds are ignored
			"d": {Kind: KindFloat},
		}},
			"0a26" +
				"0a05" + "0a0161" + "1200" +
				"0a0d" + "0a0162" + "1208" + "0a06" + "0a027879" + "0a00" +
				"0a05" + "0a0163" + "1200" +
				"0a07" + "0a0164" + "1202" + "1200"},
	}
	for _, tt := range tests {
		got := hex.EncodeToString(Marshal(tt.ex))
		if got != tt.want {
			t.Errorf("%s: Marshal = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	ex := &Example{Features: map[string]*Feature{
		"image/encoded":     {Kind: KindBytes, Bytes: [][]byte{make([]byte, 300)}},
		"image/class/label": {Kind: KindInt64, Ints: []int64{0, 1, -1, math.MinInt64, math.MaxInt64, 1 << 35}},
		"bbox":              {Kind: KindFloat, Floats: []float32{0, -0, 0.25, float32(math.NaN()), math.MaxFloat32, math.SmallestNonzeroFloat32}},
		"empty_bytes":       {Kind: KindBytes},
		"none":              {},
		"":                  {Kind: KindInt64, Ints: []int64{3}},
	}}
	b := Marshal(ex)
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(ex, got); d != "" {
		t.Error(d)
	}
	if string(Marshal(got)) != string(b) {
		t.Error("Marshal is not deterministic")
	}
	if n := Size(ex); n != len(b) {
		t.Errorf("Size = %d, Marshal wrote %d bytes", n, len(b))
	}
}

// TestSize: Size is Marshal's length, for Examples from empty to one
// whose lengths need several varint bytes.
func TestSize(t *testing.T) {
	for _, ex := range []*Example{
		nil,
		{},
		{Features: map[string]*Feature{"a": {}}},
		{Features: map[string]*Feature{"a": {Kind: KindBytes, Bytes: [][]byte{make([]byte, 1<<21), nil}}, "b": {Kind: KindFloat, Floats: make([]float32, 40000)}}},
		{Features: map[string]*Feature{strings.Repeat("k", 200): {Kind: KindInt64, Ints: []int64{-1, 1 << 62, 5}}}},
	} {
		if n, b := Size(ex), Marshal(ex); n != len(b) {
			t.Errorf("Size = %d, Marshal wrote %d bytes", n, len(b))
		}
	}
}

func TestParseInto(t *testing.T) {
	ex := &Example{Features: map[string]*Feature{
		"image/encoded": {Kind: KindBytes, Bytes: [][]byte{[]byte("jpeg")}},
		"label":         {Kind: KindInt64, Ints: []int64{7}},
		"unwanted":      {Kind: KindFloat, Floats: []float32{1}},
		"none":          {},
	}}
	// Unwanted features are skipped without decoding, even when their
	// value is malformed.
	b := msg(Marshal(ex), exampleOf(entry("broken", lenField(2, lenField(1, []byte{1}))), entry("label", lenField(3, lenField(1, []byte{8})))))
	want := map[string]int{"label": 0, "image/encoded": 1, "none": 2, "absent": 3}
	got := make([]*Feature, 4)
	var calls []int
	err := ParseInto(b, want, func(idx int, f *Feature) error {
		calls = append(calls, idx)
		got[idx] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Wire order is sorted keys, then the appended label (last wins).
	if len(calls) != 4 || calls[0] != 1 || calls[1] != 0 || calls[2] != 2 || calls[3] != 0 {
		t.Errorf("calls %v", calls)
	}
	if string(got[1].Bytes[0]) != "jpeg" || got[0].Ints[0] != 8 || got[2].Kind != KindNone || got[3] != nil {
		t.Errorf("got %+v %+v %+v %+v", got[0], got[1], got[2], got[3])
	}
	stop := errors.New("stop")
	if err := ParseInto(b, want, func(int, *Feature) error { return stop }); err != stop {
		t.Errorf("callback error not returned: %v", err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindNone: "none", KindBytes: "bytes_list", KindFloat: "float_list", KindInt64: "int64_list", 9: "kind(9)"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
	}
}

// TestKeysMustBeText: a record whose feature key is not text is another
// message that parses as an Example by accident (an ExampleListWithContext
// puts whole Examples where keys go); both parsers refuse it, where
// ParseInto used to skip the key and give an empty record.
func TestKeysMustBeText(t *testing.T) {
	for _, tc := range []struct {
		key string
		ok  bool
	}{
		{"image/encoded", true},
		{"étiquette", true},
		{"", true},
		{"a\x00b", false},
		{"\n\x0fdocument_tokens", false},
		{"bad\xffutf8", false},
	} {
		rec := Marshal(&Example{Features: map[string]*Feature{tc.key: {Kind: KindInt64, Ints: []int64{1}}}})
		_, uerr := Unmarshal(rec)
		perr := ParseInto(rec, map[string]int{"label": 0}, func(int, *Feature) error { return nil })
		for name, err := range map[string]error{"Unmarshal": uerr, "ParseInto": perr} {
			var nt *NotTextError
			if got := errors.As(err, &nt); got == tc.ok || (!tc.ok && !errors.Is(err, ErrMalformed)) {
				t.Errorf("%s(key %q): %v", name, tc.key, err)
			} else if !tc.ok && string(nt.Key) != tc.key {
				t.Errorf("%s(key %q): error names key %q", name, tc.key, nt.Key)
			}
		}
	}
}

// TestFeatureListsEmpty: a feature list with no steps is there, empty,
// not absent (parse_example then called it missing).
func TestFeatureListsEmpty(t *testing.T) {
	b := lenField(2, lenField(1, msg(lenField(1, []byte("s")), lenField(2, nil))))
	lists, err := FeatureLists(b)
	if steps, ok := lists["s"]; err != nil || !ok || steps == nil || len(steps) != 0 {
		t.Errorf("FeatureLists = %v, %v; want s with no steps, not nil", lists, err)
	}
}

// TestHasFeatureLists: only a length-delimited field 2 is a
// SequenceExample's feature_lists; another wire type is an unknown field.
func TestHasFeatureLists(t *testing.T) {
	ex := Marshal(&Example{Features: map[string]*Feature{"x": {Kind: KindInt64, Ints: []int64{7}}}})
	for _, tc := range []struct {
		name string
		b    []byte
		want bool
	}{
		{"an Example", ex, false},
		{"an Example and a varint field 2", append(slices.Clip(ex), 0x10, 0x05), false},
		{"a fixed64 field 2", []byte{0x11, 1, 2, 3, 4, 5, 6, 7, 8}, false},
		{"an empty feature_lists", append(slices.Clip(ex), 0x12, 0x00), true},
		{"a damaged feature_lists", []byte{0x12, 0x03, 0x0a, 0xff, 0x01}, true},
		{"cut before field 2", []byte{0x0a, 0x05, 0x01}, false},
	} {
		if got := HasFeatureLists(tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
