package example

import (
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds returns small real records: record 0 of several shared files,
// with large byte values cut to 64 bytes so the fuzzer spends its time on
// structure rather than on JPEG bytes. It returns nil when the shared data
// is absent.
func fuzzSeeds(f *testing.F) [][]byte {
	dir := os.Getenv("PIPERUN_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	var seeds [][]byte
	for _, file := range []string{"raccoon/test.record", "deeplab/pascal_voc_seg_val-00000-of-00001.tfrecord",
		"tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz", "tfx/csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz"} {
		path := filepath.Join(dir, "tfrecord", filepath.FromSlash(file))
		if _, err := os.Stat(path); err != nil {
			continue
		}
		rec := readRecords(f, path)[0]
		if len(rec) <= 1024 {
			seeds = append(seeds, rec)
			continue
		}
		ex, err := Unmarshal(rec)
		if err != nil {
			f.Fatal(err)
		}
		for _, ft := range ex.Features {
			for i, v := range ft.Bytes {
				ft.Bytes[i] = v[:min(len(v), 64)]
			}
		}
		seeds = append(seeds, Marshal(ex))
	}
	return seeds
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	for _, ex := range crossExamples() {
		f.Add(Marshal(ex))
	}
	f.Add(exampleOf(
		entry("unpacked_ints", lenField(3, msg(varintField(1, 1), varintField(1, 1<<63), unknowns))),
		entry("unpacked_floats", lenField(2, msg(fixed32Field(1, 0x3f800000), unknowns))),
		entry("none", nil),
	))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ex, err := Unmarshal(data)
		if err != nil {
			if ex != nil {
				t.Fatal("non-nil Example with an error")
			}
			return
		}
		b := Marshal(ex)
		if n := Size(ex); n != len(b) {
			t.Fatalf("Size = %d, Marshal wrote %d bytes", n, len(b))
		}
		back, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("Marshal output does not parse: %v", err)
		}
		if d := diff(ex, back); d != "" {
			t.Fatalf("round trip: %s", d)
		}
		if string(Marshal(back)) != string(b) {
			t.Fatal("Marshal is not deterministic")
		}
		// The fast path agrees with the full parse on every key.
		want := make(map[string]int, len(ex.Features))
		keys := make([]string, 0, len(ex.Features))
		for k := range ex.Features {
			want[k] = len(keys)
			keys = append(keys, k)
		}
		got := &Example{Features: map[string]*Feature{}}
		if err := ParseInto(data, want, func(i int, f *Feature) error {
			got.Features[keys[i]] = f
			return nil
		}); err != nil {
			t.Fatalf("ParseInto failed where Unmarshal succeeded: %v", err)
		}
		if d := diff(ex, got); d != "" {
			t.Fatalf("ParseInto: %s", d)
		}
	})
}

// FuzzFeatureLists: any input gives feature lists or an error, never a
// panic, and the steps it finds hold no more values than the input has
// bytes.
func FuzzFeatureLists(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	step := func(v int64) []byte { return lenField(3, msg(varintField(1, uint64(v)))) } // an int64 Feature
	list := func(steps ...[]byte) []byte {
		var b []byte
		for _, s := range steps {
			b = append(b, lenField(1, s)...)
		}
		return b
	}
	lists := func(key string, fl []byte) []byte {
		return lenField(2, lenField(1, msg(lenField(1, []byte(key)), lenField(2, fl))))
	}
	f.Add(lists("s", list(step(1), step(2))))
	f.Add(append(exampleOf(entry("ctx", nil)), lists("t", list(step(7)))...))
	f.Add(lists("s", []byte{0x0a, 0x05, 0x1a}))
	f.Add([]byte{0x12, 0x02, 0x08, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		lists, err := FeatureLists(data)
		if err != nil {
			if lists != nil {
				t.Fatal("feature lists with an error")
			}
			return
		}
		n := 0
		for _, steps := range lists {
			for _, st := range steps {
				n += st.Len()
			}
		}
		if n > len(data) {
			t.Fatalf("%d values from %d bytes", n, len(data))
		}
		// HasFeatureList, which decodes no steps, finds every list that
		// FeatureLists reads, and no other key.
		for key := range lists {
			if !HasFeatureList(data, key) {
				t.Fatalf("HasFeatureList(%q) = false; FeatureLists has it", key)
			}
		}
		if _, ok := lists["\x00none"]; !ok && HasFeatureList(data, "\x00none") {
			t.Fatal("HasFeatureList finds a key FeatureLists does not")
		}
	})
}
