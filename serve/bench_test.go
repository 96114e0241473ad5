package serve_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/serve"
	"github.com/piperun/piperun/tensor"
)

// w1Setup listens on a Unix socket and makes W1's batch.
func w1Setup(b *testing.B) (string, net.Listener, *sample.Sample) {
	sock := filepath.Join(b.TempDir(), "b.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	batch := sample.New(0, 0, "")
	batch.BatchSize = 32
	batch.Fields["image"] = tensor.New(tensor.Float32, 32, 224, 224, 3)
	batch.Fields["label"] = tensor.New(tensor.Int64, 32)
	return sock, ln, batch
}

// BenchmarkUnixSocket sends W1's batch (32×224×224×3 float32, 18.4 MiB,
// and 32 int64 labels) as the serve sink does (writev from the tensor's
// buffer) over a Unix socket to a reader decoding it as the Go client
// does; MB/s is what one trainer can take.
func BenchmarkUnixSocket(b *testing.B) {
	sock, ln, batch := w1Setup(b)
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		c, err := net.Dial("unix", sock)
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		r := bufio.NewReaderSize(c, 1<<20)
		for {
			f, err := serve.ReadFrame(r)
			if err != nil {
				done <- nil
				return
			}
			if _, err := serve.DecodeSample(f); err != nil {
				done <- err
				return
			}
		}
	}()
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bufs, err := serve.EncodeSample(batch)
		if err != nil {
			b.Fatal(err)
		}
		k, err := bufs.WriteTo(c)
		if err != nil {
			b.Fatal(err)
		}
		n += k
	}
	c.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n / int64(b.N))
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "batches/s")
}

// BenchmarkPythonClient sends b.N of W1's batches to
// bench/serve_read_rate.py, which reads them with clients/python's client
// into NumPy arrays (with --torch set in PIPERUN_BENCH_TORCH, torch
// tensors); it reports the rate the Python side measured.
func BenchmarkPythonClient(b *testing.B) {
	py := "/usr/bin/python3"
	if exec.Command(py, "-c", "import numpy").Run() != nil {
		b.Skip("no /usr/bin/python3 with numpy")
	}
	sock, ln, batch := w1Setup(b)
	defer ln.Close()
	args := []string{"../bench/serve_read_rate.py", "unix://" + sock}
	if os.Getenv("PIPERUN_BENCH_TORCH") != "" {
		args = append(args, "--torch")
	}
	cmd := exec.Command(py, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	go io.Copy(io.Discard, c) // the client's acknowledgements
	hello, _ := serve.EncodeJSON(serve.KindHello, serve.Hello{Protocol: serve.Protocol})
	end, _ := serve.EncodeJSON(serve.KindEndOfStream, serve.EndHeader{Frames: int64(b.N + 1)})
	if _, err := c.Write(hello); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i <= b.N; i++ { // one more: the reader times from the first
		bufs, err := serve.EncodeSample(batch)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bufs.WriteTo(c); err != nil {
			b.Fatal(err)
		}
	}
	c.Write(end)
	c.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%v\n%s", err, out.String())
	}
	var r struct {
		BatchesPerS float64 `json:"batches_per_s"`
		MBPerS      float64 `json:"mb_per_s"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		b.Fatalf("%v\n%s", err, out.String())
	}
	b.ReportMetric(r.BatchesPerS, "py-batches/s")
	b.ReportMetric(r.MBPerS, "py-MB/s")
}
