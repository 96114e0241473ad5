package fileguard_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/internal/fileguard"
)

// TestReader: a file read to its end reads as usual, also after it grew;
// one cut short while read ends with an error giving both sizes.
func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(path string) error
		want   string
	}{
		{"unchanged", func(string) error { return nil }, ""},
		{"grown", func(p string) error {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write([]byte("more"))
			return err
		}, ""},
		{"cut", func(p string) error { return os.Truncate(p, 6) },
			"the file shrank while it was read: it had 10 bytes when opened, and has 6 now (rewritten in place by another process?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := fileguard.Reader(f)
			if err := tc.change(path); err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(r)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("ReadAll: %q, want %q", got, tc.want)
			}
			if tc.want != "" && !errors.Is(err, fileguard.ErrShrank) {
				t.Errorf("%v is not ErrShrank", err)
			}
		})
	}
}

// ExampleReader reads a pipe, which has no size to check against, as it
// is.
func ExampleReader() {
	r, w, err := os.Pipe()
	if err != nil {
		panic(err)
	}
	go func() { w.Write([]byte("piped")); w.Close() }()
	b, err := io.ReadAll(fileguard.Reader(r))
	fmt.Println(string(b), err)
	// Output: piped <nil>
}
