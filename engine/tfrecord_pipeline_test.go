package engine_test

// Pipeline tests for TFRecords on real data: files → tfrecord →
// parse_example → write_tfrecord through spec.Parse, plan.Compile and
// engine.Start, checked against shared/data's EXPECTED facts and read back
// with the tfrecord and example packages (and the stock protobuf library).

import (
	"github.com/piperun/piperun/internal/testutil"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
	"github.com/piperun/piperun/tfrecord"
)

func tfrSharedData(t testing.TB) string { return testutil.SharedData(t) }

// tfrRun parses, plans and runs a spec written as if it lived in dir.
func tfrRun(t testing.TB, dir, src string, set ...string) (*engine.Report, error) {
	t.Helper()
	reg := stages.Default()
	sp, diags := spec.Parse(filepath.Join(dir, "spec.yaml"), []byte(src), spec.Options{Catalog: reg, Set: set})
	if diags.HasErrors() {
		t.Fatalf("spec problems:\n%v\n%s", diags, src)
	}
	p, err := plan.Compile(sp, reg, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := engine.Start(context.Background(), p, engine.Options{Registry: reg})
	if err != nil {
		return nil, err
	}
	return run.Wait()
}

// tfrReadAll reads every record of a TFRecord file, detecting compression.
func tfrReadAll(t testing.TB, path string) [][]byte {
	t.Helper()
	r, c, err := tfrecord.Open(path, tfrecord.None, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

func tfrExamples(t testing.TB, path string) []*example.Example {
	t.Helper()
	var out []*example.Example
	for i, rec := range tfrReadAll(t, path) {
		ex, err := example.Unmarshal(rec)
		if err != nil {
			t.Fatalf("%s record %d: %v", path, i, err)
		}
		out = append(out, ex)
	}
	return out
}

// expected is the part of a shared/data EXPECTED file these tests use.
type expected struct {
	NumRecords int `json:"num_records"`
	Features   map[string]struct {
		Kinds map[string]int `json:"kinds"`
	} `json:"features"`
	Record0 map[string]struct {
		Kind  string            `json:"kind"`
		Value []json.RawMessage `json:"value"`
	} `json:"record0"`
	Histograms map[string]map[string]int `json:"value_histograms"`
}

func readExpected(t testing.TB, data, rel string) *expected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "tfrecord", "EXPECTED", strings.ReplaceAll(rel, "/", "__")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// allFeatures is a parse_example features block listing every key of an
// EXPECTED schema as a variable-length list (which parse_example defaults
// to empty when a record leaves the key without a kind).
func (e *expected) allFeatures() string {
	keys := make([]string, 0, len(e.Features))
	for k := range e.Features {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		dtype := ""
		for kind := range e.Features[k].Kinds {
			switch kind {
			case "bytes_list":
				dtype = "bytes"
			case "float_list":
				dtype = "float32"
			case "int64_list":
				dtype = "int64"
			}
		}
		if dtype == "" {
			continue // never set in any record: nothing to parse
		}
		fmt.Fprintf(&b, "      %q: {dtype: %s, shape: [-1]}\n", k, dtype)
	}
	return b.String()
}

// checkRecord0 compares an Example with EXPECTED's decoded record 0: ints
// and floats exactly (floats as float32), text bytes exactly, and large
// bytes by length and sha256.
func checkRecord0(t *testing.T, e *expected, ex *example.Example) {
	t.Helper()
	for key, want := range e.Record0 {
		f := ex.Features[key]
		if want.Kind == "no_kind_set" {
			if f != nil && f.Len() != 0 {
				t.Errorf("%s: got %d values, want none", key, f.Len())
			}
			continue
		}
		if f == nil {
			t.Errorf("%s: missing", key)
			continue
		}
		if f.Len() != len(want.Value) {
			t.Errorf("%s: %d values, want %d", key, f.Len(), len(want.Value))
			continue
		}
		for i, raw := range want.Value {
			switch want.Kind {
			case "int64_list":
				var v int64
				json.Unmarshal(raw, &v)
				if f.Kind != example.KindInt64 || f.Ints[i] != v {
					t.Errorf("%s[%d]: got %v %v, want int64 %d", key, i, f.Kind, f.Ints, v)
				}
			case "float_list":
				var v float64
				json.Unmarshal(raw, &v)
				if f.Kind != example.KindFloat || f.Floats[i] != float32(v) {
					t.Errorf("%s[%d]: got %v %v, want float %v", key, i, f.Kind, f.Floats, float32(v))
				}
			case "bytes_list":
				if f.Kind != example.KindBytes {
					t.Errorf("%s: kind %v, want bytes", key, f.Kind)
					continue
				}
				var s string
				if json.Unmarshal(raw, &s) == nil {
					if string(f.Bytes[i]) != s {
						t.Errorf("%s[%d]: got %q, want %q", key, i, f.Bytes[i], s)
					}
					continue
				}
				var big struct {
					Len    int    `json:"len"`
					SHA256 string `json:"sha256"`
				}
				if err := json.Unmarshal(raw, &big); err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(f.Bytes[i])
				if len(f.Bytes[i]) != big.Len || hex.EncodeToString(sum[:]) != big.SHA256 {
					t.Errorf("%s[%d]: %d bytes sha256 %x, want %d bytes sha256 %s", key, i, len(f.Bytes[i]), sum, big.Len, big.SHA256)
				}
			default:
				t.Fatalf("%s: unknown kind %s in EXPECTED", key, want.Kind)
			}
		}
	}
}

func TestTFRecordParseSharedData(t *testing.T) {
	data := tfrSharedData(t)
	for _, tc := range []struct {
		file    string
		records int
	}{
		{"raccoon/test.record", 40},
		{"deeplab/pascal_voc_seg_val-00000-of-00001.tfrecord", 3},
		{"tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz", 234},
		{"tfx/csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz", 424},
	} {
		t.Run(tc.file, func(t *testing.T) {
			e := readExpected(t, data, tc.file)
			if e.NumRecords != tc.records {
				t.Fatalf("EXPECTED says %d records, the table %d", e.NumRecords, tc.records)
			}
			dir := t.TempDir()
			out := filepath.Join(dir, "out.tfrecord")
			rep, err := tfrRun(t, dir, fmt.Sprintf(`version: 1
name: parse
resources: {memory: 64MiB}
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord, compression: auto}
  - name: examples
    type: parse_example
    features:
%s  - {name: out, type: write_tfrecord, path: %q}
`, filepath.Join(data, "tfrecord", tc.file), e.allFeatures(), out))
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Sinks["out"].Samples; got != int64(tc.records) {
				t.Errorf("out: %d samples, want %d", got, tc.records)
			}
			if got := rep.Stages["records"].Out; got != int64(tc.records) {
				t.Errorf("records: %d out, want %d", got, tc.records)
			}
			exs := tfrExamples(t, out)
			if len(exs) != tc.records {
				t.Fatalf("%d records written, want %d", len(exs), tc.records)
			}
			checkRecord0(t, e, exs[0])
			// Every histogram EXPECTED keeps for an int64 or text key holds
			// over all records.
			for key, want := range e.Histograms {
				got := map[string]int{}
				for _, ex := range exs {
					f := ex.Features[key]
					if f == nil {
						continue
					}
					for _, v := range f.Ints {
						got[fmt.Sprint(v)]++
					}
					for _, v := range f.Bytes {
						got[string(v)]++
					}
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("histogram of %s: got %v, want %v", key, got, want)
				}
			}
		})
	}
}

func TestPenguinSpeciesHistogram(t *testing.T) {
	data := tfrSharedData(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "species.tfrecord")
	_, err := tfrRun(t, dir, fmt.Sprintf(`version: 1
name: penguin
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord}
  - {name: examples, type: parse_example, features: {species: {dtype: int64}}}
  - {name: out, type: write_tfrecord, path: %q}
`, filepath.Join(data, "tfrecord", "tfx", "penguin_Split-train_data_tfrecord-00000-of-00001.gz"), out))
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for _, ex := range tfrExamples(t, out) {
		got[ex.Features["species"].Ints[0]]++
	}
	if want := map[int64]int{0: 99, 1: 46, 2: 89}; !reflect.DeepEqual(got, want) {
		t.Errorf("species histogram %v, want %v", got, want)
	}
}

// parseExampleSpec reads the TFRecord file through parse_example with the
// features given (YAML flow), into out.jsonl.
func parseExampleSpec(file, features string) string {
	return fmt.Sprintf(`version: 1
name: parse
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord}
  - {name: examples, type: parse_example, features: %s}
  - {name: out, type: write_jsonl, path: out.jsonl}
`, file, features)
}

// TestSequenceExampleContext: parse_example reads a SequenceExample's
// context features, and asked for one of its feature lists says that is
// what it is, naming the record, instead of calling it missing.
func TestSequenceExampleContext(t *testing.T) {
	data := tfrSharedData(t)
	file := filepath.Join(data, "tfrecord", "tfx", "tfrecord_sequence_Split-eval_data_tfrecord_eval.gz")
	dir := t.TempDir()
	spec := func(features string) string { return parseExampleSpec(file, features) }
	rep, err := tfrRun(t, dir, spec(`{i: {dtype: int64, default: -1}}`))
	if err != nil || rep.Sinks["out"].Samples != 4500 {
		t.Fatalf("context features: %v, %+v; want 4500 samples", err, rep)
	}
	// Also where a default stands in for an absent feature: a variable
	// length's empty list gave 4500 empty lists.
	for _, f := range []string{`{s: {dtype: bytes}}`, `{s: {dtype: bytes, shape: [-1]}}`, `{s: {dtype: bytes, default: ""}}`} {
		_, err = tfrRun(t, dir, spec(f))
		want := `stage "examples" (parse_example): ` + file + ` record 0: feature "s" is a feature list of this tf.train.SequenceExample: parse_example reads its context features only`
		if err == nil || err.Error() != want {
			t.Errorf("a feature list asked for as %s:\n got %v\nwant %s", f, err, want)
		}
	}
}

// TestEmptyFeatureIsNotMissing: TFX writes a CSV's empty cell as a
// Feature with no list set (the taxi data's company in record 0); without
// a default that fails as a feature with no value, not a missing one, and
// says how to go on; with one, the default stands in.
func TestEmptyFeatureIsNotMissing(t *testing.T) {
	data := tfrSharedData(t)
	file := filepath.Join(data, "tfrecord", "tfx", "csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz")
	dir := t.TempDir()
	spec := func(features string) string { return parseExampleSpec(file, features) }
	_, err := tfrRun(t, dir, spec(`{company: {dtype: string}}`))
	want := `stage "examples" (parse_example): ` + file + ` record 0: feature "company" has no value (a Feature with no list set) and no default: give it a default in the spec`
	if err == nil || err.Error() != want {
		t.Errorf("no default:\n got %v\nwant %s", err, want)
	}
	rep, err := tfrRun(t, dir, spec(`{company: {dtype: string, default: ""}}`))
	if err != nil || rep.Sinks["out"].Samples != 424 {
		t.Errorf("with a default: %v, %+v; want 424 samples", err, rep)
	}
}

// TestNotAnExample: parse_example over a TFRecord of other messages (a
// tfevents file's Events) says the record is no Example, not only which
// protobuf field was off.
func TestNotAnExample(t *testing.T) {
	data := tfrSharedData(t)
	file := filepath.Join(data, "tfrecord", "tfevents", "events.out.tfevents.1646034751.eval")
	_, err := tfrRun(t, t.TempDir(), fmt.Sprintf(`version: 1
name: ev
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord}
  - {name: examples, type: parse_example, features: {a: {dtype: int64, default: 0}}}
  - {name: out, type: discard}
`, file))
	want := `stage "examples" (parse_example): ` + file + ` record 0: the record is not a tf.train.Example (example: features: wrong wire type 1 for field 1); piperun inspect shows what the file holds`
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

// recordsSpec reads the TFRecord file at path into a discard sink, with
// the tfrecord stage's on_error set to onError.
func recordsSpec(path, onError string) string {
	return fmt.Sprintf(`version: 1
name: records
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord, on_error: %s}
  - {name: out, type: discard}
`, path, onError)
}

func TestTFRecordCorruptSharedData(t *testing.T) {
	data := tfrSharedData(t)
	file := filepath.Join(data, "tfrecord", "corrupted", "snapshot_serengeti_sequence_examples.record")
	body := func(onError string) string { return recordsSpec(file, onError) }
	t.Run("fail", func(t *testing.T) {
		rep, err := tfrRun(t, t.TempDir(), body("fail"))
		if err == nil {
			t.Fatal("run succeeded on a truncated file")
		}
		for _, w := range []string{`stage "records" (tfrecord)`, file, "record 0", "byte offset 0", "truncated"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q: %v", w, err)
			}
		}
		if rep == nil || rep.OK || rep.Sinks["out"].Samples != 0 {
			t.Errorf("report %+v: want ok false and no samples", rep)
		}
	})
	t.Run("skip", func(t *testing.T) {
		rep, err := tfrRun(t, t.TempDir(), body("skip"))
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK || rep.Skipped["records"] != 1 || len(rep.Skipped) != 1 || rep.Sinks["out"].Samples != 0 {
			t.Errorf("ok %v, skipped %v, samples %d; want ok, {records: 1}, 0", rep.OK, rep.Skipped, rep.Sinks["out"].Samples)
		}
		causes := rep.SkipCauses["records"]
		if len(causes) != 1 || !strings.Contains(causes[0], file) || !strings.Contains(causes[0], "record 0 at byte offset 0") {
			t.Errorf("skip causes %q: want one naming %s record 0 at byte offset 0", causes, file)
		}
	})
}

func TestTFRecordFlippedByte(t *testing.T) {
	// Five records "rec-0".."rec-4", 21 bytes framed each: record 3's header
	// is at 63 and its data at 75. A flipped data byte fails its data CRC.
	dir := t.TempDir()
	in := filepath.Join(dir, "in.tfrecord")
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	for i := range 5 {
		if err := w.Write([]byte(fmt.Sprintf("rec-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b) != 5*21 || string(b[75:80]) != "rec-3" {
		t.Fatalf("unexpected framing: %d bytes, %q at 75", len(b), b[75:80])
	}
	b[77] ^= 0x20
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	body := func(onError, out string) string {
		return fmt.Sprintf(`version: 1
name: flipped
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord, on_error: %s}
  - {name: out, type: write_tfrecord, path: %q}
`, in, onError, out)
	}
	t.Run("fail", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out.tfrecord")
		_, err := tfrRun(t, dir, body("fail", out))
		if err == nil {
			t.Fatal("run succeeded over a flipped byte")
		}
		want := fmt.Sprintf("tfrecord: %s: record 3 at byte offset 63: ", in)
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `stage "records"`) {
			t.Errorf("error %q lacks %q and the stage", err, want)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("failed run left %s: %v", out, serr)
		}
	})
	for _, par := range []string{"1", "2"} { // 2 reads ahead
		t.Run("skip parallelism "+par, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.tfrecord")
			testFlippedByteSkipped(t, dir, body("skip", out), out, par)
		})
	}
	// Every epoch meets the damage again, and a skip cause says which
	// epoch, of the reader's own errors and of a sample a stage below
	// skips (found by a tester: record 3's line came twice, worded the
	// same). A run of one epoch names none (above).
	t.Run("skip over two epochs", func(t *testing.T) {
		src := fmt.Sprintf(`version: 1
name: flipped
epochs: 2
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord, on_error: skip}
  - {name: decode, type: map, on_error: skip, set: {img: 'decode_image(record, 3)'}}
  - {name: out, type: discard}
`, in)
		rep, err := tfrRun(t, dir, src)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int64{"records": 2, "decode": 8}; !reflect.DeepEqual(rep.Skipped, want) {
			t.Errorf("skipped %v, want %v", rep.Skipped, want)
		}
		recs := rep.SkipCauses["records"]
		for i, c := range recs {
			const want = "record 3 at byte offset 63: data crc mismatch (got 0x"
			if !strings.Contains(c, want) || !strings.HasSuffix(c, fmt.Sprintf(") (epoch %d)", i)) {
				t.Errorf("records cause %d: %q, want %q… (epoch %d)", i, c, want, i)
			}
		}
		var got []string
		for _, c := range rep.SkipCauses["decode"] {
			head, _, _ := strings.Cut(c, ": set img")
			got = append(got, strings.TrimPrefix(head, in+" "))
		}
		want := []string{"record 0 (epoch 0)", "record 1 (epoch 0)", "record 2 (epoch 0)", "record 4 (epoch 0)",
			"record 0 (epoch 1)", "record 1 (epoch 1)", "record 2 (epoch 1)", "record 4 (epoch 1)"}
		if len(recs) != 2 || !reflect.DeepEqual(got, want) {
			t.Errorf("decode causes name %q, want %q (and 2 records causes, got %d)", got, want, len(recs))
		}
	})
	// A batch's name says its epoch already: one of a range sample (named
	// with its epoch) is not given another.
	t.Run("a batch keeps one epoch", func(t *testing.T) {
		rep, err := tfrRun(t, dir, `version: 1
name: desc
epochs: 2
stages:
  - {name: r, type: range, count: 2}
  - {name: b, type: batch, size: 1}
  - {name: m, type: map, on_error: skip, set: {x: 'one_hot(len(index) - 6, 2)'}}
  - {name: out, type: discard}
`)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range rep.SkipCauses["m"] {
			head, _, _ := strings.Cut(c, ": set x")
			got = append(got, head)
		}
		want := []string{"sample 0 (epoch 0)", "sample 1 (epoch 0)", "sample 0 (epoch 1)", "sample 1 (epoch 1)"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("causes name %q, want %q", got, want)
		}
	})
}

// testFlippedByteSkipped runs TestTFRecordFlippedByte's spec src, which
// writes out, with the reader at parallelism par.
func testFlippedByteSkipped(t *testing.T, dir, src, out, par string) {
	{
		rep, err := tfrRun(t, dir, src, "stages.records.parallelism="+par)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ex := range tfrExamples(t, out) {
			got = append(got, string(ex.Features["record"].Bytes[0]))
		}
		// Only the payload is damaged, so the frame is intact and the
		// reader reads on to rec-4 (found by the tester: the rest of the
		// file used to be lost, counted as one skip).
		if want := []string{"rec-0", "rec-1", "rec-2", "rec-4"}; !reflect.DeepEqual(got, want) {
			t.Errorf("records %q, want %q", got, want)
		}
		if rep.Skipped["records"] != 1 || len(rep.Skipped) != 1 {
			t.Errorf("skipped %v, want {records: 1}", rep.Skipped)
		}
		if c := rep.SkipCauses["records"]; len(c) != 1 || !strings.Contains(c[0], "record 3 at byte offset 63") || strings.Contains(c[0], "was not read") {
			t.Errorf("skip causes %q", c)
		}
	}
}

// raccoonAll lists every raccoon feature, each as a list so any count
// round-trips.
const raccoonAll = `      image/encoded: {dtype: bytes, shape: [-1]}
      image/filename: {dtype: bytes, shape: [-1]}
      image/format: {dtype: bytes, shape: [-1]}
      image/source_id: {dtype: bytes, shape: [-1]}
      image/height: {dtype: int64, shape: [-1]}
      image/width: {dtype: int64, shape: [-1]}
      image/object/bbox/xmin: {dtype: float32, shape: [-1]}
      image/object/bbox/xmax: {dtype: float32, shape: [-1]}
      image/object/bbox/ymin: {dtype: float32, shape: [-1]}
      image/object/bbox/ymax: {dtype: float32, shape: [-1]}
      image/object/class/text: {dtype: bytes, shape: [-1]}
      image/object/class/label: {dtype: int64, shape: [-1]}
`

func TestWriteTFRecordRoundTrip(t *testing.T) {
	data := tfrSharedData(t)
	src := filepath.Join(data, "tfrecord", "raccoon", "test.record")
	input := tfrExamples(t, src)
	md := tfrExampleDescriptor(t)
	for _, comp := range []string{"none", "gzip"} {
		t.Run(comp, func(t *testing.T) {
			dir := t.TempDir()
			_, err := tfrRun(t, dir, fmt.Sprintf(`version: 1
name: roundtrip
resources: {memory: 64MiB}
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord}
  - name: examples
    type: parse_example
    features:
%s  - {name: out, type: write_tfrecord, path: "out/raccoon-{shard}-of-{shards}.tfrecord", shards: 2, compression: %s}
`, src, raccoonAll, comp))
			if err != nil {
				t.Fatal(err)
			}
			var got []*example.Example
			for shard := range 2 {
				path := filepath.Join(dir, "out", fmt.Sprintf("raccoon-%05d-of-00002.tfrecord", shard))
				head := make([]byte, 2)
				f, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				io.ReadFull(f, head)
				f.Close()
				if gz := head[0] == 0x1f && head[1] == 0x8b; gz != (comp == "gzip") {
					t.Errorf("%s: gzip magic %v, compression %s", path, gz, comp)
				}
				for i, rec := range tfrReadAll(t, path) {
					ex, err := example.Unmarshal(rec)
					if err != nil {
						t.Fatal(err)
					}
					// Sample i goes to shard i mod 2.
					idx := 2*i + shard
					for len(got) <= idx {
						got = append(got, nil)
					}
					got[idx] = ex
					// The stock protobuf library reads what piperun wrote.
					m := dynamicpb.NewMessage(md)
					if err := proto.Unmarshal(rec, m); err != nil {
						t.Fatalf("%s record %d: stock protobuf: %v", path, i, err)
					}
					if n := m.Get(md.Fields().ByName("features")).Message().Get(md.Fields().ByName("features").Message().Fields().ByName("feature")).Map().Len(); n != 12 {
						t.Errorf("%s record %d: stock protobuf sees %d features, want 12", path, i, n)
					}
				}
			}
			if len(got) != len(input) {
				t.Fatalf("%d examples written, want %d", len(got), len(input))
			}
			for i := range input {
				if got[i] == nil || !sameExample(got[i], input[i]) {
					t.Errorf("example %d differs after the round trip", i)
				}
			}
		})
	}
}

// sameExample compares features by key, kind and values.
func sameExample(a, b *example.Example) bool {
	if len(a.Features) != len(b.Features) {
		return false
	}
	for k, fa := range a.Features {
		fb := b.Features[k]
		if fb == nil || fa.Kind != fb.Kind || fa.Len() != fb.Len() {
			return false
		}
		for i := range fa.Len() {
			switch fa.Kind {
			case example.KindInt64:
				if fa.Ints[i] != fb.Ints[i] {
					return false
				}
			case example.KindFloat:
				if math.Float32bits(fa.Floats[i]) != math.Float32bits(fb.Floats[i]) {
					return false
				}
			case example.KindBytes:
				if !bytes.Equal(fa.Bytes[i], fb.Bytes[i]) {
					return false
				}
			}
		}
	}
	return true
}

func TestTFRecordFramingMatchesBeam(t *testing.T) {
	// tf.python_io.TFRecordWriter's bytes for ["foo", "bar"], from Beam's
	// tfrecordio_test.py (shared/data/README.md). write_tfrecord frames
	// whole tf.train.Examples, so it cannot emit the raw payloads "foo" and
	// "bar"; this checks the writer the sink uses, tfrecord.Writer, and
	// then that the sink's file frames its Examples the same way.
	want, _ := hex.DecodeString("0300000000000000b099490e666f6f618abefe" + "0300000000000000b099490e6261724600e5c8")
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	for _, s := range []string{"foo", "bar"} {
		if err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("framing of [foo bar]:\n got %x\nwant %x", buf.Bytes(), want)
	}

	// Through the pipeline: a file of "foo" and "bar" read as {record} and
	// written back gives two Examples {record: bytes}, framed exactly like
	// tfrecord.Writer frames those payloads.
	dir := t.TempDir()
	in := filepath.Join(dir, "beam.tfrecord")
	if err := os.WriteFile(in, want, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.tfrecord")
	if _, err := tfrRun(t, dir, fmt.Sprintf(`version: 1
name: beam
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord}
  - {name: out, type: write_tfrecord, path: %q}
`, in, out)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	ew := tfrecord.NewWriter(&exp, tfrecord.None)
	for _, s := range []string{"foo", "bar"} {
		ew.Write(example.Marshal(&example.Example{Features: map[string]*example.Feature{
			"record": {Kind: example.KindBytes, Bytes: [][]byte{[]byte(s)}},
		}}))
	}
	ew.Close()
	if !bytes.Equal(got, exp.Bytes()) {
		t.Errorf("write_tfrecord output:\n got %x\nwant %x", got, exp.Bytes())
	}
}

func tfrExampleDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	return testutil.ExampleDescriptor(t)
}

// shapesPattern is the quickstart dataset's training shards, absolute.
func shapesPattern(t testing.TB) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "examples", "data", "shapes", "train-*.tfrecord"))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(p); len(m) != 4 {
		t.Fatalf("%s matches %d files, want 4 (go run ./examples/gen makes them)", p, len(m))
	}
	return p
}

func TestQuickstartDeterministicAcrossParallelism(t *testing.T) {
	pattern := shapesPattern(t)
	const body = `version: 1
name: determinism
seed: 42
epochs: 1
resources: {memory: 256MiB}
stages:
  - {name: files, type: files, pattern: %q, shuffle: true}
  - {name: records, type: tfrecord, cycle_length: 4, parallelism: 1}
  - name: examples
    type: parse_example
    parallelism: 1
    features:
      image/encoded: {dtype: bytes}
      image/class/label: {dtype: int64, default: -1}
  - name: augment
    type: map
    parallelism: 1
    set:
      image: 'decode_image($env["image/encoded"], 3) | random_resized_crop(40, 40, 0.3, 1.0) | flip_left_right(0.5) | to_float()'
      label: '$env["image/class/label"]'
    keep: [image, label]
  - {name: shuffle, type: shuffle, buffer: 300}
  - {name: batch, type: batch, size: 16}
  - {name: out, type: write_tfrecord, path: %q}
`
	outputs := map[int][]byte{}
	for _, par := range []int{1, 8} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out.tfrecord")
		p := fmt.Sprint(par)
		rep, err := tfrRun(t, dir, fmt.Sprintf(body, pattern, out),
			"stages.records.parallelism="+p, "stages.examples.parallelism="+p, "stages.augment.parallelism="+p)
		if err != nil {
			t.Fatal(err)
		}
		if s := rep.Sinks["out"]; s.Samples != 1000 || s.Batches != 63 {
			t.Fatalf("parallelism %d: %d samples in %d batches, want 1000 in 63", par, s.Samples, s.Batches)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outputs[par] = b
	}
	if !bytes.Equal(outputs[1], outputs[8]) {
		t.Errorf("output at parallelism 1 (%d bytes, sha256 %x) differs from parallelism 8 (%d bytes, sha256 %x)",
			len(outputs[1]), sha256.Sum256(outputs[1]), len(outputs[8]), sha256.Sum256(outputs[8]))
	}
}

func TestShuffleEpochsVisitEverySampleOnce(t *testing.T) {
	pattern := shapesPattern(t)
	// Samples are identified by their JPEG bytes and label; check first that
	// these identify every input record uniquely.
	files, _ := filepath.Glob(pattern)
	input := map[string]int{}
	for _, f := range files {
		for _, ex := range tfrExamples(t, f) {
			input[sampleKey(ex)]++
		}
	}
	if len(input) != 1000 {
		t.Fatalf("%d distinct (image, label) pairs in the input, want 1000", len(input))
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.tfrecord")
	rep, err := tfrRun(t, dir, fmt.Sprintf(`version: 1
name: epochs
seed: 42
epochs: 2
stages:
  - {name: files, type: files, pattern: %q, shuffle: true}
  - {name: records, type: tfrecord, cycle_length: 4}
  - name: examples
    type: parse_example
    features:
      image/encoded: {dtype: bytes}
      image/class/label: {dtype: int64}
  - {name: shuffle, type: shuffle, buffer: 300}
  - {name: out, type: write_tfrecord, path: %q}
`, pattern, out))
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Sinks["out"]; s.Samples != 2000 || s.Epochs != 2 {
		t.Fatalf("%d samples over %d epochs, want 2000 over 2", s.Samples, s.Epochs)
	}
	exs := tfrExamples(t, out)
	if len(exs) != 2000 {
		t.Fatalf("%d records written, want 2000", len(exs))
	}
	var orders [2][]string
	for e := range 2 {
		seen := map[string]int{}
		for _, ex := range exs[e*1000 : (e+1)*1000] {
			k := sampleKey(ex)
			seen[k]++
			orders[e] = append(orders[e], k)
		}
		if !reflect.DeepEqual(seen, input) {
			missing, twice := 0, 0
			for k := range input {
				switch seen[k] {
				case 0:
					missing++
				case 1:
				default:
					twice++
				}
			}
			t.Errorf("epoch %d: %d samples missing, %d seen more than once, %d distinct", e, missing, twice, len(seen))
		}
	}
	if reflect.DeepEqual(orders[0], orders[1]) {
		t.Error("both epochs came out in the same order")
	}
}

// sampleKey identifies a shapes sample by its label and its JPEG's sha256.
func sampleKey(ex *example.Example) string {
	sum := sha256.Sum256(ex.Features["image/encoded"].Bytes[0])
	return fmt.Sprintf("%d/%x", ex.Features["image/class/label"].Ints[0], sum[:8])
}

// TestFloat32FeaturesStayFloat32: a scalar feature declared float32 reads
// as the shortest decimal of its float32 (17.65, not 17.649999618530273)
// and batches to a float32 tensor holding the very float32s written, as
// tf.data's FixedLenFeature([], tf.float32) does; it came out float64 on
// both counts. plan says float32.
func TestFloat32FeaturesStayFloat32(t *testing.T) {
	dir := t.TempDir()
	if _, err := tfrRun(t, dir, `version: 1
name: w
stages:
  - {name: src, type: range, count: 3}
  - {name: m, type: map, set: {fare: 'index + 17.65', tiny: '1e-45', big: '3.4028234663852886e38'}, drop: [index]}
  - {name: out, type: write_tfrecord, path: f.tfrecord}
`); err != nil {
		t.Fatal(err)
	}
	const read = `version: 1
name: r
stages:
  - {name: files, type: files, pattern: f.tfrecord}
  - {name: rec, type: tfrecord}
  - name: ex
    type: parse_example
    features: {fare: {dtype: float32}, tiny: {dtype: float32}, big: {dtype: float32}}
  - {name: one, type: write_jsonl, path: one.jsonl}
  - {name: b, type: batch, input: ex, size: 3}
  - name: check
    type: map
    set: {f32: 'string(shape(fare)) + " " + string(fare[0] == 17.65) + " " + string(cast(fare, "float64")[0] == 17.65)'}
  - {name: out, type: write_jsonl, path: batch.jsonl}
`
	reg := stages.Default()
	sp, diags := spec.Parse(filepath.Join(dir, "spec.yaml"), []byte(read), spec.Options{Catalog: reg})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, st := range sp.Stages {
		want := map[string]string{"ex": "float32", "b": "tensor<float32>[?]"}[st.Name]
		if f, ok := st.Schema.Lookup("fare"); want != "" && (!ok || f.String() != want) {
			t.Errorf("stage %s: fare is %v, want %s", st.Name, f, want)
		}
	}
	if _, err := tfrRun(t, dir, read); err != nil {
		t.Fatal(err)
	}
	one := strings.Join(readLines(t, filepath.Join(dir, "one.jsonl")), "\n")
	if want := `{"big":3.4028235e+38,"fare":17.65,"tiny":1e-45}`; !strings.HasPrefix(one, want) {
		t.Errorf("one sample: %s\nwant %s", one, want)
	}
	batch := readLines(t, filepath.Join(dir, "batch.jsonl"))
	// write_jsonl writes a float32 tensor's elements as float32s; fare[0]
	// reads as the float32's shortest decimal, 17.65, as a scalar does;
	// that the batch is float32, not float64 holding 17.65, shows in its
	// cast to float64, whose element is the float32 nearest 17.65, which
	// is not 17.65.
	if want := `{"big":[3.4028235e+38,3.4028235e+38,3.4028235e+38],"f32":"[3] True False","fare":[17.65,18.65,19.65],"tiny":[1e-45,1e-45,1e-45]}`; len(batch) != 1 || batch[0] != want {
		t.Errorf("batch: %v\nwant %s", batch, want)
	}
}

// TestBatchedBoolsWriteAsInts: booleans batched into a uint8 tensor are
// written as an int64_list of 0 and 1, as a single boolean is, not as the
// raw bytes of a uint8 image (reading the field
// back as int64 failed). A uint8 image beside them stays bytes.
func TestBatchedBoolsWriteAsInts(t *testing.T) {
	dir := t.TempDir()
	if _, err := tfrRun(t, dir, `version: 1
name: b
stages:
  - {name: src, type: range, count: 3}
  - {name: m, type: map, set: {ok: 'index % 2 == 0', img: 'cast(one_hot(index, 3), "uint8")'}, drop: [index]}
  - {name: b, type: batch, size: 3}
  - {name: out, type: write_tfrecord, path: b.tfrecord}
`); err != nil {
		t.Fatal(err)
	}
	recs := tfrReadAll(t, filepath.Join(dir, "b.tfrecord"))
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	ex, err := example.Unmarshal(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	if f := ex.Features["ok"]; f == nil || f.Kind != example.KindInt64 || !reflect.DeepEqual(f.Ints, []int64{1, 0, 1}) {
		t.Errorf("ok: %+v, want int64_list [1 0 1]", f)
	}
	if f := ex.Features["img"]; f == nil || f.Kind != example.KindBytes || !reflect.DeepEqual(f.Bytes, [][]byte{{1, 0, 0, 0, 1, 0, 0, 0, 1}}) {
		t.Errorf("img: %+v, want its raw bytes", f)
	}
}

// writeBools writes lines of {"b": bool} as in.jsonl in dir.
func writeBools(t *testing.T, dir string, bs ...bool) {
	t.Helper()
	var lines strings.Builder
	for _, b := range bs {
		fmt.Fprintf(&lines, "{\"b\": %v}\n", b)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// boolsRun runs src in dir and returns feature b of each record of
// b.tfrecord.
func boolsRun(t *testing.T, dir, src string) []*example.Feature {
	t.Helper()
	if _, err := tfrRun(t, dir, src); err != nil {
		t.Fatal(err)
	}
	var out []*example.Feature
	for _, rec := range tfrReadAll(t, filepath.Join(dir, "b.tfrecord")) {
		ex, err := example.Unmarshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ex.Features["b"])
	}
	return out
}

// TestRuntimeBoolsWriteAsInts: booleans of a field typed only at run
// time (a jsonl key) batch into a uint8 tensor marked as booleans, which
// write_tfrecord writes as an int64_list of 0 and 1, as it does typed
// booleans; also after an on-disk cache replays the batches (found by the
// data-path test: they were written as the raw bytes of an image).
func TestRuntimeBoolsWriteAsInts(t *testing.T) {
	dir := t.TempDir()
	const src = `version: 1
name: b
epochs: 2
stages:
  - {name: files, type: files, pattern: in.jsonl}
  - {name: lines, type: jsonl}
  - {name: batch, type: batch, size: 4}
  - {name: c, type: cache, dir: cache}
  - {name: out, type: write_tfrecord, path: b.tfrecord}
`
	// Written once: a rewritten input would change the cache's
	// fingerprint, and the second run would fill a new cache, not replay.
	writeBools(t, dir, true, false, false, true)
	for _, run := range []string{"first, cache filling", "replayed from the cache"} {
		fs := boolsRun(t, dir, src)
		if len(fs) != 2 {
			t.Fatalf("%s: %d records, want 2 (one batch an epoch)", run, len(fs))
		}
		for i, f := range fs {
			if f == nil || f.Kind != example.KindInt64 || !reflect.DeepEqual(f.Ints, []int64{1, 0, 0, 1}) {
				t.Errorf("%s, record %d: b is %+v, want int64_list [1 0 0 1]", run, i, f)
			}
		}
	}
	if caches, _ := filepath.Glob(filepath.Join(dir, "cache", "*")); len(caches) != 1 {
		t.Errorf("caches %v, want the one both runs used", caches)
	}
}

// TestPaddedBoolsStayBooleansOnlyWithBooleanPads: a batch of batched
// booleans padded with 0 or 1 is still booleans; padded with another
// value it is a uint8 tensor like any other, written as raw bytes (found
// in review: a pad of 7 was written as the boolean 7).
func TestPaddedBoolsStayBooleansOnlyWithBooleanPads(t *testing.T) {
	dir := t.TempDir()
	const src = `version: 1
name: b
stages:
  - {name: files, type: files, pattern: in.jsonl}
  - {name: lines, type: jsonl}
  - {name: inner, type: batch, size: 2}
  - {name: outer, type: batch, size: 2, pad: {b: %s}}
  - {name: out, type: write_tfrecord, path: b.tfrecord}
`
	for _, tc := range []struct {
		pad   string
		kind  example.Kind
		ints  []int64
		bytes [][]byte
	}{
		{pad: "0", kind: example.KindInt64, ints: []int64{1, 0, 1, 0}},
		{pad: "1", kind: example.KindInt64, ints: []int64{1, 0, 1, 1}},
		{pad: "7", kind: example.KindBytes, bytes: [][]byte{{1, 0, 1, 7}}},
	} {
		writeBools(t, dir, true, false, true)
		fs := boolsRun(t, dir, fmt.Sprintf(src, tc.pad))
		if len(fs) != 1 {
			t.Fatalf("pad %s: %d records, want 1", tc.pad, len(fs))
		}
		f := fs[0]
		if f == nil || f.Kind != tc.kind || tc.ints != nil && !reflect.DeepEqual(f.Ints, tc.ints) || tc.bytes != nil && !reflect.DeepEqual(f.Bytes, tc.bytes) {
			t.Errorf("pad %s: b is %+v, want %v %v%v", tc.pad, f, tc.kind, tc.ints, tc.bytes)
		}
	}
}

// TestTFRecordBadHeaderSkipped runs the new-user test's file through a
// pipeline: a real shard of 250 records with one bit flipped in record
// 100's length field. Under on_error: skip that costs record 100 alone,
// counted as one skip; it used to cost the 149 records after it too, while
// the skip count still said 1.
func TestTFRecordBadHeaderSkipped(t *testing.T) {
	raw, err := os.ReadFile("../examples/data/shapes/train-00000-of-00004.tfrecord")
	if err != nil {
		t.Fatal(err)
	}
	// Find record 100's header and record 101's.
	r, err := tfrecord.NewReader(bytes.NewReader(raw), tfrecord.None, "")
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for {
		offs = append(offs, r.Offset())
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if len(offs) != 251 {
		t.Fatalf("%d records, want 250", len(offs)-1)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "shard.tfrecord")
	bad := bytes.Clone(raw)
	bad[offs[100]+1] ^= 0x10
	if err := os.WriteFile(in, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	body := func(onError string) string { return recordsSpec(in, onError) }
	for _, par := range []string{"1", "2"} { // 2 reads ahead
		t.Run("skip parallelism "+par, func(t *testing.T) {
			rep, err := tfrRun(t, dir, body("skip"), "stages.records.parallelism="+par)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Sinks["out"].Samples; got != 249 {
				t.Errorf("out has %d samples, want 249", got)
			}
			if !rep.OK || rep.Skipped["records"] != 1 || len(rep.Skipped) != 1 {
				t.Errorf("ok %v, skipped %v; want ok and {records: 1}", rep.OK, rep.Skipped)
			}
			want := fmt.Sprintf("tfrecord: %s: record 100 at byte offset %d: length crc mismatch", in, offs[100])
			want2 := fmt.Sprintf("; skipped %d bytes to the next valid record, at byte offset %d, and read on from there as record 101", offs[101]-offs[100], offs[101])
			c := rep.SkipCauses["records"]
			if len(c) != 1 || !strings.Contains(c[0], want) || !strings.Contains(c[0], want2) || strings.Contains(c[0], "was not read") {
				t.Errorf("skip causes %q: want one holding %q and %q", c, want, want2)
			}
		})
	}
	t.Run("fail", func(t *testing.T) {
		rep, err := tfrRun(t, dir, body("fail"))
		if err == nil {
			t.Fatal("run succeeded over a bad header")
		}
		want := fmt.Sprintf("tfrecord: %s: record 100 at byte offset %d: length crc mismatch (got 0x", in, offs[100])
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `stage "records"`) || strings.Contains(err.Error(), "skipped") {
			t.Errorf("error %q: want one holding %q and the stage, and no resync", err, want)
		}
		if rep == nil || rep.OK {
			t.Errorf("report %+v: want ok false", rep)
		}
	})
}

// TestSkipCauseNamesTheFileOnce: a skipped file's cause, which the reader
// words with the file's name, is not told the name again in front of it
// ("skipped: /d/a.tfrecord: tfrecord: /d/a.tfrecord: …", found by a
// tf.data user's test); in a run of several epochs the epoch is.
func TestSkipCauseNamesTheFileOnce(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	if err := w.Write([]byte("rec")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "plain.tfrecord")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	const src = `version: 1
name: s
epochs: %d
stages:
  - {name: files, type: files, pattern: plain.tfrecord}
  - {name: records, type: tfrecord, compression: gzip, on_error: skip}
  - {name: out, type: discard}
`
	cause := "tfrecord: " + path + ": record 0 at byte offset 0: gzip header: gzip: invalid header (it starts like an uncompressed TFRecord: read it as none, or with auto, which detects it)"
	for _, tc := range []struct {
		epochs int
		want   string
	}{
		{1, cause},
		{2, path + " (epoch 0): " + cause},
	} {
		rep, err := tfrRun(t, dir, fmt.Sprintf(src, tc.epochs))
		if err != nil {
			t.Fatal(err)
		}
		if got := rep.SkipCauses["records"]; len(got) == 0 || got[0] != tc.want {
			t.Errorf("epochs %d: skip causes %q\nwant first %q", tc.epochs, got, tc.want)
		}
	}
}
