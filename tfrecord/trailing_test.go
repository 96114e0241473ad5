package tfrecord_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/piperun/piperun/tfrecord"
)

// TestGzipTrailingBytes: bytes after the last gzip member that are no
// gzip are named as such, after every record was read; Go's multistream
// reader took 8 of them for a cut stream ("the gzip stream is cut short")
// and 16 zeros for "gzip: invalid header" (found by a tf.data user's
// test). A second member, whole or cut short, is read as before.
func TestGzipTrailingBytes(t *testing.T) {
	member := func(recs ...string) []byte {
		var buf bytes.Buffer
		w := tfrecord.NewWriter(&buf, tfrecord.Gzip)
		for _, r := range recs {
			if err := w.Write([]byte(r)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	one, two := member("a", "b", "c"), member("d", "e")
	const trailing = "bytes after the end of the gzip stream are not gzip (trailing garbage): every record before this offset is whole"
	for _, tc := range []struct {
		name string
		data []byte
		n    int
		want string // the end's error; "" for a clean end
	}{
		{"one member", one, 3, ""},
		{"two members", append(append([]byte{}, one...), two...), 5, ""},
		{"8 junk bytes", append(append([]byte{}, one...), "junkjunk"...), 3, trailing},
		{"16 zeros", append(append([]byte{}, one...), make([]byte, 16)...), 3, trailing},
		{"a second member cut in its header", append(append([]byte{}, one...), two[:6]...), 3, "the gzip stream is cut short"},
		{"a second member cut in its data", append(append([]byte{}, one...), two[:len(two)-12]...), 3, "the gzip stream is cut short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tfrecord.NewReader(bytes.NewReader(tc.data), tfrecord.Gzip, "f.gz")
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
				n++
			}
			if n < tc.n {
				t.Errorf("read %d records, want %d", n, tc.n)
			}
			switch {
			case tc.want == "" && !errors.Is(err, io.EOF):
				t.Errorf("end: %v, want a clean end", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("end: %v\nwant it to say %q", err, tc.want)
			}
		})
	}
}
