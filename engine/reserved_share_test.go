package engine_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/tfrecord"
)

// TestSharesAreOfWhatReservationsLeave: a shuffle's half of the budget,
// the read-ahead's quarter and a parallel stage's window are parts of
// what the stages' own reservations leave the samples, not of the whole
// budget: with an interleave of 64 open files reserving 4.1 MiB of 8 MiB,
// a shuffle's half of the whole filled what was left, and every run
// stalled, where the budget less the reservation ran before the files
// were counted (a re-test).
func TestSharesAreOfWhatReservationsLeave(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for f := range 64 {
		out, err := os.Create(filepath.Join(dir, "d", "f"+string(rune('a'+f/26))+string(rune('a'+f%26))+".tfrecord"))
		if err != nil {
			t.Fatal(err)
		}
		w := tfrecord.NewWriter(out, tfrecord.None)
		for range 8 {
			rec := make([]byte, 30000)
			for i := range rec {
				rec[i] = byte(rng.Uint32())
			}
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, par := range []string{"1", "4"} {
		rep, err := runSpec(t, dir, `version: 1
name: rs
resources: {memory: 8MiB}
stages:
  - {name: files, type: files, pattern: 'd/*.tfrecord'}
  - {name: records, type: tfrecord, compression: none, cycle_length: 64, parallelism: `+par+`}
  - {name: shuf, type: shuffle, buffer: 1000}
  - {name: batch, type: batch, size: 8}
  - {name: out, type: discard}
`)
		if err != nil {
			t.Fatalf("parallelism %s: %v", par, err)
		}
		if got := rep.Sinks["out"].Samples; got != 512 {
			t.Errorf("parallelism %s: %d samples, want 512", par, got)
		}
	}
}
