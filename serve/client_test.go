package serve_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/serve"
)

// serveOne listens on a Unix socket in dir, accepts one trainer and runs
// answer on its connection, after reading its greeting; it returns the
// socket's address and the listener, for the caller to close.
func serveOne(dir string, answer func(c net.Conn)) (string, net.Listener, error) {
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return "", nil, err
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := io.ReadFull(c, make([]byte, len(serve.ClientHello))); err != nil {
			return
		}
		answer(c)
	}()
	return "unix://" + sock, ln, nil
}

// TestDialContextEndsTheWaitForTheHello: the hello can take as long as
// another trainer is served, or for ever where what answers is not
// piperun; a context bounds the wait, and the connection is closed.
func TestDialContextEndsTheWaitForTheHello(t *testing.T) {
	silent := make(chan struct{})
	defer close(silent)
	addr, ln, err := serveOne(t.TempDir(), func(net.Conn) { <-silent })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := serve.DialContext(ctx, addr)
	if c != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, %v; want the context's deadline", c, err)
	}
	want := "read hello from " + addr + ": " + context.DeadlineExceeded.Error()
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
}

// ExampleDialContext reads a serve sink's stream, bounding the wait for
// its hello. The sink here is a stand-in that sends one sample and ends
// the stream; a real one is `piperun apply` with a serve sink listening
// at the address.
func ExampleDialContext() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	addr, ln, err := serveOne(dir, func(c net.Conn) {
		hello, _ := serve.EncodeJSON(serve.KindHello, serve.Hello{Protocol: serve.Protocol, Pipeline: "demo", Epochs: 1})
		c.Write(hello)
		s := sample.New(0, 0, "")
		s.Fields["label"] = int64(7)
		frame, _ := serve.EncodeSample(s)
		frame.WriteTo(c)
		eoe, _ := serve.EncodeJSON(serve.KindEndOfEpoch, serve.EpochHeader{Epoch: 0})
		c.Write(eoe)
		end, _ := serve.EncodeJSON(serve.KindEndOfStream, serve.EndHeader{})
		c.Write(end)
		io.Copy(io.Discard, c) // the acknowledgements, until the trainer leaves
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := serve.DialContext(ctx, addr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("pipeline", c.Hello().Pipeline)
	for {
		s, err := c.Next()
		switch {
		case errors.Is(err, serve.ErrEndOfEpoch):
			fmt.Println("end of epoch", c.Epoch.Epoch)
			continue
		case errors.Is(err, io.EOF):
			fmt.Println("end of stream")
			return
		case err != nil:
			fmt.Println(err)
			return
		}
		fmt.Println("label", s.Fields["label"])
	}
	// Output:
	// pipeline demo
	// label 7
	// end of epoch 0
	// end of stream
}
