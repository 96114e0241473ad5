package expression_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
)

// TestReadFileRefusesWhatItCannotHold: read_file reads regular files of at
// most the run's bound on a value (its memory budget). /dev/zero named in
// a manifest grew the process to 24 GB, outside a 64 MiB budget, until
// the kernel killed it; a named pipe blocked the run past Ctrl-C; a 300 MB
// file was read whole under a 64 MiB budget. Refused
// before the file is opened, for the read and for the pooled read inside
// a decode alike.
func TestReadFileRefusesWhatItCannotHold(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.jpg")
	if err := os.WriteFile(big, make([]byte, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small.bin")
	if err := os.WriteFile(small, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	defer expression.SetMaxValueBytes(4096)()
	in := sample.Schema{Fields: []sample.Field{{Name: "path", Type: sample.TString}}}
	for _, src := range []string{"read_file(path)", "decode_image(read_file(path), 3)"} {
		p, err := expression.Default().Compile(src, in, sample.Any)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ path, want string }{
			{"/dev/zero", "read_file: /dev/zero is a device, not a regular file: read_file reads files whole, and this would never end or could block"},
			{fifo, "read_file: " + fifo + " is a named pipe, not a regular file: read_file reads files whole, and this would never end or could block"},
			{dir, "read_file: " + dir + " is a folder, not a file"},
			// Its open says "no such device or address".
			{sock, "read_file: " + sock + " is a socket, not a regular file: read_file reads files whole"},
			// A file longer than its size says (/proc's say 0): the read
			// stops past the bound, and says so (it gave the
			// bytes read as the file's size).
			{"/proc/self/smaps", "read_file: /proc/self/smaps takes more than the run's memory budget (4KiB)"},
			{big, "read_file: " + big + " takes 4.88KiB, more than the run's memory budget (4KiB)"},
			{small, ""},
		} {
			_, err := p.Run(nil, map[string]any{"path": tc.path})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tc.want == "" && got != "" && !strings.Contains(got, "decode_image") || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("%s of %s: %q\nwant %q", src, tc.path, got, tc.want)
			}
		}
	}
}
