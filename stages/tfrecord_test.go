package stages_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
	"github.com/piperun/piperun/tfrecord"
)

// runTFRecordSpec parses, plans and runs a spec written as if it lived in
// dir.
func runTFRecordSpec(t *testing.T, dir, src string, set ...string) (*engine.Report, error) {
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
	body := func(onError string) string {
		return fmt.Sprintf(`version: 1
name: badheader
stages:
  - {name: files, type: files, pattern: %q}
  - {name: records, type: tfrecord, on_error: %s}
  - {name: out, type: discard}
`, in, onError)
	}
	for _, par := range []string{"1", "2"} { // 2 reads ahead
		t.Run("skip parallelism "+par, func(t *testing.T) {
			rep, err := runTFRecordSpec(t, dir, body("skip"), "stages.records.parallelism="+par)
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
		rep, err := runTFRecordSpec(t, dir, body("fail"))
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
