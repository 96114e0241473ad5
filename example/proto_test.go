package example

import (
	"github.com/piperun/piperun/internal/testutil"

	"bytes"
	"math"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func exampleDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	return testutil.ExampleDescriptor(t)
}

// fromDynamic converts a stock-library Example into ours.
func fromDynamic(m protoreflect.Message) *Example {
	ex := &Example{Features: map[string]*Feature{}}
	features := m.Get(m.Descriptor().Fields().ByName("features")).Message()
	fmap := features.Get(features.Descriptor().Fields().ByName("feature")).Map()
	fmap.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		fm := v.Message()
		f := &Feature{}
		if which := fm.WhichOneof(fm.Descriptor().Oneofs().ByName("kind")); which != nil {
			l := fm.Get(which).Message()
			vals := l.Get(l.Descriptor().Fields().ByName("value")).List()
			switch which.Name() {
			case "bytes_list":
				f.Kind, f.Bytes = KindBytes, [][]byte{}
				for i := range vals.Len() {
					f.Bytes = append(f.Bytes, vals.Get(i).Bytes())
				}
			case "float_list":
				f.Kind, f.Floats = KindFloat, []float32{}
				for i := range vals.Len() {
					f.Floats = append(f.Floats, float32(vals.Get(i).Float()))
				}
			case "int64_list":
				f.Kind, f.Ints = KindInt64, []int64{}
				for i := range vals.Len() {
					f.Ints = append(f.Ints, vals.Get(i).Int())
				}
			}
		}
		ex.Features[k.String()] = f
		return true
	})
	return ex
}

// toDynamic converts our Example into a stock-library message.
func toDynamic(md protoreflect.MessageDescriptor, ex *Example) protoreflect.Message {
	m := dynamicpb.NewMessage(md)
	featuresFD := md.Fields().ByName("features")
	features := m.Mutable(featuresFD).Message()
	fmap := features.Mutable(features.Descriptor().Fields().ByName("feature")).Map()
	for k, f := range ex.Features {
		fv := fmap.NewValue()
		fm := fv.Message()
		var name protoreflect.Name
		switch f.Kind {
		case KindBytes:
			name = "bytes_list"
		case KindFloat:
			name = "float_list"
		case KindInt64:
			name = "int64_list"
		}
		if name != "" {
			l := fm.Mutable(fm.Descriptor().Fields().ByName(name)).Message()
			vals := l.Mutable(l.Descriptor().Fields().ByName("value")).List()
			for _, v := range f.Bytes {
				if f.Kind == KindBytes {
					vals.Append(protoreflect.ValueOfBytes(v))
				}
			}
			for _, v := range f.Floats {
				if f.Kind == KindFloat {
					vals.Append(protoreflect.ValueOfFloat32(v))
				}
			}
			for _, v := range f.Ints {
				if f.Kind == KindInt64 {
					vals.Append(protoreflect.ValueOfInt64(v))
				}
			}
		}
		fmap.Set(protoreflect.ValueOfString(k).MapKey(), fv)
	}
	return m
}

func crossExamples() []*Example {
	return []*Example{
		{Features: map[string]*Feature{
			"image/encoded":     {Kind: KindBytes, Bytes: [][]byte{bytes.Repeat([]byte{0xff, 0xd8}, 5000)}},
			"image/class/label": {Kind: KindInt64, Ints: []int64{3}},
			"image/class/text":  {Kind: KindBytes, Bytes: [][]byte{[]byte("cross"), {}}},
			"bbox":              {Kind: KindFloat, Floats: []float32{0.1, 0.9, -0, float32(math.Inf(-1)), math.MaxFloat32}},
			"neg":               {Kind: KindInt64, Ints: []int64{-1, math.MinInt64, math.MaxInt64, 0, 1 << 50}},
			"empty_floats":      {Kind: KindFloat, Floats: []float32{}},
			"empty_ints":        {Kind: KindInt64, Ints: []int64{}},
			"empty_bytes":       {Kind: KindBytes, Bytes: [][]byte{}},
			"none":              {},
			"":                  {Kind: KindBytes, Bytes: [][]byte{[]byte("empty key")}},
		}},
		{Features: map[string]*Feature{}},
	}
}

func TestStockProtobufParsesMarshal(t *testing.T) {
	md := exampleDescriptor(t)
	for i, ex := range crossExamples() {
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(Marshal(ex), m); err != nil {
			t.Fatalf("example %d: stock Unmarshal: %v", i, err)
		}
		if d := diff(ex, fromDynamic(m)); d != "" {
			t.Errorf("example %d: %s", i, d)
		}
	}
}

func TestUnmarshalParsesStockProtobuf(t *testing.T) {
	md := exampleDescriptor(t)
	for i, ex := range crossExamples() {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(toDynamic(md, ex).Interface())
		if err != nil {
			t.Fatal(err)
		}
		got, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("example %d: %v", i, err)
		}
		if d := diff(ex, got); d != "" {
			t.Errorf("example %d: %s", i, d)
		}
		// Deterministic stock output sorts map keys, as Marshal does.
		if len(ex.Features) > 0 && !bytes.Equal(b, Marshal(ex)) {
			t.Errorf("example %d: Marshal differs from the stock deterministic encoding\n ours  %x\n stock %x", i, Marshal(ex), b)
		}
	}
}

func TestStockProtobufAgreesOnSharedData(t *testing.T) {
	dir := sharedData(t)
	md := exampleDescriptor(t)
	for _, file := range []string{"raccoon/test.record", "deeplab/pascal_voc_seg_val-00000-of-00001.tfrecord",
		"tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz", "tfx/csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz"} {
		recs := readRecords(t, filepath.Join(dir, "tfrecord", filepath.FromSlash(file)))
		for i, rec := range recs {
			ours, err := Unmarshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			m := dynamicpb.NewMessage(md)
			if err := proto.Unmarshal(rec, m); err != nil {
				t.Fatal(err)
			}
			if d := diff(ours, fromDynamic(m)); d != "" {
				t.Errorf("%s record %d: %s", file, i, d)
			}
		}
	}
}
