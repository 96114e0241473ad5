// Package fileguard reads files that may change while they are read.
package fileguard

import (
	"fmt"
	"io"
	"os"
)

// Reader returns a reader of f that turns its end into an error where f,
// a regular file, had more bytes when Reader was called: a file cut at a
// record or line boundary while read (a shard rewritten in place by
// another job) ended as a clean end of file, and the run succeeded
// without the records past the cut. A file that grows is read to its new
// end, as TensorFlow's readers do. Other files (pipes, devices) are read
// as they are.
func Reader(f *os.File) io.Reader {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return f
	}
	return &guard{f: f, size: fi.Size()}
}

type guard struct {
	f          *os.File
	size, read int64
}

func (g *guard) Read(p []byte) (int, error) {
	n, err := g.f.Read(p)
	g.read += int64(n)
	if err == io.EOF && g.read < g.size {
		err = fmt.Errorf("the file shrank while it was read: it had %d bytes when opened, and ends after %d (rewritten in place by another process?)", g.size, g.read)
	}
	return n, err
}
