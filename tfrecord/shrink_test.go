package tfrecord_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/piperun/piperun/internal/fileguard"
	"github.com/piperun/piperun/tfrecord"
)

// TestFileShrinkingWhileReadIsAnError: a file cut short at a record
// boundary while it is read (a shard rewritten in place by another job)
// ended as a clean end of file, and the run succeeded with the records
// past the cut missing and nothing skipped. The size the file had when
// opened says more were there.
func TestFileShrinkingWhileReadIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.tfrecord")
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	rec := bytes.Repeat([]byte{7}, 64<<10)
	for range 100 {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, c, err := tfrecord.Open(path, tfrecord.None, false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	// Cut at the end of record 49: past what the reader has buffered.
	frame := int64(len(rec) + 16)
	if err := os.Truncate(path, 50*frame); err != nil {
		t.Fatal(err)
	}
	n := 1
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
		n++
	}
	if errors.Is(err, io.EOF) {
		t.Fatalf("read %d of 100 records and then a clean end of file", n)
	}
	want := "tfrecord: " + path + ": record 50 at byte offset " + itoa(50*frame) + ": read: the file shrank while it was read: it had " + itoa(100*frame) + " bytes when opened, and has " + itoa(50*frame) + " now (rewritten in place by another process?)"
	if err.Error() != want {
		t.Fatalf("after %d records: %v\nwant %s", n, err, want)
	}
	if n != 50 {
		t.Errorf("read %d records before the error, want 50", n)
	}
	// So that on_error: skip does not take it for damage to read past.
	if !errors.Is(err, fileguard.ErrShrank) {
		t.Errorf("%v does not wrap fileguard.ErrShrank", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
