// Package fileguard reads files that may change while they are read.
package fileguard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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

// ErrShrank is wrapped by the error of a file that shrank while it was
// read. It is no damage in the data to skip past (on_error: skip): the
// rest of the file is gone, and a run that counted one skip for it lost
// the records after the cut unseen.
var ErrShrank = errors.New("the file shrank while it was read")

type guard struct {
	f          *os.File
	size, read int64
}

func (g *guard) Read(p []byte) (int, error) {
	n, err := g.f.Read(p)
	g.read += int64(n)
	if err == io.EOF && g.read < g.size {
		now := "ended after it had read " + strconv.FormatInt(g.read, 10)
		if fi, serr := g.f.Stat(); serr == nil {
			now = "has " + strconv.FormatInt(fi.Size(), 10) + " now"
		}
		err = fmt.Errorf("%w: it had %d bytes when opened, and %s (rewritten in place by another process?)", ErrShrank, g.size, now)
	}
	return n, err
}
