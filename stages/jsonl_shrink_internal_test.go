package stages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/piperun/piperun/internal/fileguard"
	"github.com/piperun/piperun/sample"
)

// TestJSONLFileShrinkingWhileRead: a JSON lines file cut at a line
// boundary while read fails the stream, where it ended as a clean end of
// file with the lines past the cut lost.
func TestJSONLFileShrinkingWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	line := `{"x": "` + strings.Repeat("y", 1000) + `"}` + "\n"
	if err := os.WriteFile(path, []byte(strings.Repeat(line, 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &jsonlStage{cfg: &JSONLConfig{Field: "path"}, max: 1 << 20, why: "max_line_bytes"}
	st, err := j.Open(context.Background(), &sample.Sample{Fields: map[string]any{"path": path}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Next(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(500*len(line))); err != nil {
		t.Fatal(err)
	}
	n := 1
	for ; ; n++ {
		if _, err = st.Next(); err != nil {
			break
		}
	}
	want := fmt.Sprintf("%s:501: the file shrank while it was read: it had %d bytes when opened, and has %d now", path, 1000*len(line), 500*len(line))
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("after %d lines: %v; want the file's shrinking", n, err)
	}
	if n != 500 {
		t.Errorf("read %d lines before the error, want 500", n)
	}
	if !errors.Is(err, fileguard.ErrShrank) {
		t.Errorf("%v does not wrap fileguard.ErrShrank, which on_error: skip must not skip", err)
	}
}

// TestJSONLKeepsNoLongLine: a stream keeps at most jsonlBuffer of a
// line's bytes once the line's sample is made, as its reservation counts: a 1 MiB line
// was kept for the rest of the file, in each file the interleave held.
func TestJSONLKeepsNoLongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	long := `{"x": "` + strings.Repeat("y", 1<<20) + `"}` + "\n"
	if err := os.WriteFile(path, []byte(long+`{"x": 1}`+"\n"+`{"x": 2}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &jsonlStage{cfg: &JSONLConfig{Field: "path"}, max: 2 << 20, why: "max_line_bytes"}
	st, err := j.Open(context.Background(), &sample.Sample{Fields: map[string]any{"path": path}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := st.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Fields["x"].(string); len(got) != 1<<20 {
		t.Fatalf("line 1 gave x of %d bytes, want %d", len(got), 1<<20)
	}
	// Right after the long line's sample, not only once the stream is
	// read again, a whole interleave cycle later (a review).
	if c := cap(st.(*jsonlStream).buf); c > 64<<10 {
		t.Errorf("after the long line the stream keeps %d bytes of it, more than its 64 KiB", c)
	}
	if s, err := st.Next(); err != nil || s.Fields["x"] != int64(1) {
		t.Fatalf("line 2: %v, %v", s, err)
	}
}

// TestInterleaveNamesAFieldThatIsNoPath: a path field holding something
// else is named by its piperun type, not Go's (it said "%T": "int64" by
// luck, "[]interface {}" for a list).
func TestInterleaveNamesAFieldThatIsNoPath(t *testing.T) {
	for _, tc := range []struct {
		value any
		want  string
	}{
		{int64(3), `field "path" is int64, not a path`},
		{[]any{"a", "b"}, `field "path" is list<any>, not a path`},
		{nil, `field "path" is null, not a path`},
	} {
		in := &sample.Sample{Fields: map[string]any{"path": tc.value}}
		for _, x := range []Expander{
			&tfrecordStage{cfg: &TFRecordConfig{Field: "path"}},
			&jsonlStage{cfg: &JSONLConfig{Field: "path"}},
		} {
			if _, err := x.Open(context.Background(), in); err == nil || err.Error() != tc.want {
				t.Errorf("%T of %v: err = %v, want %q", x, tc.value, err, tc.want)
			}
		}
	}
}
