package tfrecord_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/piperun/piperun/tfrecord"
)

func ExampleWriter() {
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.None)
	if err := w.Write([]byte("foo")); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	fmt.Printf("% x\n", buf.Bytes())
	// Output:
	// 03 00 00 00 00 00 00 00 b0 99 49 0e 66 6f 6f 61 8a be fe
}

func ExampleReader() {
	var buf bytes.Buffer
	w := tfrecord.NewWriter(&buf, tfrecord.Gzip)
	for _, s := range []string{"alpha", "beta"} {
		if err := w.Write([]byte(s)); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}

	data := buf.Bytes()
	r, err := tfrecord.NewReader(bytes.NewReader(data), tfrecord.Detect("train.tfrecord.gz", data), "train.tfrecord.gz")
	if err != nil {
		panic(err)
	}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var corrupt *tfrecord.CorruptError
		if errors.As(err, &corrupt) {
			fmt.Println("bad record", corrupt.Record)
			break
		}
		fmt.Printf("record %d: %s\n", r.Index()-1, rec)
	}
	// Output:
	// record 0: alpha
	// record 1: beta
}
