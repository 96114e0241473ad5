//go:build unix

package cli_test

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/piperun/piperun/serve"
)

// TestPythonClientBoundsAPayload: a frame head claiming a payload beyond
// the limit is refused before anything is allocated, and one within it but
// cut short costs only what was sent: the client allocated the whole
// length up front (2 GiB for a corrupt head, MemoryError beyond), found
// in review.
func TestPythonClientBoundsAPayload(t *testing.T) {
	py := pythonWith(t, "numpy")
	for _, tc := range []struct {
		plen uint64
		want string
	}{
		{1 << 50, `"error": "frame payload of 1125899906842624 bytes is over the limit of 17179869184"`},
		{1 << 31, `"cut": "the stream ended before its end-of-stream frame (after 4 of 2147483648 bytes of a frame): the run failed or was interrupted"`},
	} {
		t.Run(fmt.Sprint(tc.plen), func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "f.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				io.ReadFull(c, make([]byte, len(serve.ClientHello)))
				hello, _ := serve.EncodeJSON(serve.KindHello, serve.Hello{Protocol: serve.Protocol})
				hdr := []byte(`{"id":0,"epoch":0,"fields":[]}`)
				c.Write(hello)
				c.Write(serve.AppendHead(nil, serve.KindSample, len(hdr), int(tc.plen)))
				c.Write(hdr)
				c.Write([]byte("abcd"))
			}()
			cmd := exec.Command(py, "testdata/serve_read.py", "unix://"+sock)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("%v\n%s\nwant it to contain %s", err, out, tc.want)
			}
			if rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss; rss > 512<<10 {
				t.Errorf("the client grew to %d KiB", rss)
			}
		})
	}
}
