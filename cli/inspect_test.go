package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/tfrecord"
)

// expectedRecords reads num_records from shared/data's EXPECTED file for a
// TFRecord file given relative to shared/data/tfrecord.
func expectedRecords(t *testing.T, data, rel string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "tfrecord", "EXPECTED", strings.ReplaceAll(rel, "/", "__")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		NumRecords *int `json:"num_records"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	if exp.NumRecords == nil {
		t.Fatalf("EXPECTED for %s has no num_records", rel)
	}
	return *exp.NumRecords
}

func TestInspectCounts(t *testing.T) {
	data := sharedData(t)
	for _, tc := range []struct {
		file        string
		records     int // from EXPECTED, cross-checked here
		compression string
	}{
		{"raccoon/test.record", 40, "none"},
		{"tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz", 234, "gzip"},
		{"tfevents/events.out.tfevents.1646034751.eval", 7, "none"},
		{"ranking/train_elwc.tfrecord", 10, "none"},
		{"deeplab/pascal_voc_seg_val-00000-of-00001.tfrecord", 3, "none"},
		{"tfx/csv_example_gen_Split-eval_data_tfrecord-00000-of-00012.gz", 424, "gzip"},
		{"tfx/tfrecord_sequence_Split-eval_data_tfrecord_eval.gz", 4500, "gzip"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			if n := expectedRecords(t, data, tc.file); n != tc.records {
				t.Fatalf("EXPECTED says %d records, the table %d", n, tc.records)
			}
			path := filepath.Join(data, "tfrecord", tc.file)
			r := run(t, "inspect", "--format", "json", "--records", "1", path)
			if r.code != 0 {
				t.Fatalf("inspect: %s", r)
			}
			var rep struct {
				File        string `json:"file"`
				Compression string `json:"compression"`
				Records     int    `json:"records"`
				Shown       []struct {
					Index int `json:"index"`
				} `json:"shown"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			if rep.File != path || rep.Records != tc.records || rep.Compression != tc.compression || len(rep.Shown) != 1 || rep.Shown[0].Index != 0 {
				t.Errorf("got %+v, want %d records, compression %s, record 0 shown", rep, tc.records, tc.compression)
			}
		})
	}
}

func TestInspectPenguinGolden(t *testing.T) {
	inspectGolden(t, "tfx/penguin_Split-train_data_tfrecord-00000-of-00001.gz", "2", "inspect_penguin.txt")
}

// TestInspectSequenceGolden: a tf.train.SequenceExample shows its context
// and its feature lists, step by step (the
// feature lists were left out without a word).
func TestInspectSequenceGolden(t *testing.T) {
	inspectGolden(t, "tfx/tfrecord_sequence_Split-eval_data_tfrecord_eval.gz", "3", "inspect_sequence.txt")
}

// inspectGolden inspects the first records of a shared TFRecord file,
// named relative to shared/data/tfrecord, against a golden file.
func inspectGolden(t *testing.T, rel, records, name string) {
	t.Helper()
	path := filepath.Join(sharedData(t), "tfrecord", filepath.FromSlash(rel))
	r := run(t, "inspect", "--records", records, path)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("inspect: %s", r)
	}
	// The path depends on where shared/data lives; the golden file says FILE.
	golden(t, name, strings.Replace(r.stdout, path, "FILE", 1))
}

func TestInspectNotExamples(t *testing.T) {
	data := sharedData(t)
	for _, tc := range []struct {
		file string
		want []string
	}{
		// tfevents: an Event's field 1 is wall_time, a double.
		{"tfevents/events.out.tfevents.1646034751.eval", []string{
			"records: 7\n",
			"record 0: not a tf.train.Example (example: features: wrong wire type 1 for field 1); 24 bytes\n",
			"record 1: not a tf.train.Example (example: features: wrong wire type 1 for field 1); 608695 bytes\n",
		}},
		// ELWC: whole Examples sit where an Example's feature keys would.
		{"ranking/train_elwc.tfrecord", []string{
			"records: 10\n",
			"record 0: not a tf.train.Example (feature key \"\\n\\x0fdocument_tokens",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r := run(t, "inspect", "--records", "2", filepath.Join(data, "tfrecord", tc.file))
			if r.code != 0 {
				t.Fatalf("inspect: %s", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// TestInspectUnknownFieldTwo: an Example carrying an unknown field 2 that
// is not a SequenceExample's feature_lists is shown as the Example that
// parse_example and TensorFlow read (it said "not a tf.train.Example").
func TestInspectUnknownFieldTwo(t *testing.T) {
	rec := example.Marshal(&example.Example{Features: map[string]*example.Feature{
		"x": {Kind: example.KindInt64, Ints: []int64{7}},
	}})
	// A damaged feature_lists (field 2, length-delimited) is not passed
	// over: the record is shown as what it is not.
	damaged := append(slices.Clip(rec), 0x12, 0x03, 0x0a, 0xff, 0x01)
	rec = append(rec, 0x10, 0x05) // field 2, varint 5
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	for _, r := range [][]byte{rec, damaged} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.tfrecord")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "inspect", path)
	want := fmt.Sprintf("record 0: %d bytes, 1 feature\n  x  int64 [1]  7\nrecord 1: not a tf.train.Example (", len(rec))
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("got %s\nwant stdout holding\n%s", r, want)
	}
}

func TestInspectPreviews(t *testing.T) {
	data := sharedData(t)
	r := run(t, "inspect", "--records", "1", filepath.Join(data, "tfrecord", "deeplab", "pascal_voc_seg_val-00000-of-00001.tfrecord"))
	if r.code != 0 {
		t.Fatalf("inspect: %s", r)
	}
	for _, w := range []string{
		"records: 3\n",
		"record 0: 402447 bytes, 8 features\n",
		"  image/encoded                     bytes [1]  JPEG 500×366 (218323 bytes)\n",
		"  image/segmentation/class/encoded  bytes [1]  PNG 500×366 (183862 bytes)\n",
		"  image/filename                    bytes [1]  \"2007_000033\"\n",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "record 1:") {
		t.Errorf("--records 1 showed record 1:\n%s", r.stdout)
	}

	// Long lists stop after 8 values; long binary shows a hex prefix and its
	// length; long text is cut with its length.
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	long := strings.Repeat("abcdefghij", 10)
	bin := make([]byte, 40)
	for i := range bin {
		bin[i] = byte(i)
	}
	rec := example.Marshal(&example.Example{Features: map[string]*example.Feature{
		"ints": {Kind: example.KindInt64, Ints: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		"bin":  {Kind: example.KindBytes, Bytes: [][]byte{bin}},
		"text": {Kind: example.KindBytes, Bytes: [][]byte{[]byte(long)}},
	}})
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.tfrecord")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, "inspect", path)
	want := "file: " + path + "\ncompression: none\nrecords: 1\nrecord 0: " + itoa(len(rec)) + " bytes, 3 features\n" +
		"  bin   bytes [1]  0x000102030405060708090a0b0c0d0e0f… (40 bytes)\n" +
		"  ints  int64 [10]  1, 2, 3, 4, 5, 6, 7, 8, …\n" +
		"  text  bytes [1]  \"" + long[:64] + "\"… (100 bytes)\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("got %s\nwant stdout\n%s", r, want)
	}

	// JSON gives typed values: numbers, short text itself, descriptions
	// of the rest.
	w = tfrecord.NewWriter(&buf, tfrecord.None)
	buf.Reset()
	if err := w.Write(example.Marshal(&example.Example{Features: map[string]*example.Feature{
		"ints":   {Kind: example.KindInt64, Ints: []int64{-3, 1 << 40}},
		"floats": {Kind: example.KindFloat, Floats: []float32{0.1, float32(math.Inf(1)), float32(math.Copysign(0, -1)), 2, 1e20, float32(math.NaN())}},
		"text":   {Kind: example.KindBytes, Bytes: [][]byte{[]byte("cat \"tabby\""), bin}},
	}})); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, "inspect", "--format", "json", path)
	var got struct {
		Shown []struct {
			Features []struct {
				Key    string
				Values json.RawMessage
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Shown) != 1 {
		t.Fatalf("inspect --format json: %v\n%s", err, r)
	}
	values := map[string]string{}
	for _, f := range got.Shown[0].Features {
		var compact bytes.Buffer
		json.Compact(&compact, f.Values)
		values[f.Key] = compact.String()
	}
	for k, want := range map[string]string{
		"floats": `[0.1,"+Inf",-0.0,2.0,1e+20,"NaN"]`, // a float keeps its point (Python read 2 as an int, -0 as 0)
		"ints":   `[-3,1099511627776]`,
		"text":   `["cat \"tabby\"",{"about":"0x000102030405060708090a0b0c0d0e0f… (40 bytes)","bytes":40}]`,
	} {
		if values[k] != want {
			t.Errorf("%s: values %s, want %s", k, values[k], want)
		}
	}
}

func TestInspectCorrupt(t *testing.T) {
	data := sharedData(t)
	path := filepath.Join(data, "tfrecord", "corrupted", "snapshot_serengeti_sequence_examples.record")
	r := run(t, "inspect", path)
	if r.code != 1 || !strings.Contains(r.stdout, "records: 0 readable, 1 damaged (under on_error: skip, each is skipped and counted), the last ending the file early") {
		t.Fatalf("got %s\nwant exit 1, and no record readable", r)
	}
	for _, w := range []string{path, "record 0", "byte offset 0", "truncated"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("error lacks %q: %s", w, r.stderr)
		}
	}

	// A flipped data byte in record 2 of 3: the CRC check names record 2 at
	// its exact offset even though only the count was asked for.
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	for _, s := range []string{"foo", "bar", "bazz"} {
		if err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	b := buf.Bytes()
	b[2*(8+4+3+4)+12] ^= 0x01 // first data byte of record 2, at offset 38
	bad := filepath.Join(t.TempDir(), "bad.tfrecord")
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, "inspect", "--records", "0", bad)
	if r.code != 1 || !strings.Contains(r.stderr, bad+": record 2 at byte offset 38: ") {
		t.Errorf("got %s\nwant exit 1 naming %s record 2 at byte offset 38", r, bad)
	}
	// The records before the damage are still shown, and the JSON carries
	// the error (a file damaged at record 16
	// showed nothing, and --format json printed nothing to parse).
	r = run(t, "inspect", "--records", "3", bad)
	if r.code != 1 || !strings.Contains(r.stdout, "records: 2 readable, 1 damaged (under on_error: skip, each is skipped and counted); the errors follow\n") ||
		!strings.Contains(r.stdout, "record 1: not a tf.train.Example") || strings.Contains(r.stdout, "record 2") {
		t.Errorf("got %s\nwant exit 1, records 0 and 1 shown, and the count before the damage", r)
	}
	r = run(t, "inspect", "--format", "json", bad)
	type report struct {
		Records int `json:"records"`
		Shown   []struct {
			Index int `json:"index"`
		} `json:"shown"`
		Damaged []string `json:"damaged"`
		Error   string   `json:"error"`
		Ended   bool     `json:"ended"`
	}
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 1 || err != nil || rep.Records != 2 || len(rep.Shown) != 2 ||
		!strings.Contains(rep.Error, bad+": record 2 at byte offset 38: ") || len(rep.Damaged) != 1 || rep.Damaged[0] != rep.Error || rep.Ended {
		t.Errorf("json: got %s (%v)\nwant exit 1, 2 records and the error", r, err)
	}

	// Damage in the middle is read past, as a tfrecord stage under
	// on_error: skip does (inspect gave up at one bad
	// checksum where the run read the other 149 records): a bad payload
	// in record 1 of 5, a bad header in record 3. The records after each
	// are counted and shown under their numbers in the file.
	buf.Reset()
	w = tfrecord.NewWriter(&buf, tfrecord.None)
	for _, s := range []string{"r0", "r1", "r2", "r3", "r4"} {
		if err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	b = buf.Bytes()
	const frame = 8 + 4 + 2 + 4
	b[1*frame+12] ^= 0x01 // record 1's first data byte
	b[3*frame+0] ^= 0x01  // record 3's length
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, "inspect", "--format", "json", "--records", "5", bad)
	rep = report{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 1 || err != nil {
		t.Fatalf("json: got %s (%v)\nwant exit 1", r, err)
	}
	var shown []int
	for _, s := range rep.Shown {
		shown = append(shown, s.Index)
	}
	if rep.Records != 3 || fmt.Sprint(shown) != "[0 2 4]" || len(rep.Damaged) != 2 || rep.Ended ||
		!strings.Contains(rep.Damaged[0], "record 1 at byte offset 18: data crc mismatch") ||
		!strings.Contains(rep.Damaged[1], "record 3 at byte offset 54: length crc mismatch") ||
		!strings.Contains(rep.Damaged[1], "skipped 18 bytes to the next valid record, at byte offset 72") {
		t.Errorf("json: got %+v\nwant records 0, 2 and 4 read, 1 and 3 damaged", rep)
	}
	r = run(t, "inspect", "--records", "0", bad)
	if r.code != 1 || !strings.Contains(r.stdout, "records: 3 readable, 2 damaged (under on_error: skip, each is skipped and counted); the errors follow\n") ||
		strings.Count(r.stderr, bad+": record ") != 2 {
		t.Errorf("got %s\nwant 3 readable, 2 damaged, both errors on stderr", r)
	}
	// With the file cut inside record 4, the scan after record 3's bad
	// header finds nothing to read on from.
	if err := os.WriteFile(bad, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, "inspect", "--records", "0", bad)
	if r.code != 1 || !strings.Contains(r.stdout, "records: 2 readable, 2 damaged (under on_error: skip, each is skipped and counted), the last to the end of the file; the errors follow\n") ||
		!strings.Contains(r.stderr, "record 3 at byte offset 54: length crc mismatch") || !strings.Contains(r.stderr, "no valid record follows") {
		t.Errorf("got %s\nwant 2 readable, 2 damaged, the last to the end", r)
	}
	// Damage that ends the file after a skipped one says both.
	b[3*frame+0] ^= 0x01 // record 3 intact again
	if err := os.WriteFile(bad, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, "inspect", "--records", "0", bad)
	if r.code != 1 || !strings.Contains(r.stdout, "records: 3 readable, 2 damaged (under on_error: skip, each is skipped and counted), the last ending the file early; the errors follow\n") ||
		!strings.Contains(r.stderr, "record 4 at byte offset 72: truncated") {
		t.Errorf("got %s\nwant 3 readable, 2 damaged, the last the cut", r)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// inspectJSON is the part of inspect's JSON that the damage tests read.
type inspectJSON struct {
	Records      int      `json:"records"`
	Damaged      []string `json:"damaged"`
	DamagedCount *int     `json:"damaged_count"`
	Error        string   `json:"error"`
	EndError     string   `json:"end_error"`
	Ended        bool     `json:"ended"`
}

// writeRecords writes n records of 2 bytes ("r0", "r1", …, cut to two
// bytes) to a new file, after damage changes their bytes (each frame is
// 18 bytes), and returns its path.
func writeRecords(t *testing.T, n int, damage func([]byte) []byte) string {
	t.Helper()
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	for i := range n {
		if err := w.Write([]byte(fmt.Sprintf("r%d", i%10))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bad.tfrecord")
	if err := os.WriteFile(path, damage(buf.Bytes()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInspectEndError: damage read past and then a cut that ends the file
// are both in the JSON: damaged lists the skip (and error, the first of
// all, is it), end_error names the cut (the cut was only
// on stderr).
func TestInspectEndError(t *testing.T) {
	const frame = 8 + 4 + 2 + 4
	bad := writeRecords(t, 8, func(b []byte) []byte {
		b[2*frame+1] ^= 0x10    // record 2's length
		return b[:6*frame+12+3] // cut inside record 6's data crc
	})
	r := run(t, "inspect", "--format", "json", "--records", "0", bad)
	var rep inspectJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 1 || err != nil {
		t.Fatalf("got %s (%v), want exit 1 and JSON", r, err)
	}
	skip := bad + ": record 2 at byte offset 36: length crc mismatch"
	cut := bad + ": record 6 at byte offset 108: truncated: record of length 2 needs 6 bytes (payload and data crc) after the header, got 3"
	// The cut is damage too, as a tfrecord stage under on_error: skip
	// counts it (damaged_count was 0 for a cut file).
	if rep.Records != 5 || len(rep.Damaged) != 2 || !strings.Contains(rep.Damaged[0], skip) || !strings.HasSuffix(rep.Damaged[1], cut) || rep.DamagedCount == nil || *rep.DamagedCount != 2 ||
		rep.Error != rep.Damaged[0] || !strings.HasSuffix(rep.EndError, cut) || !rep.Ended {
		t.Errorf("got %+v\nwant 5 records, the skip of record 2 damaged and the error, the cut of record 6 the end error", rep)
	}
	r = run(t, "inspect", "--records", "0", bad)
	if want := "records: 5 readable, 2 damaged (under on_error: skip, each is skipped and counted), the last ending the file early; the errors follow\n"; r.code != 1 ||
		!strings.Contains(r.stdout, want) || !strings.Contains(r.stderr, skip) || !strings.Contains(r.stderr, cut) {
		t.Errorf("got %s\nwant %q and both errors on stderr", r, want)
	}

	// A bad header with no valid record after it: the damage ends the
	// file, and is the end error too.
	bad = writeRecords(t, 8, func(b []byte) []byte {
		b[6*frame+1] ^= 0x10
		return b[:len(b)-3]
	})
	r = run(t, "inspect", "--format", "json", "--records", "0", bad)
	rep = inspectJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 1 || err != nil || rep.Records != 6 || len(rep.Damaged) != 1 ||
		rep.EndError != rep.Damaged[0] || rep.Error != rep.Damaged[0] || !rep.Ended ||
		!strings.HasSuffix(rep.EndError, "; no valid record follows in the remaining 33 bytes from byte offset 108") {
		t.Errorf("got %s (%v)\nwant 6 records, and the damage to the end as error and end error", r, err)
	}
	r = run(t, "inspect", "--records", "0", bad)
	if r.code != 1 || strings.Count(r.stderr, "no valid record follows") != 1 {
		t.Errorf("got %s\nwant the damage to the end on stderr once", r)
	}

	// An intact file says none of it, but damaged_count: 0.
	r = run(t, "inspect", "--format", "json", "--records", "0", writeRecords(t, 3, func(b []byte) []byte { return b }))
	rep = inspectJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 0 || err != nil || rep.Records != 3 || rep.DamagedCount == nil || *rep.DamagedCount != 0 ||
		rep.Damaged != nil || rep.Error != "" || rep.EndError != "" || rep.Ended {
		t.Errorf("got %s (%v)\nwant 3 records, damaged_count 0 and no error", r, err)
	}
}

// TestInspectManyDamaged: a file with every data checksum bad lists and
// prints the first 20 errors and counts them all (a
// file of 20,000 such records printed 2.5 MB of errors).
func TestInspectManyDamaged(t *testing.T) {
	const n, frame = 20_000, 8 + 4 + 2 + 4
	every := func(b []byte) []byte {
		for i := range n {
			b[i*frame+12] ^= 1 // the first data byte
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		damage  func([]byte) []byte
		count   int
		errors  int // on stderr
		line    string
		endWith string // the end error's end, when one
	}{
		{"every record", every, n, 20,
			"records: 0 readable, 20000 damaged (under on_error: skip, each is skipped and counted); the first 20 errors follow\n", ""},
		{"every record, then a cut", func(b []byte) []byte { return every(b)[:len(b)-1] }, n, 21,
			"records: 0 readable, 20000 damaged (under on_error: skip, each is skipped and counted), the last ending the file early; the first 20 errors follow, then the last\n",
			"record 19999 at byte offset 359982: truncated: record of length 2 needs 6 bytes (payload and data crc) after the header, got 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := writeRecords(t, n, tc.damage)
			r := run(t, "inspect", "--records", "0", bad)
			if r.code != 1 || !strings.Contains(r.stdout, tc.line) || strings.Count(r.stderr, bad+": record ") != tc.errors ||
				strings.Count(r.stderr, "data crc mismatch") != 20 || !strings.Contains(r.stderr, "record 19 at byte offset 342: data crc mismatch") ||
				!strings.HasSuffix(strings.TrimSpace(r.stderr), tc.endWith) {
				t.Errorf("got stdout %q, %d errors on stderr (%d bytes), ending %q;\nwant %q, %d errors, records 0 to 19 damaged",
					r.stdout, strings.Count(r.stderr, bad+": record "), len(r.stderr), r.stderr[max(0, len(r.stderr)-200):], tc.line, tc.errors)
			}
			r = run(t, "inspect", "--format", "json", "--records", "0", bad)
			var rep inspectJSON
			if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 1 || err != nil || rep.Records != 0 || len(rep.Damaged) != 20 ||
				rep.DamagedCount == nil || *rep.DamagedCount != tc.count || rep.Error != rep.Damaged[0] ||
				!strings.Contains(rep.Damaged[19], "record 19 at byte offset 342: data crc mismatch") ||
				rep.Ended != (tc.endWith != "") || !strings.HasSuffix(rep.EndError, tc.endWith) || (tc.endWith == "") != (rep.EndError == "") {
				t.Errorf("json: got records %d, %d damaged listed of %v, error %q, end error %q, ended %v (%v)\nwant 0, 20 of %d",
					rep.Records, len(rep.Damaged), rep.DamagedCount, rep.Error, rep.EndError, rep.Ended, err, tc.count)
			}
		})
	}
}
