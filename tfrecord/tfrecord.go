// Package tfrecord reads and writes the TFRecord container format used by
// TensorFlow: a sequence of length-prefixed records, each guarded by masked
// CRC-32C checksums, optionally wrapped in a gzip or zlib stream.
//
// Every record on the wire (after decompression) is
//
//	uint64 length      (little endian)
//	uint32 masked_crc32c(length bytes)
//	byte   data[length]
//	uint32 masked_crc32c(data)
package tfrecord

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/piperun/piperun/internal/fileguard"
)

const (
	headerSize = 12 // uint64 length + uint32 masked length crc
	footerSize = 4  // uint32 masked data crc

	// bufferSize is what a Reader buffers on each side of a decompressor.
	// Records larger than it are read straight into their own buffer, so
	// a larger one saves only system calls for small records, and every
	// file an interleave holds open has one or two (BenchmarkReadFile: no
	// faster at 256 KiB).
	bufferSize = 64 << 10

	// allocChunk bounds how much a Reader allocates ahead of the bytes it has
	// actually received, so a truncated file claiming a huge record fails
	// before the whole claimed length is allocated.
	allocChunk = 16 << 20

	maskDelta = 0xa282ead8

	// maxScanLength bounds a length the resync scan will try, so that the
	// frame size it computes cannot overflow an int whatever
	// SetMaxRecordSize allowed.
	maxScanLength = 1<<62 - headerSize - footerSize
)

// DefaultMaxRecordSize is the largest record a Reader accepts unless told
// otherwise, and the largest a Writer writes: the most a protocol buffer
// (a tf.train.Example) may hold, so what TensorFlow can parse piperun reads
// back. A corrupt length field that still passes its CRC (or a hostile
// file) costs no more than the bytes that are there: records are read in
// chunks of allocChunk.
const DefaultMaxRecordSize = 1<<31 - 1

// castagnoli is shared by all readers and writers; the standard library
// uses SSE4.2 / ARM64 CRC instructions for this polynomial when available.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli) checksum of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Mask returns the masked form of a CRC that TFRecord stores. TensorFlow masks
// CRCs because computing the CRC of data that itself contains embedded CRCs
// is otherwise prone to degenerate results.
func Mask(c uint32) uint32 { return ((c >> 15) | (c << 17)) + maskDelta }

// Unmask reverses Mask.
func Unmask(c uint32) uint32 {
	r := c - maskDelta
	return (r >> 17) | (r << 15)
}

// MaskedCRC returns Mask(CRC32C(b)), the checksum TFRecord stores for b.
func MaskedCRC(b []byte) uint32 { return Mask(CRC32C(b)) }

// Compression is the stream-level compression wrapped around the records.
type Compression int

// The compression types TensorFlow's TFRecordDataset understands.
const (
	None Compression = iota
	Gzip
	Zlib
)

// String returns the lowercase name used in specs.
func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Zlib:
		return "zlib"
	}
	return fmt.Sprintf("compression(%d)", int(c))
}

// ParseCompression parses a spec value: auto, none, gzip or zlib (case
// insensitive; the empty string means auto). For auto it returns None and
// auto=true, and the caller should use Detect or Open per file.
func ParseCompression(s string) (c Compression, auto bool, err error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return None, true, nil
	case "none":
		return None, false, nil
	case "gzip":
		return Gzip, false, nil
	case "zlib":
		return Zlib, false, nil
	}
	return None, false, fmt.Errorf("tfrecord: unknown compression %q (want auto, none, gzip or zlib)", s)
}

// ValidHeader reports whether head starts with a well-formed TFRecord header,
// that is an 8-byte length followed by its matching masked CRC.
func ValidHeader(head []byte) bool {
	if len(head) < headerSize {
		return false
	}
	return MaskedCRC(head[:8]) == binary.LittleEndian.Uint32(head[8:12])
}

// Detect guesses the compression of a file from its first bytes and its name.
// head should hold at least the first 12 bytes when the file has them. The
// content wins over the extension: a valid TFRecord header means None; gzip
// magic means Gzip; a valid zlib header means Zlib. The header is checked
// first because its little-endian length can look like either magic (a
// first record of 35615 bytes starts 1f 8b, one of 40056 bytes 78 9c),
// while a compressed stream passes the header's CRC by chance once in 2^32.
// Only when the content is inconclusive do the extensions .gz/.gzip (Gzip)
// and .zz/.zlib (Zlib) decide; otherwise the result is None.
func Detect(path string, head []byte) Compression {
	if ValidHeader(head) {
		return None
	}
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return Gzip
	}
	if len(head) >= 2 {
		cmf, flg := head[0], head[1]
		if cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0 {
			return Zlib
		}
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".gz", ".gzip":
		return Gzip
	case ".zz", ".zlib":
		return Zlib
	}
	return None
}

// LooksLike says, as a parenthesis to add to an error, which compression
// the first bytes of a file point to when it is not the one it was read
// with (declared), or "" when they point nowhere else.
func LooksLike(head []byte, declared Compression) string {
	if len(head) < 2 {
		return ""
	}
	got := Detect("", head)
	if got == declared || (got == None && !ValidHeader(head)) {
		return ""
	}
	what := map[Compression]string{None: "an uncompressed TFRecord", Gzip: "a gzip file", Zlib: "a zlib stream"}[got]
	return fmt.Sprintf(" (it starts like %s: read it as %s, or with auto, which detects it)", what, got)
}

// CorruptError reports a record that cannot be read: a bad checksum, a
// truncated frame, an oversized length or a damaged compressed stream. In a
// CRC mismatch reason, "got" is the masked CRC computed from the bytes read
// and "want" the one stored in the file.
type CorruptError struct {
	File   string // name given to NewReader; may be empty
	Record int    // index of the record being read, from 0
	Offset int64  // offset of its header in the decompressed stream
	Reason string
	Err    error // underlying cause when there is one (io.ErrUnexpectedEOF for truncation)
	// DataOnly says the frame was read whole and only its payload fails
	// its checksum: the framing is intact, and the next call to Next
	// reads the record after it.
	DataOnly bool
	// Skipped is set only by a reader with resynchronisation on
	// (SetResync), after a header failed its length check: the number of
	// bytes from Offset that it passed over, the bad header included.
	// When Resumed, a whole valid record starts at Offset+Skipped and the
	// next call to Next returns it; otherwise no valid record followed,
	// Offset+Skipped is the end of the stream and Next returns io.EOF.
	// A scan that gives up (see SetResync) leaves Skipped at 0: its
	// error ends the stream.
	Skipped int64
	Resumed bool
	// Decompressed says the file is compressed, so Offset counts bytes of
	// what it decompresses to, not of the file.
	Decompressed bool
}

// ReadsOn reports whether the reader got past the damage, so the next call
// to Next reads on (the next record, or io.EOF) instead of returning this
// error again: a damaged payload in an intact frame, or a bad header the
// reader resynchronised after.
func (e *CorruptError) ReadsOn() bool { return e.DataOnly || e.Skipped > 0 }

// Error formats the error as "tfrecord: FILE: record N at byte offset X:
// REASON", the offset followed by "of the decompressed stream" where the
// file is compressed.
func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString("tfrecord: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "record %d at byte offset %d", e.Record, e.Offset)
	if e.Decompressed {
		b.WriteString(" of the decompressed stream")
	}
	fmt.Fprintf(&b, ": %s", e.Reason)
	return b.String()
}

// Unwrap returns the underlying cause, so errors.Is(err, io.ErrUnexpectedEOF)
// identifies truncation.
func (e *CorruptError) Unwrap() error { return e.Err }

// Reader reads records from a TFRecord stream. It is not safe for concurrent
// use.
type Reader struct {
	br      *bufio.Reader
	bufSize int // the size of the buffers the reader makes (br's, unless the caller's was larger)
	name    string
	comp    Compression
	off     int64
	idx     int
	maxSize uint64
	err     error // sticky: once framing is lost nothing after it can be trusted
	hdr     [headerSize]byte
	resync  bool
	cut     *cutWatch // the decompressor's side; nil when uncompressed
	// back holds the bytes that a resynchronising scan read into a window
	// of its own (for a candidate record larger than br's buffer) past
	// the record it found, in front of the original source; it exists
	// only after such a scan, so the reading of an intact file never goes
	// through it.
	back *backReader
	// scanWork counts the payload bytes that resynchronising scans have
	// checksummed, against the budget (withinBudget).
	scanWork uint64
}

// OpenBytes is about what a Reader opened with compression c holds beyond
// the records it returns: its buffer and, compressed, the decompressor's
// state and a second buffer (TestOpenBytesCoverAReader measures it). An
// interleave counts it for each file it holds open.
func OpenBytes(c Compression) int64 {
	if c == None {
		return bufferSize + 2<<10
	}
	return 2*bufferSize + 48<<10
}

// NewReader returns a Reader for the records in r, decompressing with c.
// name is used only in error messages (usually the file path). For Gzip and
// Zlib the compressed header is read immediately, so a damaged header fails
// here.
func NewReader(r io.Reader, c Compression, name string) (*Reader, error) {
	return newReaderSize(r, c, name, bufferSize)
}

// newReaderSize is NewReader with a buffer of size bytes (at least 16, as
// bufio allows); tests use a small one to exercise the resync scan's path
// for records larger than the buffer.
func newReaderSize(r io.Reader, c Compression, name string, size int) (*Reader, error) {
	rd := &Reader{name: name, comp: c, maxSize: DefaultMaxRecordSize, bufSize: max(size, 16)}
	switch c {
	case None:
		rd.br = bufio.NewReaderSize(r, rd.bufSize)
		return rd, nil
	case Gzip, Zlib:
	default:
		return nil, fmt.Errorf("tfrecord: %s: unknown compression %d", name, int(c))
	}
	// flate reads byte by byte through io.ByteReader, so buffer the
	// compressed side too unless the caller already did (in a reader that
	// can be peeked at, as the first bytes and gzipStream are).
	var src flate.Reader
	if fr, ok := r.(*bufio.Reader); ok {
		src = fr
	} else {
		src = bufio.NewReaderSize(r, bufferSize)
	}
	var (
		zr  io.ReadCloser
		err error
	)
	// The first bytes, kept to say what the file looks like if the
	// compression's header does not parse: a wrong compression setting is
	// a likelier cause than a damaged file.
	var head []byte
	if p, ok := src.(interface{ Peek(int) ([]byte, error) }); ok {
		head, _ = p.Peek(headerSize)
		head = bytes.Clone(head)
	}
	if c == Gzip {
		var gz *gzip.Reader
		if gz, err = gzip.NewReader(src); err == nil {
			zr = newGzipStream(gz, src)
		}
	} else {
		zr, err = zlib.NewReader(src)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, &CorruptError{File: name, Reason: fmt.Sprintf("%s header: %v%s", c, err, LooksLike(head, c)), Err: err}
	}
	rd.cut = &cutWatch{r: zr}
	rd.br = bufio.NewReaderSize(rd.cut, rd.bufSize)
	return rd, nil
}

// errTrailing is the error of bytes after a gzip stream's last member
// that are no gzip.
var errTrailing = errors.New("bytes after the end of the gzip stream are not gzip (trailing garbage)")

// gzipStream reads a gzip stream member by member, to tell bytes after its
// last member that are no gzip from a member cut short: Go's multistream
// reader took 8 such bytes for a cut stream, and 16 zeros for an invalid
// header (found by a tf.data user's test). Where src cannot be peeked at,
// it reads as Go's reader does.
type gzipStream struct {
	zr   *gzip.Reader
	src  flate.Reader
	peek func(int) ([]byte, error)
	err  error
}

func newGzipStream(zr *gzip.Reader, src flate.Reader) io.ReadCloser {
	p, ok := src.(interface{ Peek(int) ([]byte, error) })
	if !ok {
		return zr
	}
	zr.Multistream(false)
	return &gzipStream{zr: zr, src: src, peek: p.Peek}
}

func (g *gzipStream) Read(p []byte) (int, error) {
	for g.err == nil {
		n, err := g.zr.Read(p)
		if err != io.EOF {
			return n, err
		}
		// The end of a member: the next one, the end of the file, or
		// bytes that are no gzip.
		switch head, _ := g.peek(2); {
		case len(head) == 0:
			g.err = io.EOF
		case head[0] == 0x1f && (len(head) == 1 || head[1] == 0x8b):
			if rerr := g.zr.Reset(g.src); rerr != nil {
				if rerr == io.EOF {
					rerr = io.ErrUnexpectedEOF
				}
				g.err = rerr
			} else {
				g.zr.Multistream(false)
			}
		default:
			g.err = errTrailing
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, g.err
}

func (g *gzipStream) Close() error { return g.zr.Close() }

// cutWatch notes whether a decompressor said its stream was cut short
// (io.ErrUnexpectedEOF): the file then ended inside the compressed stream,
// where a stream that ends whole in the middle of a frame is the
// records' own truncation.
type cutWatch struct {
	r   io.Reader
	cut bool
}

func (c *cutWatch) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.ErrUnexpectedEOF {
		c.cut = true
	}
	return n, err
}

// SetMaxRecordSize changes the largest record length the reader accepts
// (DefaultMaxRecordSize unless changed). Longer records are reported as
// corrupt before any memory is allocated for them.
func (r *Reader) SetMaxRecordSize(n int64) {
	if n < 0 {
		n = 0
	}
	r.maxSize = uint64(n)
}

// SetResync turns resynchronisation on or off; it is off unless set. Off, a
// header that fails its length check ends the stream, as Next has no
// trustworthy length to read on by. On, the reader instead scans forward
// from the byte after the bad header's start for the first offset holding a
// whole valid record (a length that passes its checksum and fits in the
// rest of the stream, and data that passes its own), and reports the
// damaged region as one CorruptError with Skipped set (see ReadsOn). The
// scan reads the decompressed stream, so it works the same for gzip and
// zlib files; a damaged compressed stream still ends the stream. It costs
// nothing until a header fails, and is meant for on_error: skip, where
// losing the rest of a file to one bad header would be silent data loss.
//
// Checking a candidate's data costs a checksum over the length its header
// claims, so a crafted stream of headers that pass their check and claim
// the rest of the stream would make the scan's work grow with the square
// of its length. The scans of one reader therefore checksum, all together,
// at most 8 bytes per byte of the stream before the candidate being
// checked, plus the maximum record size (so that a single record of any
// allowed size can be checked even at the start of the stream). A candidate
// past that budget makes the scan give up with an error that ends the
// stream (not ReadsOn).
func (r *Reader) SetResync(on bool) { r.resync = on }

// Offset returns the offset, in the decompressed stream, of the next record's
// header; after io.EOF it is the stream length.
func (r *Reader) Offset() int64 { return r.off }

// Index returns the index of the next record, which is also the number of
// records returned so far.
func (r *Reader) Index() int { return r.idx }

// Next returns the next record in a freshly allocated slice that the caller
// may keep. It returns io.EOF after the last record. Damage is reported as a
// *CorruptError; other read failures are wrapped. A record whose payload
// alone fails its checksum (CorruptError.DataOnly) is skipped over: the
// next call reads on, as it does after a bad header when resynchronising
// (SetResync). After any other failure Next returns the same error
// forever, because a frame that cannot be read leaves no way to find the
// next one.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.next()
	if err != nil {
		if ce := (*CorruptError)(nil); errors.As(err, &ce) && ce.ReadsOn() {
			return nil, err
		}
		r.err = err
		return nil, err
	}
	r.off += headerSize + int64(len(rec)) + footerSize
	r.idx++
	return rec, nil
}

func (r *Reader) next() ([]byte, error) {
	// The header is peeked, and consumed only once its length checks
	// out, so that a resynchronising scan finds the bytes after its first
	// still in the buffer.
	h, err := r.br.Peek(headerSize)
	if len(h) < headerSize {
		if len(h) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		what := headerMissing
		if len(h) > 0 {
			what = fmt.Sprintf("header has %d of %d bytes", len(h), headerSize)
		}
		return nil, r.readErr(err, what)
	}
	length := binary.LittleEndian.Uint64(h[:8])
	if got, want := MaskedCRC(h[:8]), binary.LittleEndian.Uint32(h[8:]); got != want {
		copy(r.hdr[:], h)
		reason := fmt.Sprintf("length crc mismatch (got 0x%08x, want 0x%08x)", got, want)
		var hint string
		if r.idx == 0 && r.off == 0 {
			// The very first header: more likely not a TFRecord file (or
			// a compressed one read as plain) than a damaged one.
			hint = ": not a TFRecord file, or a compressed one read as uncompressed"
			if r.comp != None {
				hint = fmt.Sprintf(": what the %s stream holds is not a TFRecord file", r.comp)
			}
			if like := LooksLike(r.hdr[:], None); like != "" {
				hint += like
			} else if looksLikeText(r.hdr[:]) {
				hint += " (it starts with text: a JSON lines or CSV file?)"
			}
		}
		if r.resync {
			return nil, r.resynchronise(reason, hint)
		}
		return nil, r.corrupt(reason+hint, nil)
	}
	r.br.Discard(headerSize)
	if length > r.maxSize {
		return nil, r.corrupt(fmt.Sprintf("record length %d exceeds the maximum of %d bytes", length, r.maxSize), nil)
	}
	need := int(length) + footerSize
	buf, err := r.readFull(need)
	if err != nil {
		return nil, r.readErr(err, fmt.Sprintf("record of length %d needs %d bytes (payload and data crc) after the header, got %d", length, need, len(buf)))
	}
	data := buf[:length:length]
	if got, want := MaskedCRC(data), binary.LittleEndian.Uint32(buf[length:]); got != want {
		ce := r.corrupt(fmt.Sprintf("data crc mismatch (got 0x%08x, want 0x%08x)", got, want), nil)
		ce.DataOnly = true
		r.off += headerSize + int64(length) + footerSize
		r.idx++
		return nil, ce
	}
	return data, nil
}

// resynchronise scans for the first valid record after the header at r.off,
// which failed its length check for reason, and returns the error that
// reports what it found. hint, for the first header of the stream, says
// what else the file may be; it is dropped when a valid record follows.
// The bad header is the next thing in r.br, not yet consumed.
//
// A candidate offset needs a length that passes its masked CRC, is within
// the maximum record size and fits in the rest of the stream, and data that
// passes its CRC too: in a long scan the 32-bit length check alone passes
// by chance about once per 4 GiB, and a false match near the end would read
// garbage as a record. The data check is bounded by the budget that
// SetResync describes (withinBudget).
//
// The scan looks at the candidates where they lie in r.br's buffer,
// copying nothing, and moves the buffer on as it goes; it stops at the
// first valid record, which Next then reads from there. Only from a
// candidate larger than the buffer on does it go on in a window of its own
// (scanWindow).
func (r *Reader) resynchronise(reason, hint string) error {
	bad, first := r.off, r.idx == 0 && r.off == 0
	what := "bytes"
	if r.comp != None {
		what = "decompressed bytes"
	}
	var (
		base = bad // the stream offset of r.br's next byte
		q    = 1   // the candidate's offset from base
		buf  []byte
		end  int64 = -1 // the stream's length, once known
		rerr error      // the read error that ends the stream, if one does
	)
	size := r.br.Size()
	// peek makes buf hold r.br's buffered bytes, at least n (no more than
	// size) when the stream has them, and reports whether it does.
	peek := func(n int) bool {
		if n <= len(buf) {
			return true
		}
		if end >= 0 && base+int64(n) > end {
			return false
		}
		b, err := r.br.Peek(n)
		if len(b) < n {
			// A read error ends the stream as EOF does, but the bytes
			// before it are still scanned: a gzip file cut short yields
			// its records up to the cut, the resync's included.
			end = base + int64(len(b))
			if err != io.EOF {
				rerr = err
			}
		}
		buf, _ = r.br.Peek(r.br.Buffered())
		return len(b) >= n
	}
	// discard drops the bytes before the candidate, moving base to it.
	discard := func() {
		r.br.Discard(q)
		base += int64(q)
		buf = buf[q:]
		q = 0
	}
	for {
		if q+headerSize > len(buf) {
			if q+headerSize > size {
				discard()
			}
			if !peek(q + headerSize) {
				break
			}
		}
		h := buf[q : q+headerSize]
		n := binary.LittleEndian.Uint64(h)
		// The cheap bound first: on random bytes it rejects almost every
		// offset before the CRC is computed.
		if n > r.maxSize || n > maxScanLength || MaskedCRC(h[:8]) != binary.LittleEndian.Uint32(h[8:]) {
			q++
			continue
		}
		at, frame := base+int64(q), headerSize+int(n)+footerSize
		if end >= 0 && at+int64(frame) > end {
			q++
			continue // too long for what is left: not a record
		}
		if q+frame > size {
			discard()
		}
		if frame > size {
			// Too large for the buffer: go on in a window of the scan's
			// own, from this candidate, the next byte of r.br.
			return r.scanWindow(reason, hint, first, base, what)
		}
		if !peek(q + frame) {
			q++
			continue // too long for what is left
		}
		if !r.withinBudget(at, n) {
			return r.giveUp(reason+hint, at-bad, what)
		}
		r.scanWork += n
		if MaskedCRC(buf[q+headerSize:q+frame-footerSize]) != binary.LittleEndian.Uint32(buf[q+frame-footerSize:q+frame]) {
			q++
			continue
		}
		r.br.Discard(q)
		return r.resumed(reason, first, at, what)
	}
	return r.foundNothing(reason+hint, end, rerr, what)
}

// scanWindow goes on with resynchronise's scan from stream offset start,
// where r.br's next byte is, once a candidate there is larger than r.br's
// buffer. It reads the stream into a window of its own, which grows to
// hold the longest candidate, checks each candidate where it lies in the
// window, and at the end puts back what it read from the record it found
// on (pushBack): a copy of about what the scan made it read.
func (r *Reader) scanWindow(reason, hint string, first bool, start int64, what string) error {
	bad := r.off
	win := make([]byte, 0, 64<<10) // the stream from start on; the scan is at win[p]
	p := 0
	var (
		eof  bool
		rerr error
	)
	// fill reads until win holds n bytes from p, or the stream ends. It
	// drops the scanned prefix when win is full, so memory follows the
	// longest candidate record, not the length of the scan.
	fill := func(n int) bool {
		for len(win)-p < n && !eof {
			if len(win) == cap(win) {
				if p >= cap(win)/2 {
					win = win[:copy(win, win[p:])]
				} else {
					// Doubling only when full keeps the allocation within
					// twice the bytes actually received, whatever a
					// candidate's length claims.
					nw := make([]byte, len(win)-p, 2*cap(win))
					copy(nw, win[p:])
					win = nw
				}
				start += int64(p)
				p = 0
			}
			m, err := r.br.Read(win[len(win):cap(win)])
			win = win[:len(win)+m]
			if err != nil {
				eof = true
				if err != io.EOF {
					rerr = err
				}
			}
		}
		return len(win)-p >= n
	}
	for ; fill(headerSize); p++ {
		h := win[p : p+headerSize]
		n := binary.LittleEndian.Uint64(h)
		if n > r.maxSize || n > maxScanLength || MaskedCRC(h[:8]) != binary.LittleEndian.Uint32(h[8:]) {
			continue
		}
		frame := headerSize + int(n) + footerSize
		if !fill(frame) {
			continue // too long for what is left: not a record
		}
		at := start + int64(p)
		if !r.withinBudget(at, n) {
			return r.giveUp(reason+hint, at-bad, what)
		}
		r.scanWork += n
		if MaskedCRC(win[p+headerSize:p+frame-footerSize]) != binary.LittleEndian.Uint32(win[p+frame-footerSize:p+frame]) {
			continue
		}
		r.pushBack(win[p:], rerr)
		return r.resumed(reason, first, at, what)
	}
	return r.foundNothing(reason+hint, start+int64(len(win)), rerr, what)
}

// foundNothing is the error of a resynchronising scan that found no valid
// record before the end of the stream, at stream offset end, or before the
// read error rerr.
func (r *Reader) foundNothing(reason string, end int64, rerr error, what string) error {
	if rerr != nil {
		// A read failure (a damaged compressed stream) is no damage the
		// scan can step over: this error ends the stream.
		err := r.readErr(rerr, streamEnds)
		if e, ok := err.(*CorruptError); ok {
			e.Reason = reason + "; then, looking for the next valid record: " + e.Reason
			return e
		}
		return fmt.Errorf("%w; then, looking for the next valid record: %w", r.corrupt(reason, nil), err)
	}
	ce := r.corrupt(reason, nil)
	ce.Skipped = end - r.off
	ce.Reason += fmt.Sprintf("; no valid record follows in the remaining %d %s from byte offset %d", ce.Skipped, what, r.off)
	r.off = end
	r.idx++
	// Whatever r.br still holds is less than a header, and none of it is
	// a record: the stream ends here.
	r.err = io.EOF
	return ce
}

// resumed completes the error of a resynchronising scan (see
// resynchronise) that found a valid record at stream offset at, and moves
// the reader on to it.
func (r *Reader) resumed(reason string, first bool, at int64, what string) *CorruptError {
	ce := r.corrupt(reason, nil)
	ce.Skipped, ce.Resumed = at-r.off, true
	if first {
		// A valid file behind a prefix is no other kind of file: say
		// what the prefix is instead of guessing at one.
		where := "the file"
		if r.comp != None {
			where = "the decompressed stream"
			what = "bytes"
		}
		ce.Reason += fmt.Sprintf(": %s starts with %d %s that are not a TFRecord record", where, ce.Skipped, what)
	}
	ce.Reason += fmt.Sprintf("; skipped %d bytes to the next valid record, at byte offset %d, and read on from there as record %d (numbering the skipped bytes as one record)", ce.Skipped, at, r.idx+1)
	r.off = at
	r.idx++
	return ce
}

// giveUp is the error of a resynchronising scan that ran out of budget
// (withinBudget) after scanning the given number of bytes. It ends the
// stream.
func (r *Reader) giveUp(reason string, scanned int64, what string) *CorruptError {
	return r.corrupt(reason+fmt.Sprintf("; gave up looking for the next valid record after scanning %d %s from byte offset %d, as the headers there claim more data to check than the scan allows (a crafted file?): the rest of the file was not read", scanned, what, r.off), nil)
}

// scanBudgetPerByte is how many bytes of candidates' data the scans of a
// resynchronising reader may checksum per byte of the stream before the
// candidate; see SetResync. A valid record is checked once and a damaged
// one about once by a scan that crosses it, so 8 leaves a wide margin for
// real damage, while the budget bounds a crafted stream's cost to a few
// times that of reading it: CRC-32C runs at several GB/s.
const scanBudgetPerByte = 8

// withinBudget reports whether a scan may checksum the n data bytes of the
// candidate at stream offset at: whether all the scans' checks, this one
// included, stay within scanBudgetPerByte bytes per byte of the stream
// before it, plus the maximum record size.
func (r *Reader) withinBudget(at int64, n uint64) bool {
	budget := uint64(at) * scanBudgetPerByte
	if budget/scanBudgetPerByte != uint64(at) || budget+r.maxSize < budget {
		return true // beyond any stream's length
	}
	budget += r.maxSize
	return r.scanWork <= budget && n <= budget-r.scanWork
}

// pushBack puts b, which the reader has read, in front of what it has not,
// so that the next header is read from b[0]. err, when not nil, is the read
// error that came after b, returned once b is read.
func (r *Reader) pushBack(b []byte, err error) {
	if r.back == nil {
		// The bytes still buffered in r.br follow b, so r.br becomes the
		// source behind it.
		r.back = &backReader{pre: b, src: r.br, err: err}
		r.br = bufio.NewReaderSize(r.back, r.bufSize)
		return
	}
	if err != nil {
		r.back.err = err
	}
	// A later resync: b was read through r.br, which may hold bytes after
	// it, and in front of those come the pushed-back bytes not yet read.
	// Keeping one backReader keeps every later read one layer deep.
	buffered, _ := r.br.Peek(r.br.Buffered())
	pre := make([]byte, 0, len(b)+len(buffered)+len(r.back.pre))
	r.back.pre = append(append(append(pre, b...), buffered...), r.back.pre...)
	r.br.Reset(r.back)
}

// backReader reads pre, then src; or, when err is set, pre and then err
// for good, as bufio.Reader would have returned it after the bytes read
// ahead of it.
type backReader struct {
	pre []byte
	src io.Reader
	err error
}

func (b *backReader) Read(p []byte) (int, error) {
	if len(b.pre) > 0 {
		n := copy(p, b.pre)
		b.pre = b.pre[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.src.Read(p)
}

// readFull reads exactly n bytes, growing the buffer as data arrives rather
// than trusting n up front.
func (r *Reader) readFull(n int) ([]byte, error) {
	if n <= allocChunk {
		buf := make([]byte, n)
		m, err := io.ReadFull(r.br, buf)
		return buf[:m], err
	}
	buf := make([]byte, 0, allocChunk)
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = append(buf[:cap(buf)], make([]byte, min(cap(buf), n-cap(buf)))...)[:len(buf)]
		}
		end := min(cap(buf), n)
		m, err := io.ReadFull(r.br, buf[len(buf):end])
		buf = buf[:len(buf)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

func (r *Reader) corrupt(reason string, err error) *CorruptError {
	return &CorruptError{File: r.name, Record: r.idx, Offset: r.off, Reason: reason, Err: err, Decompressed: r.comp != None}
}

// readErr classifies a failed read inside a frame: running out of bytes is
// truncation, a damaged compressed stream is corruption, anything else is an
// I/O error passed through with context.
// headerMissing is what readErr is told where not one byte of a record's
// header came, and streamEnds where a resynchronising scan ran out.
var (
	headerMissing = fmt.Sprintf("header has 0 of %d bytes", headerSize)
	streamEnds    = "the stream ends early"
)

func (r *Reader) readErr(err error, what string) error {
	var flateErr flate.CorruptInputError
	switch {
	case (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) && r.cut != nil && r.cut.cut:
		reason := fmt.Sprintf("truncated: the %s stream is cut short (the file ends before it does)", r.comp)
		switch what {
		case headerMissing:
			// The cut may be no more than the trailer: say that no
			// record was lost, where "truncated header" suggested one.
			reason += ": every record before this offset is whole"
		case streamEnds:
		default:
			reason += ": " + what
		}
		return r.corrupt(reason, io.ErrUnexpectedEOF)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return r.corrupt("truncated: "+what, io.ErrUnexpectedEOF)
	case errors.Is(err, errTrailing):
		return r.corrupt(err.Error()+": every record before this offset is whole", err)
	case errors.As(err, &flateErr), errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader),
		errors.Is(err, zlib.ErrChecksum), errors.Is(err, zlib.ErrHeader), errors.Is(err, zlib.ErrDictionary):
		return r.corrupt("decompress: "+err.Error(), err)
	}
	prefix := "tfrecord: "
	if r.name != "" {
		prefix += r.name + ": "
	}
	at := ""
	if r.comp != None {
		at = " of the decompressed stream"
	}
	return fmt.Errorf("%srecord %d at byte offset %d%s: read: %w", prefix, r.idx, r.off, at, err)
}

// Open opens the file at path for reading. With auto set, the compression is
// detected from the file's first bytes and name (see Detect) and c is
// ignored. The returned Closer closes the file.
func Open(path string, c Compression, auto bool) (*Reader, io.Closer, error) {
	return openSize(path, c, auto, bufferSize)
}

// openSize is Open with buffers of size bytes, for the benchmark that
// chose bufferSize.
func openSize(path string, c Compression, auto bool, size int) (*Reader, io.Closer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("tfrecord: %w", err)
	}
	br := bufio.NewReaderSize(fileguard.Reader(f), size)
	if auto {
		head, err := br.Peek(headerSize)
		if err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, nil, fmt.Errorf("tfrecord: %s: %w", path, err)
		}
		c = Detect(path, head)
	}
	r, err := newReaderSize(br, c, path, size)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return r, f, nil
}

// Writer writes records in TFRecord framing, byte-identical to TensorFlow's
// RecordWriter for uncompressed output. It is not safe for concurrent use.
type Writer struct {
	bw     *bufio.Writer
	zw     io.WriteCloser // compressor writing into bw, nil for None
	out    io.Writer      // where records go: zw or bw
	err    error
	closed bool
	hdr    [headerSize]byte
	// maxSize is DefaultMaxRecordSize but in tests.
	maxSize int
}

// ErrRecordTooLarge is wrapped by the error of a Write refused for its
// size.
var ErrRecordTooLarge = errors.New("record too large")

// errClosed is returned by writes after Close.
var errClosed = errors.New("tfrecord: write after close")

// NewWriter returns a Writer that writes records to w, compressed with c
// (an unknown c is treated as None).
func NewWriter(w io.Writer, c Compression) *Writer {
	wr := &Writer{bw: bufio.NewWriterSize(w, bufferSize), maxSize: DefaultMaxRecordSize}
	switch c {
	case Gzip:
		wr.zw = gzip.NewWriter(wr.bw)
	case Zlib:
		wr.zw = zlib.NewWriter(wr.bw)
	}
	wr.out = wr.bw
	if wr.zw != nil {
		wr.out = wr.zw
	}
	return wr
}

// Write appends one record. Errors are sticky, but for a record too large
// (over DefaultMaxRecordSize), which is refused before anything is written.
func (w *Writer) Write(rec []byte) error {
	if w.err != nil {
		return w.err
	}
	if len(rec) > w.maxSize {
		return fmt.Errorf("tfrecord: a record of %d bytes is over the %d a protocol buffer (a tf.train.Example) may hold, so neither TensorFlow nor piperun could read it back: %w", len(rec), w.maxSize, ErrRecordTooLarge)
	}
	binary.LittleEndian.PutUint64(w.hdr[:8], uint64(len(rec)))
	binary.LittleEndian.PutUint32(w.hdr[8:], MaskedCRC(w.hdr[:8]))
	var foot [footerSize]byte
	binary.LittleEndian.PutUint32(foot[:], MaskedCRC(rec))
	for _, b := range [][]byte{w.hdr[:], rec, foot[:]} {
		if _, err := w.out.Write(b); err != nil {
			w.err = fmt.Errorf("tfrecord: write: %w", err)
			return w.err
		}
	}
	return nil
}

// Flush writes buffered records through to the underlying writer. With
// compression, data still inside the compressor's window is flushed as a
// sync block, which costs a little ratio.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if f, ok := w.zw.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			w.err = fmt.Errorf("tfrecord: flush: %w", err)
			return w.err
		}
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("tfrecord: flush: %w", err)
	}
	return w.err
}

// Close finishes the compressed stream and flushes everything to the
// underlying writer, which it does not close. Later writes fail; closing
// again is a no-op.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	if w.err != nil {
		return w.err
	}
	if w.zw != nil {
		if err := w.zw.Close(); err != nil {
			w.err = fmt.Errorf("tfrecord: close: %w", err)
			return w.err
		}
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("tfrecord: close: %w", err)
		return w.err
	}
	w.closed = true
	w.err = errClosed
	return nil
}

// looksLikeText reports whether b is printable ASCII and white space, as
// the start of a JSON lines or CSV file is and a TFRecord's length never
// is (its high bytes are zeros).
func looksLikeText(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}
