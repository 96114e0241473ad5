//go:build unix

package cli_test

import (
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/piperun/piperun/serve"
)

// TestPythonClientTellsWhatAnswered: a client pointed at the wrong
// address is told so, naming it, rather than blaming a run that does not
// exist or waiting for ever: a program that closes without a hello, one
// that answers something else (an HTTP server), one that never answers
// (with a hello_wait), and addresses it cannot use. A new-user test hung
// on the silent one and was told "the run failed or was interrupted" by
// the HTTP server.
func TestPythonClientTellsWhatAnswered(t *testing.T) {
	py := pythonWith(t, "numpy")
	// helloThen answers with a hello of this protocol, then a sample frame
	// of header hdr and payload: what a piperun of another version, or a
	// peer that is none, might send (a PyTorch user saw JSONDecodeError,
	// KeyError: 'float16' and numpy's reshape error, naming nothing).
	helloThen := func(hdr, payload string) func(c net.Conn) {
		return func(c net.Conn) {
			hello, err := serve.EncodeJSON(serve.KindHello, serve.Hello{Protocol: serve.Protocol})
			if err != nil {
				panic(err)
			}
			c.Write(append(append(serve.AppendHead(hello, serve.KindSample, len(hdr), len(payload)), hdr...), payload...))
		}
	}
	for _, tc := range []struct {
		name   string
		answer func(c net.Conn) // nil: no server
		addr   string           // "": the test's socket
		wait   string
		want   map[string]string
	}{
		{"header not json", helloThen("{bad", ""), "", "read",
			map[string]string{"type": "RuntimeError", "error": "SOCK: a frame's header is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)): b'{bad'; is this client the one of the same piperun version?"}},
		{"unknown dtype", helloThen(`{"fields":[{"name":"x","dtype":"float16","offset":0,"nbytes":2,"shape":[1]}]}`, "ab"), "", "read",
			map[string]string{"type": "RuntimeError", "error": "SOCK: a sample frame does not decode (KeyError: 'float16'); is this client the one of the same piperun version?"}},
		{"bytes unlike the shape", helloThen(`{"fields":[{"name":"x","dtype":"uint8","offset":0,"nbytes":2,"shape":[3]}]}`, "ab"), "", "read",
			map[string]string{"type": "RuntimeError", "error": "SOCK: a sample frame does not decode (ValueError: cannot reshape array of size 2 into shape (3,)); is this client the one of the same piperun version?"}},
		{"closes", func(c net.Conn) {}, "", "none",
			map[string]string{"type": "ConnectionError", "error": "the connection to SOCK ended before piperun's hello: the run ended or failed before it served this trainer, or SOCK is not a piperun serve sink"}},
		{"http", func(c net.Conn) {
			c.Write([]byte("HTTP/1.0 400 Bad request\r\nServer: x\r\n\r\n"))
		}, "", "none",
			map[string]string{"type": "ConnectionError", "error": "SOCK is not a piperun serve sink: it answered b'HTTP/1.0 400 Bad request\\r\\nServer: x\\r\\n\\r\\n'"}},
		{"silent", func(c net.Conn) { time.Sleep(5 * time.Second) }, "", "0.5",
			map[string]string{"type": "TimeoutError", "error": "no hello from SOCK in 0.5 s (hello_wait): piperun is still preparing its first sample, or serving another trainer, or SOCK is not a piperun serve sink"}},
		// A few bytes, and then silence: the wait for the rest of the
		// hello is bounded too (a re-test hung on "OK\n").
		{"short", func(c net.Conn) { c.Write([]byte("OK\n")); time.Sleep(5 * time.Second) }, "", "0.5",
			map[string]string{"type": "TimeoutError", "error": "no hello from SOCK in 0.5 s (hello_wait): piperun is still preparing its first sample, or serving another trainer, or SOCK is not a piperun serve sink"}},
		{"no port", nil, "tcp://127.0.0.1", "none",
			map[string]string{"type": "ValueError", "error": "'tcp://127.0.0.1': want tcp://host:port, with a port number from 0 to 65535"}},
		{"bad port", nil, "tcp://localhost:notaport", "none",
			map[string]string{"type": "ValueError", "error": "'tcp://localhost:notaport': want tcp://host:port, with a port number from 0 to 65535"}},
		{"port too big", nil, "tcp://127.0.0.1:70000", "none",
			map[string]string{"type": "ValueError", "error": "'tcp://127.0.0.1:70000': want tcp://host:port, with a port number from 0 to 65535"}},
		{"no path", nil, "unix://", "none",
			map[string]string{"type": "ValueError", "error": "'unix://': want unix:///path/to.sock, with a path"}},
		{"no host", nil, "tcp://nosuchhost.invalid:5000", "none",
			map[string]string{"type": "ConnectionError", "error": "tcp://nosuchhost.invalid:5000: cannot find host 'nosuchhost.invalid'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.addr
			if tc.answer != nil {
				addr = fakeSink(t, tc.answer)
			}
			args := []string{"testdata/serve_connect.py", addr, tc.wait}
			if tc.wait == "read" {
				args = []string{"testdata/serve_connect.py", addr, "none", "read"}
			}
			out, err := exec.Command(py, args...).Output()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var got map[string]string
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			for k, v := range tc.want {
				want := strings.ReplaceAll(v, "SOCK", addr)
				if got[k] != want {
					t.Errorf("%s:\n got %q\nwant %q", k, got[k], want)
				}
			}
		})
	}
}

// fakeSink listens on a Unix socket in a new folder, accepts one trainer,
// reads its greeting and runs answer on the connection, standing in for a
// serve sink (or for what else a trainer may be pointed at); it returns
// the address.
func fakeSink(t *testing.T, answer func(c net.Conn)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := io.ReadFull(c, make([]byte, len(serve.ClientHello))); err == nil {
			answer(c)
		}
	}()
	return "unix://" + sock
}
