//go:build unix

package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/tfrecord"
)

// TestInspectReadsAPipe: `gsutil cat … | piperun inspect /dev/stdin` reads
// a stream that cannot seek back to where the compression was detected,
// gzipped or not.
func TestInspectReadsAPipe(t *testing.T) {
	rec := example.Marshal(&example.Example{Features: map[string]*example.Feature{
		"x": {Kind: example.KindInt64, Ints: []int64{7}},
	}})
	for _, tc := range []struct {
		name string
		comp tfrecord.Compression
		want string
	}{
		{"plain", tfrecord.None, "compression: none\nrecords: 5\n"},
		{"gzip", tfrecord.Gzip, "compression: gzip\nrecords: 5\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := tfrecord.NewWriter(&buf, tc.comp)
			for range 5 {
				if err := w.Write(rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			fifo := filepath.Join(t.TempDir(), "in.fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Skipf("no named pipes here: %v", err)
			}
			wrote := make(chan error, 1)
			go func() {
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err == nil {
					_, err = f.Write(buf.Bytes())
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				wrote <- err
			}()
			r := run(t, "inspect", "--records", "1", fifo)
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
			want := "file: " + fifo + "\n" + tc.want + "record 0: "
			if r.code != 0 || !strings.HasPrefix(r.stdout, want) {
				t.Errorf("got %s\nwant stdout starting\n%s", r, want)
			}
		})
	}
}

// TestInspectReadsStdin: "-" is standard input, as for cat, and is named
// so in the report.
func TestInspectReadsStdin(t *testing.T) {
	rec := example.Marshal(&example.Example{Features: map[string]*example.Feature{
		"x": {Kind: example.KindInt64, Ints: []int64{7}},
	}})
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.Gzip)
	for range 3 {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin; r.Close() }()
	go func() {
		pw.Write(buf.Bytes())
		pw.Close()
	}()
	res := run(t, "inspect", "--records", "0", "-")
	if want := "file: -\ncompression: gzip\nrecords: 3\n"; res.code != 0 || res.stdout != want {
		t.Errorf("got %s\nwant stdout\n%s", res, want)
	}
}

// TestInspectRefusesADevice: a device is no file to count records of:
// inspect of /dev/zero scanned forever without a word (an adversarial
// test), as a run refuses a device among its inputs.
func TestInspectRefusesADevice(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skipf("no /dev/zero here: %v", err)
	}
	r := run(t, "inspect", "/dev/zero")
	const want = "piperun: /dev/zero is a device, not a file of records\n"
	if r.code != 1 || r.stderr != want {
		t.Errorf("got %s\nwant exit 1 and stderr %q", r, want)
	}
}
