package example

import (
	"github.com/piperun/piperun/internal/testutil"

	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/piperun/piperun/tfrecord"
)

func sharedData(t testing.TB) string { return testutil.SharedData(t) }

// readRecords reads every record of a TFRecord file, detecting compression.
func readRecords(t testing.TB, path string) [][]byte {
	t.Helper()
	r, c, err := tfrecord.Open(path, tfrecord.None, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var recs [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

type expectedFile struct {
	File       string `json:"file"`
	NumRecords int    `json:"num_records"`
	Proto      string `json:"proto"`
	Features   map[string]struct {
		Kinds            map[string]int `json:"kinds"`
		MinLen           int            `json:"min_len"`
		MaxLen           int            `json:"max_len"`
		PresentInRecords int            `json:"present_in_records"`
	} `json:"features"`
	Record0 map[string]struct {
		Kind  string            `json:"kind"`
		Value []json.RawMessage `json:"value"`
	} `json:"record0"`
	ValueHistograms map[string]map[string]int `json:"value_histograms"`
}

// kindNames maps our kinds to the names EXPECTED uses.
var kindNames = map[Kind]string{KindNone: "no_kind_set", KindBytes: "bytes_list", KindFloat: "float_list", KindInt64: "int64_list"}

func TestSharedExamples(t *testing.T) {
	dir := sharedData(t)
	files := []string{
		"raccoon__test.record.json",
		"deeplab__pascal_voc_seg_val-00000-of-00001.tfrecord.json",
		"tfx__penguin_Split-train_data_tfrecord-00000-of-00001.gz.json",
		"tfx__csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz.json",
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, "tfrecord", "EXPECTED", name))
			if err != nil {
				t.Fatal(err)
			}
			var e expectedFile
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			if e.Proto != "tf.train.Example" || len(e.Features) == 0 || len(e.Record0) == 0 {
				t.Fatalf("EXPECTED is not an Example file with a schema: proto %q", e.Proto)
			}
			recs := readRecords(t, filepath.Join(dir, "tfrecord", filepath.FromSlash(e.File)))
			if len(recs) != e.NumRecords {
				t.Fatalf("%d records, want %d", len(recs), e.NumRecords)
			}
			checkSchema(t, &e, recs)
			checkRecord0(t, &e, recs[0])
		})
	}
}

func checkSchema(t *testing.T, e *expectedFile, recs [][]byte) {
	kinds := map[string]map[string]int{}
	present := map[string]int{}
	minLen, maxLen := map[string]int{}, map[string]int{}
	hist := map[string]map[string]int{}
	for i, rec := range recs {
		ex, err := Unmarshal(rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		for k, f := range ex.Features {
			if kinds[k] == nil {
				kinds[k] = map[string]int{}
				minLen[k] = f.Len()
			}
			kinds[k][kindNames[f.Kind]]++
			present[k]++
			minLen[k] = min(minLen[k], f.Len())
			maxLen[k] = max(maxLen[k], f.Len())
			if _, ok := e.ValueHistograms[k]; ok {
				if hist[k] == nil {
					hist[k] = map[string]int{}
				}
				for _, v := range f.Bytes {
					hist[k][string(v)]++
				}
				for _, v := range f.Ints {
					hist[k][strconv.FormatInt(v, 10)]++
				}
			}
		}
		// Marshal output parses back to the same values.
		back, err := Unmarshal(Marshal(ex))
		if err != nil {
			t.Fatalf("record %d: re-parse: %v", i, err)
		}
		if d := diff(ex, back); d != "" {
			t.Fatalf("record %d: Marshal round trip: %s", i, d)
		}
	}
	if len(kinds) != len(e.Features) {
		t.Errorf("%d keys, EXPECTED has %d", len(kinds), len(e.Features))
	}
	for k, want := range e.Features {
		if fmt.Sprint(kinds[k]) != fmt.Sprint(want.Kinds) {
			t.Errorf("%s: kinds %v, want %v", k, kinds[k], want.Kinds)
		}
		if present[k] != want.PresentInRecords || minLen[k] != want.MinLen || maxLen[k] != want.MaxLen {
			t.Errorf("%s: present %d len %d..%d, want %d %d..%d", k, present[k], minLen[k], maxLen[k], want.PresentInRecords, want.MinLen, want.MaxLen)
		}
	}
	if len(e.ValueHistograms) == 0 {
		t.Log("no value histograms in EXPECTED")
	}
	for k, want := range e.ValueHistograms {
		if fmt.Sprint(hist[k]) != fmt.Sprint(want) {
			t.Errorf("%s: histogram %v, want %v", k, hist[k], want)
		}
	}
}

func checkRecord0(t *testing.T, e *expectedFile, rec []byte) {
	ex, err := Unmarshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Features) != len(e.Record0) {
		t.Errorf("record 0 has %d features, want %d", len(ex.Features), len(e.Record0))
	}
	for k, want := range e.Record0 {
		f := ex.Features[k]
		if f == nil {
			t.Errorf("record 0: %s missing", k)
			continue
		}
		if kindNames[f.Kind] != want.Kind || f.Len() != len(want.Value) {
			t.Errorf("record 0: %s is %v[%d], want %s[%d]", k, f.Kind, f.Len(), want.Kind, len(want.Value))
			continue
		}
		for i, raw := range want.Value {
			switch f.Kind {
			case KindBytes:
				checkBytesValue(t, k, f.Bytes[i], raw)
			case KindFloat:
				var v float64
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				if f.Floats[i] != float32(v) {
					t.Errorf("record 0: %s[%d] = %v, want %v", k, i, f.Floats[i], float32(v))
				}
			case KindInt64:
				var v int64
				if err := json.Unmarshal(raw, &v); err != nil {
					t.Fatal(err)
				}
				if f.Ints[i] != v {
					t.Errorf("record 0: %s[%d] = %d, want %d", k, i, f.Ints[i], v)
				}
			}
		}
	}
}

// checkBytesValue compares a bytes value with EXPECTED, which gives either
// the string or, for large blobs, {len, sha256, magic_hex}.
func checkBytesValue(t *testing.T, key string, got []byte, raw json.RawMessage) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if string(got) != s {
			t.Errorf("record 0: %s = %q, want %q", key, got, s)
		}
		return
	}
	var blob struct {
		Len    int    `json:"len"`
		SHA256 string `json:"sha256"`
		Magic  string `json:"magic_hex"`
	}
	if err := json.Unmarshal(raw, &blob); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	sum := sha256.Sum256(got)
	if len(got) != blob.Len || hex.EncodeToString(sum[:]) != blob.SHA256 || !bytes.HasPrefix(got, mustHex(t, blob.Magic)) {
		t.Errorf("record 0: %s is %d bytes sha256 %x, want %d %s", key, len(got), sum, blob.Len, blob.SHA256)
	}
}

// TestSharedRanking walks ExampleListWithContext records (examples = 1,
// context = 2, both Example messages) and checks the nested Examples.
func TestSharedRanking(t *testing.T) {
	dir := sharedData(t)
	recs := readRecords(t, filepath.Join(dir, "tfrecord", "ranking", "train_elwc.tfrecord"))
	if len(recs) != 10 {
		t.Fatalf("%d records", len(recs))
	}
	relevance := map[int64]int{}
	for i, rec := range recs {
		var examples []*Example
		var context *Example
		for j := 0; j < len(rec); {
			f, k, err := next(rec, j)
			if err != nil || f.wire != wireBytes {
				t.Fatalf("record %d: %v", i, err)
			}
			j = k
			ex, err := Unmarshal(f.data)
			if err != nil {
				t.Fatalf("record %d field %d: %v", i, f.num, err)
			}
			if f.num == 1 {
				examples = append(examples, ex)
			} else {
				context = ex
			}
		}
		if len(examples) != 2 || context == nil {
			t.Fatalf("record %d: %d examples, context %v", i, len(examples), context != nil)
		}
		if q := context.Features["query_tokens"]; q == nil || q.Kind != KindBytes || len(q.Bytes) != 5 {
			t.Errorf("record %d: query_tokens %+v", i, q)
		}
		for _, ex := range examples {
			relevance[ex.Features["relevance"].Ints[0]]++
		}
		if i == 0 {
			got := fmt.Sprintf("%s | %s | %d", bytes.Join(context.Features["query_tokens"].Bytes, []byte(" ")),
				bytes.Join(examples[0].Features["document_tokens"].Bytes, []byte(" ")), examples[0].Features["relevance"].Ints)
			if want := "this is a relevant question | this is a relevant answer | [1]"; got != want {
				t.Errorf("record 0: %s, want %s", got, want)
			}
		}
	}
	if relevance[0] != 10 || relevance[1] != 10 {
		t.Errorf("relevance histogram %v", relevance)
	}
}

// TestSharedMarshalExact checks Marshal against TensorFlow's own bytes. TFX
// serializes deterministically (keys sorted), so those records must come out
// byte for byte; the other writers emitted map entries in insertion order, so
// there only the size must agree.
func TestSharedMarshalExact(t *testing.T) {
	dir := sharedData(t)
	tests := []struct {
		file  string
		exact bool
	}{
		{"raccoon/test.record", false},
		{"deeplab/pascal_voc_seg_val-00000-of-00001.tfrecord", false},
		{"tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz", false},
		{"tfx/csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz", true},
	}
	for _, tt := range tests {
		recs := readRecords(t, filepath.Join(dir, "tfrecord", filepath.FromSlash(tt.file)))
		same := 0
		for i, rec := range recs {
			ex, err := Unmarshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			out := Marshal(ex)
			if len(out) != len(rec) {
				t.Errorf("%s record %d: Marshal wrote %d bytes, TensorFlow %d", tt.file, i, len(out), len(rec))
			}
			if bytes.Equal(out, rec) {
				same++
			} else if tt.exact {
				t.Errorf("%s record %d: Marshal output differs from TensorFlow's", tt.file, i)
			}
		}
		t.Logf("%s: %d of %d records byte-identical after Marshal", tt.file, same, len(recs))
	}
}

// TestSharedSequenceExamples reads TFX's SequenceExamples: the context as
// an Example's features (Unmarshal) and the feature lists (FeatureLists),
// against EXPECTED's kinds, step counts and record 0.
func TestSharedSequenceExamples(t *testing.T) {
	dir := sharedData(t)
	b, err := os.ReadFile(filepath.Join(dir, "tfrecord", "EXPECTED", "tfx__tfrecord_sequence_Split-eval_data_tfrecord_eval.gz.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		File       string `json:"file"`
		NumRecords int    `json:"num_records"`
		Proto      string `json:"proto"`
		Context    map[string]struct {
			Kinds            map[string]int `json:"kinds"`
			PresentInRecords int            `json:"present_in_records"`
		} `json:"context_features"`
		Lists map[string]struct {
			Kinds            map[string]int `json:"kinds"`
			MinSteps         int            `json:"min_steps"`
			MaxSteps         int            `json:"max_steps"`
			PresentInRecords int            `json:"present_in_records"`
		} `json:"feature_lists"`
		Record0 struct {
			Lists map[string][]struct {
				Kind  string   `json:"kind"`
				Value []string `json:"value"`
			} `json:"feature_lists"`
		} `json:"record0"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if e.Proto != "tf.train.SequenceExample" || len(e.Lists) == 0 {
		t.Fatalf("EXPECTED is not a SequenceExample file with feature lists: proto %q", e.Proto)
	}
	recs := readRecords(t, filepath.Join(dir, "tfrecord", filepath.FromSlash(e.File)))
	if len(recs) != e.NumRecords {
		t.Fatalf("%d records, want %d", len(recs), e.NumRecords)
	}
	ctxKinds, kinds := map[string]map[string]int{}, map[string]map[string]int{}
	present, minSteps, maxSteps := map[string]int{}, map[string]int{}, map[string]int{}
	for i, rec := range recs {
		ex, err := Unmarshal(rec)
		if err != nil {
			t.Fatalf("record %d: context: %v", i, err)
		}
		for k, f := range ex.Features {
			if ctxKinds[k] == nil {
				ctxKinds[k] = map[string]int{}
			}
			ctxKinds[k][kindNames[f.Kind]]++
		}
		lists, err := FeatureLists(rec)
		if err != nil {
			t.Fatalf("record %d: feature lists: %v", i, err)
		}
		for k, steps := range lists {
			if kinds[k] == nil {
				kinds[k] = map[string]int{}
				minSteps[k] = len(steps)
			}
			present[k]++
			minSteps[k], maxSteps[k] = min(minSteps[k], len(steps)), max(maxSteps[k], len(steps))
			for _, st := range steps {
				kinds[k][kindNames[st.Kind]]++
			}
		}
		if i == 0 {
			for k, want := range e.Record0.Lists {
				got := lists[k]
				if len(got) != len(want) {
					t.Errorf("record 0: list %s has %d steps, want %d", k, len(got), len(want))
					continue
				}
				for j, w := range want {
					if kindNames[got[j].Kind] != w.Kind || fmt.Sprintf("%q", got[j].Bytes) != fmt.Sprintf("%q", w.Value) {
						t.Errorf("record 0: list %s step %d is %s %q, want %s %q", k, j, kindNames[got[j].Kind], got[j].Bytes, w.Kind, w.Value)
					}
				}
			}
		}
	}
	for k, want := range e.Context {
		if fmt.Sprint(ctxKinds[k]) != fmt.Sprint(want.Kinds) {
			t.Errorf("context %s: kinds %v, want %v", k, ctxKinds[k], want.Kinds)
		}
	}
	if len(kinds) != len(e.Lists) {
		t.Errorf("%d feature lists, EXPECTED has %d", len(kinds), len(e.Lists))
	}
	for k, want := range e.Lists {
		if fmt.Sprint(kinds[k]) != fmt.Sprint(want.Kinds) || present[k] != want.PresentInRecords || minSteps[k] != want.MinSteps || maxSteps[k] != want.MaxSteps {
			t.Errorf("list %s: kinds %v in %d records, %d..%d steps; want %v in %d, %d..%d", k, kinds[k], present[k], minSteps[k], maxSteps[k],
				want.Kinds, want.PresentInRecords, want.MinSteps, want.MaxSteps)
		}
	}
	// An Example has no feature lists.
	if lists, err := FeatureLists(Marshal(&Example{Features: map[string]*Feature{"x": {Kind: KindInt64, Ints: []int64{1}}}})); err != nil || len(lists) != 0 {
		t.Errorf("an Example's feature lists: %v, %v; want none", lists, err)
	}
}
