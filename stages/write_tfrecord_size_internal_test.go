package stages

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
	"github.com/piperun/piperun/tfrecord"
)

// TestWriteTFRecordRefusesBeforeMarshalling: an Example over a protocol
// buffer's 2 GiB is refused before it is marshalled (its copy took 23 s and
// 4.2 GB to be refused by the writer), and the run's output is
// not committed. The 2 GiB tensor is never written to, so the test holds
// little of it in memory.
func TestWriteTFRecordRefusesBeforeMarshalling(t *testing.T) {
	dir := t.TempDir()
	env := &Env{Spec: &spec.Spec{Name: "t", Dir: dir}, Stage: &spec.Stage{Name: "out"}, Log: zap.NewNop()}
	sk, err := buildWriteTFRecord(env, &WriteTFRecordConfig{Path: "out.tfrecord", Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := sk.(*tfrecordSink)
	big := tensor.New(tensor.Uint8, tfrecord.DefaultMaxRecordSize)
	err = s.Write(context.Background(), &sample.Sample{Fields: map[string]any{"x": big}})
	// The tensor's 2^31-1 bytes in a bytes_list (+6: tag, 5-byte length),
	// a Feature (+6), a map entry with key "x" (+3, +6), the features
	// (+6) and the Example (+6): 33 bytes of framing.
	const want = "write_tfrecord: an Example of 2147483680 bytes is over the 2147483647 a protocol buffer (a tf.train.Example) may hold, so neither TensorFlow nor piperun could read it back: record too large"
	if err == nil || err.Error() != want || !errors.Is(err, tfrecord.ErrRecordTooLarge) {
		t.Fatalf("Write: %v\nwant %s", err, want)
	}
	// A float32 tensor over the limit is refused before it is copied into
	// a float list: the message gives the least it could take.
	floats := tensor.New(tensor.Float32, 1<<29+1)
	err = s.Write(context.Background(), &sample.Sample{Fields: map[string]any{"x": floats}})
	const wantFloats = "write_tfrecord: an Example of at least 2147483652 bytes is over"
	if err == nil || !errors.Is(err, tfrecord.ErrRecordTooLarge) || !strings.HasPrefix(err.Error(), wantFloats) {
		t.Fatalf("Write of a float32 tensor: %v\nwant %s…", err, wantFloats)
	}
	if err := s.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.tfrecord")); !os.IsNotExist(err) {
		t.Errorf("output after an aborted run: %v", err)
	}
}
