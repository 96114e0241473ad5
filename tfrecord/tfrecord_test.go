package tfrecord

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func seq(from, to int) []byte {
	var b []byte
	if from <= to {
		for i := from; i <= to; i++ {
			b = append(b, byte(i))
		}
	} else {
		for i := from; i >= to; i-- {
			b = append(b, byte(i))
		}
	}
	return b
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// iscsiRead is the 48-byte iSCSI read command from RFC 3720 B.4.
const iscsiRead = "01c00000 00000000 00000000 00000000 14000000 00000400 00000014 00000018 28000000 00000000 02000000 00000000"

func TestCRC32C(t *testing.T) {
	iscsi := mustHex(t, iscsiRead)
	if len(iscsi) != 48 {
		t.Fatalf("iscsi vector has %d bytes", len(iscsi))
	}
	tests := []struct {
		name string
		in   []byte
		want uint32
	}{
		{"32 zeros", make([]byte, 32), 0x8a9136aa},
		{"32 0xff", bytes.Repeat([]byte{0xff}, 32), 0x62a8ab43},
		{"0..31", seq(0, 31), 0x46dd794e},
		{"31..0", seq(31, 0), 0x113fdb5c},
		{"iscsi read", iscsi, 0xd9963a56},
		{"iscsi first 41", iscsi[:41], 0xdd1b19be},
		{"iscsi 1..44", iscsi[1:45], 0x4930c4b1},
		{"123456789", []byte("123456789"), 0xe3069283},
		{"empty", nil, 0},
	}
	for _, tt := range tests {
		if got := CRC32C(tt.in); got != tt.want {
			t.Errorf("CRC32C(%s) = 0x%08x, want 0x%08x", tt.name, got, tt.want)
		}
	}
}

func TestCRC32CExtend(t *testing.T) {
	// TensorFlow's Extend(Value("hello "), "world") == Value("hello world"),
	// which the standard library exposes as crc32.Update.
	h := CRC32C([]byte("hello "))
	got := crc32Update(h, []byte("world"))
	if want := CRC32C([]byte("hello world")); got != want {
		t.Errorf("extend = 0x%08x, want 0x%08x", got, want)
	}
}

func TestMask(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want uint32
	}{
		{"32 zeros", make([]byte, 32), 0x0fd7fffa},
		{"32 0xff", bytes.Repeat([]byte{0xff}, 32), 0xf909b029},
		{"foo", []byte("foo"), 0xfebe8a61},
		{"length 3", []byte{3, 0, 0, 0, 0, 0, 0, 0}, 0x0e4999b0},
		{"empty", nil, 0xa282ead8},
	}
	for _, tt := range tests {
		if got := MaskedCRC(tt.in); got != tt.want {
			t.Errorf("MaskedCRC(%s) = 0x%08x, want 0x%08x", tt.name, got, tt.want)
		}
		if got := Mask(CRC32C(tt.in)); got != tt.want {
			t.Errorf("Mask(CRC32C(%s)) = 0x%08x, want 0x%08x", tt.name, got, tt.want)
		}
	}
	for _, c := range []uint32{0, 1, 0xffffffff, 0x8a9136aa, 0xe3069283, 0xa282ead8, 0xdeadbeef} {
		if got := Unmask(Mask(c)); got != c {
			t.Errorf("Unmask(Mask(0x%08x)) = 0x%08x", c, got)
		}
		if Mask(c) == c {
			t.Errorf("Mask(0x%08x) is the identity", c)
		}
	}
}

// Byte-exact streams written by tf.python_io.TFRecordWriter, as quoted by
// Apache Beam's tfrecordio tests.
var beamStreams = []struct {
	name    string
	records []string
	hex     string
	b64     string
}{
	{"foo", []string{"foo"}, "0300000000000000 b099490e 666f6f 618abefe", "AwAAAAAAAACwmUkOZm9vYYq+/g=="},
	{"foo,bar", []string{"foo", "bar"}, "0300000000000000 b099490e 666f6f 618abefe 0300000000000000 b099490e 626172 4600e5c8", ""},
	{"bar,foo", []string{"bar", "foo"}, "", "AwAAAAAAAACwmUkOYmFyRgDlyAMAAAAAAAAAsJlJDmZvb2GKvv4="},
}

func beamBytes(t testing.TB, hexs, b64 string) []byte {
	t.Helper()
	var fromHex, fromB64 []byte
	if hexs != "" {
		fromHex = mustHex(t, hexs)
	}
	if b64 != "" {
		var err error
		if fromB64, err = base64.StdEncoding.DecodeString(b64); err != nil {
			t.Fatal(err)
		}
	}
	if fromHex != nil && fromB64 != nil && !bytes.Equal(fromHex, fromB64) {
		t.Fatalf("hex and base64 forms differ")
	}
	if fromHex != nil {
		return fromHex
	}
	return fromB64
}

func readAll(t testing.TB, r *Reader) ([][]byte, error) {
	t.Helper()
	var recs [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

func writeAll(t testing.TB, c Compression, recs [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, c)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func strs(b [][]byte) []string {
	s := make([]string, len(b))
	for i := range b {
		s[i] = string(b[i])
	}
	return s
}

func compress(t testing.TB, c Compression, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch c {
	case Gzip:
		w = gzip.NewWriter(&buf)
	case Zlib:
		w = zlib.NewWriter(&buf)
	default:
		return b
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestBeamStreams(t *testing.T) {
	for _, tt := range beamStreams {
		want := beamBytes(t, tt.hex, tt.b64)
		recs := make([][]byte, len(tt.records))
		for i, s := range tt.records {
			recs[i] = []byte(s)
		}
		t.Run(tt.name+"/write", func(t *testing.T) {
			if got := writeAll(t, None, recs); !bytes.Equal(got, want) {
				t.Errorf("written\n %x\nwant\n %x", got, want)
			}
		})
		for _, c := range []Compression{None, Zlib, Gzip} {
			t.Run(tt.name+"/read/"+c.String(), func(t *testing.T) {
				stream := compress(t, c, want)
				if got := Detect("x", stream); got != c {
					t.Errorf("Detect = %v, want %v", got, c)
				}
				r, err := NewReader(bytes.NewReader(stream), c, "beam")
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAll(t, r)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(strs(got)) != fmt.Sprint(tt.records) {
					t.Errorf("records = %q, want %q", strs(got), tt.records)
				}
				if r.Offset() != int64(len(want)) || r.Index() != len(tt.records) {
					t.Errorf("Offset, Index = %d, %d; want %d, %d", r.Offset(), r.Index(), len(want), len(tt.records))
				}
			})
		}
	}
}

func TestBeamCorruption(t *testing.T) {
	foo := beamBytes(t, beamStreams[0].hex, "")
	tests := []struct {
		name   string
		byteAt int
		reason string
	}{
		{"length crc", 9, "length crc mismatch (got 0x0e4999b0, want 0x0e499ab0)"},
		{"data crc", 16, "data crc mismatch (got 0xfebe8a61, want 0xfebe8b61)"},
		{"length", 0, "length crc mismatch (got 0x"},
		{"payload", 13, "data crc mismatch (got 0x"},
	}
	for _, tt := range tests {
		for _, c := range []Compression{None, Zlib, Gzip} {
			t.Run(tt.name+"/"+c.String(), func(t *testing.T) {
				b := bytes.Clone(foo)
				b[tt.byteAt]++
				r, err := NewReader(bytes.NewReader(compress(t, c, b)), c, "data/x.tfrecord")
				if err != nil {
					t.Fatal(err)
				}
				rec, err := r.Next()
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("Next = %q, %v; want a CorruptError", rec, err)
				}
				if rec != nil {
					t.Errorf("a corrupt record was returned: %q", rec)
				}
				if ce.File != "data/x.tfrecord" || ce.Record != 0 || ce.Offset != 0 || !strings.HasPrefix(ce.Reason, tt.reason) {
					t.Errorf("error = %+v", ce)
				}
				wantMsg := "tfrecord: data/x.tfrecord: record 0 at byte offset 0: " + tt.reason
				if c != None {
					wantMsg = "tfrecord: data/x.tfrecord: record 0 at byte offset 0 of the decompressed stream: " + tt.reason
				}
				if !strings.HasPrefix(err.Error(), wantMsg) {
					t.Errorf("message %q, want prefix %q", err, wantMsg)
				}
				// A damaged payload leaves the frame readable: the reader
				// goes on to the end of this one-record stream. Damaged
				// framing stops it for good.
				_, err2 := r.Next()
				if ce.DataOnly != strings.HasPrefix(tt.reason, "data crc") {
					t.Errorf("DataOnly = %v for %s", ce.DataOnly, tt.reason)
				}
				if ce.DataOnly && err2 != io.EOF || !ce.DataOnly && err2 != err {
					t.Errorf("second Next = %v (first %v)", err2, err)
				}
			})
		}
	}
}

func TestCorruptSecondRecord(t *testing.T) {
	b := beamBytes(t, beamStreams[1].hex, "")
	b[19+16]++ // data crc of record 1
	r, err := NewReader(bytes.NewReader(b), None, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil || string(rec) != "foo" {
		t.Fatalf("record 0 = %q, %v", rec, err)
	}
	_, err = r.Next()
	const want = "tfrecord: record 1 at byte offset 19: data crc mismatch (got 0xc8e50046, want 0xc8e50146)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	// The framing is intact: the reader reads on past the bad record.
	if _, err := r.Next(); err != io.EOF || r.Index() != 2 {
		t.Errorf("after the bad record: %v at index %d, want io.EOF at 2", err, r.Index())
	}
}

func TestTruncation(t *testing.T) {
	full := beamBytes(t, beamStreams[1].hex, "")
	for cut := 1; cut < len(full); cut++ {
		if cut == 19 {
			continue // a clean record boundary
		}
		for _, c := range []Compression{None, Gzip, Zlib} {
			r, err := NewReader(bytes.NewReader(compress(t, c, full[:cut])), c, "t")
			if err != nil {
				t.Fatal(err)
			}
			recs, err := readAll(t, r)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(ce.Reason, "truncated: ") {
				t.Fatalf("cut %d %v: err = %v, want truncation", cut, c, err)
			}
			wantRec, wantOff := 0, int64(0)
			if cut > 19 {
				wantRec, wantOff = 1, 19
			}
			if len(recs) != wantRec || ce.Record != wantRec || ce.Offset != wantOff {
				t.Errorf("cut %d %v: %d records, error %+v", cut, c, len(recs), ce)
			}
		}
	}
	// A compressed stream cut short (no gzip trailer) is truncation too, even
	// when the cut falls on a record boundary of the decompressed data.
	gz := compress(t, Gzip, full)
	r, err := NewReader(bytes.NewReader(gz[:len(gz)-4]), Gzip, "t.gz")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := readAll(t, r)
	// It says the compressed stream was cut, not that a record header was:
	// every record is whole here (a user test read "truncated: header has
	// 0 of 12 bytes" for a file missing only its gzip trailer).
	const want = "tfrecord: t.gz: record 2 at byte offset 38 of the decompressed stream: truncated: the gzip stream is cut short (the file ends before it does): every record before this offset is whole"
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(recs) != 2 || err.Error() != want {
		t.Errorf("gzip without trailer: %d records, err %v\nwant 2 records and %s", len(recs), err, want)
	}
	// Cut inside a record, the reason says where as well.
	var flushed bytes.Buffer
	zw := zlib.NewWriter(&flushed)
	zw.Write(full[:33])
	zw.Flush() // the first 33 bytes decompress; the stream goes on no further
	r, err = NewReader(bytes.NewReader(flushed.Bytes()), Zlib, "t.zz")
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, r)
	const wantIn = "tfrecord: t.zz: record 1 at byte offset 19 of the decompressed stream: truncated: the zlib stream is cut short (the file ends before it does): record of length 3 needs 7 bytes (payload and data crc) after the header, got 2"
	if err == nil || err.Error() != wantIn {
		t.Errorf("zlib cut in a record: %v\nwant %s", err, wantIn)
	}
}

func TestDamagedCompressedStream(t *testing.T) {
	full := beamBytes(t, beamStreams[1].hex, "")
	gz := compress(t, Gzip, full)
	bad := bytes.Clone(gz)
	bad[len(bad)-5] ^= 0xff // inside the crc32 trailer
	r, err := NewReader(bytes.NewReader(bad), Gzip, "x.gz")
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(t, r)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, gzip.ErrChecksum) {
		t.Errorf("err = %v, want a CorruptError wrapping gzip.ErrChecksum", err)
	}
	if _, err := NewReader(bytes.NewReader([]byte("not gzip")), Gzip, "x.gz"); err == nil {
		t.Error("NewReader accepted a bad gzip header")
	}
	if _, err := NewReader(bytes.NewReader(nil), Zlib, "x.zz"); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("empty zlib stream: err = %v, want unexpected EOF", err)
	}
}

func TestMaxRecordSize(t *testing.T) {
	b := writeAll(t, None, [][]byte{[]byte("0123456789")})
	r, err := NewReader(bytes.NewReader(b), None, "big")
	if err != nil {
		t.Fatal(err)
	}
	r.SetMaxRecordSize(9)
	_, err = r.Next()
	const want = "tfrecord: big: record 0 at byte offset 0: record length 10 exceeds the maximum of 9 bytes"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}

	// A valid header claiming far more than the default cap is refused
	// without allocating it.
	var hdr [12]byte
	hdr[7] = 0x7f
	putCRC(hdr[:])
	r, _ = NewReader(bytes.NewReader(hdr[:]), None, "")
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "exceeds the maximum of 2147483647 bytes") {
		t.Errorf("err = %v", err)
	}

	// A header within the cap but far beyond the data is truncation, read in
	// bounded chunks.
	hdr = [12]byte{}
	hdr[3] = 0x3f // 1056964608 bytes
	putCRC(hdr[:])
	r, _ = NewReader(io.MultiReader(bytes.NewReader(hdr[:]), bytes.NewReader(make([]byte, allocChunk+100))), None, "")
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), fmt.Sprintf("got %d", allocChunk+100)) {
		t.Errorf("err = %v", err)
	}
}

func putCRC(hdr []byte) {
	c := MaskedCRC(hdr[:8])
	hdr[8], hdr[9], hdr[10], hdr[11] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
}

func TestLargeRecordChunked(t *testing.T) {
	// Larger than allocChunk, so the growing read path is used.
	rec := make([]byte, allocChunk*2+12345)
	for i := range rec {
		rec[i] = byte(i * 7)
	}
	b := writeAll(t, None, [][]byte{rec, []byte("tail")})
	r, _ := NewReader(bytes.NewReader(b), None, "")
	got, err := readAll(t, r)
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], rec) || string(got[1]) != "tail" {
		t.Fatalf("read %d records, err %v", len(got), err)
	}
}

func TestRoundTrip(t *testing.T) {
	recs := [][]byte{{}, []byte("a"), bytes.Repeat([]byte("xyz"), 100000), nil, []byte("last")}
	for _, c := range []Compression{None, Gzip, Zlib} {
		t.Run(c.String(), func(t *testing.T) {
			b := writeAll(t, c, recs)
			if got := Detect("", b); got != c {
				t.Errorf("Detect = %v", got)
			}
			r, err := NewReader(bytes.NewReader(b), c, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(t, r)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(recs) {
				t.Fatalf("%d records, want %d", len(got), len(recs))
			}
			for i := range recs {
				if !bytes.Equal(got[i], recs[i]) {
					t.Errorf("record %d differs", i)
				}
			}
			var want int64
			for _, rec := range recs {
				want += int64(len(rec)) + 16
			}
			if r.Offset() != want {
				t.Errorf("Offset = %d, want %d", r.Offset(), want)
			}
		})
	}
}

func TestRecordsAreFresh(t *testing.T) {
	b := writeAll(t, None, [][]byte{[]byte("one"), []byte("two")})
	r, _ := NewReader(bytes.NewReader(b), None, "")
	a, _ := r.Next()
	c, _ := r.Next()
	if string(a) != "one" || string(c) != "two" {
		t.Errorf("records %q %q", a, c)
	}
	if cap(a) != len(a) {
		t.Errorf("cap %d, len %d: appending would overwrite the data crc", cap(a), len(a))
	}
}

func TestWriterAfterClose(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Gzip)
	if err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := w.Write([]byte("y")); err == nil {
		t.Error("Write after Close succeeded")
	}
}

func TestWriterFlush(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, Zlib)
	if err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// After a flush, everything written so far is readable without Close.
	r, err := NewReader(bytes.NewReader(buf.Bytes()), Zlib, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil || string(rec) != "hello" {
		t.Errorf("Next = %q, %v", rec, err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriterError(t *testing.T) {
	w := NewWriter(failWriter{}, None)
	if err := w.Write(make([]byte, bufferSize+1)); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write = %v", err)
	}
	if err := w.Close(); err == nil {
		t.Error("Close after a failed write succeeded")
	}
}

type failReader struct{ err error }

func (f failReader) Read([]byte) (int, error) { return 0, f.err }

func TestReadErrorIsNotCorruption(t *testing.T) {
	ioErr := errors.New("input/output error")
	r, _ := NewReader(failReader{ioErr}, None, "f")
	_, err := r.Next()
	var ce *CorruptError
	if !errors.Is(err, ioErr) || errors.As(err, &ce) {
		t.Errorf("err = %#v", err)
	}
	if err.Error() != "tfrecord: f: record 0 at byte offset 0: read: input/output error" {
		t.Errorf("message %q", err)
	}
}

func TestParseCompression(t *testing.T) {
	tests := []struct {
		in   string
		c    Compression
		auto bool
		err  bool
	}{
		{"auto", None, true, false},
		{"", None, true, false},
		{"none", None, false, false},
		{"GZIP", Gzip, false, false},
		{"zlib", Zlib, false, false},
		{"snappy", None, false, true},
	}
	for _, tt := range tests {
		c, auto, err := ParseCompression(tt.in)
		if c != tt.c || auto != tt.auto || (err != nil) != tt.err {
			t.Errorf("ParseCompression(%q) = %v, %v, %v", tt.in, c, auto, err)
		}
	}
	_, _, err := ParseCompression("snappy")
	if err == nil || err.Error() != `tfrecord: unknown compression "snappy" (want auto, none, gzip or zlib)` {
		t.Errorf("err = %v", err)
	}
}

func TestDetect(t *testing.T) {
	// 0x78 0x9c as the first length bytes: a record of length 0x9c78 (40056)
	// whose header looks like a zlib header.
	zlibLike := writeAll(t, None, [][]byte{make([]byte, 0x9c78)})
	if zlibLike[0] != 0x78 || zlibLike[1] != 0x9c {
		t.Fatalf("setup: %x", zlibLike[:2])
	}
	// 0x1f 0x8b likewise: a record of length 0x8b1f (35615) whose header
	// looks like gzip's magic.
	gzipLike := writeAll(t, None, [][]byte{make([]byte, 0x8b1f)})
	if gzipLike[0] != 0x1f || gzipLike[1] != 0x8b {
		t.Fatalf("setup: %x", gzipLike[:2])
	}
	tests := []struct {
		name, path string
		head       []byte
		want       Compression
	}{
		{"gzip magic", "a.tfrecord", []byte{0x1f, 0x8b, 8, 0}, Gzip},
		{"gzip-like raw record", "a.tfrecord", gzipLike[:12], None},
		{"gzip-like raw record with .gz name", "a.gz", gzipLike[:12], None},
		{"zlib header", "a.tfrecord", []byte{0x78, 0x9c, 1, 2, 3}, Zlib},
		{"zlib-like raw record", "a.zz", zlibLike[:12], None},
		{"raw record with .gz name", "a.gz", writeAll(t, None, [][]byte{[]byte("x")})[:12], None},
		{"unknown with .gz", "a.GZ", []byte{1, 2, 3}, Gzip},
		{"unknown with .gzip", "a.gzip", nil, Gzip},
		{"unknown with .zlib", "a.zlib", []byte{1}, Zlib},
		{"unknown with .zz", "dir.gz/a.zz", nil, Zlib},
		{"unknown", "a.tfrecord", []byte{1, 2, 3}, None},
		{"empty", "", nil, None},
	}
	for _, tt := range tests {
		if got := Detect(tt.path, tt.head); got != tt.want {
			t.Errorf("%s: Detect = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCompressionString(t *testing.T) {
	for c, want := range map[Compression]string{None: "none", Gzip: "gzip", Zlib: "zlib", 7: "compression(7)"} {
		if c.String() != want {
			t.Errorf("%d.String() = %q", int(c), c.String())
		}
	}
}

// TestNotATFRecord: a first header that fails its check says the file may
// not be a TFRecord at all; a later one is plain corruption.
func TestNotATFRecord(t *testing.T) {
	jpeg := append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), make([]byte, 64)...)
	r, err := NewReader(bytes.NewReader(jpeg), None, "photo.jpg")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if want := ": not a TFRecord file, or a compressed one read as uncompressed"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Next = %v, want it to end %q", err, want)
	}
	// A text file says it looks like one (a new-user test ran inspect on
	// a .jsonl).
	r, err = NewReader(strings.NewReader("{\"a\": 1}\n{\"a\": 2}\n"), None, "x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if want := ": not a TFRecord file, or a compressed one read as uncompressed (it starts with text: a JSON lines or CSV file?)"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Next = %v, want it to end %q", err, want)
	}
	// Gzipped text is read as gzip: "read as uncompressed" would mislead.
	text := []byte("{\"a\": 1}\n{\"a\": 2}\n")
	r, err = NewReader(bytes.NewReader(compress(t, Gzip, text)), Gzip, "x.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if want := fmt.Sprintf("tfrecord: x.jsonl.gz: record 0 at byte offset 0 of the decompressed stream: length crc mismatch (got 0x%08x, want 0x%08x): what the gzip stream holds is not a TFRecord file (it starts with text: a JSON lines or CSV file?)",
		MaskedCRC(text[:8]), binary.LittleEndian.Uint32(text[8:12])); err == nil || err.Error() != want {
		t.Errorf("Next = %v, want %q", err, want)
	}
	b := beamBytes(t, beamStreams[1].hex, "")
	b[19+9]++ // length crc of record 1
	r, err = NewReader(bytes.NewReader(b), None, "x.tfrecord")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err == nil || strings.Contains(err.Error(), "not a TFRecord") || !strings.Contains(err.Error(), "record 1 at byte offset 19: length crc mismatch") {
		t.Errorf("second Next = %v, want a plain length crc mismatch of record 1", err)
	}
}

// TestWrongCompressionHint: a file read with the wrong compression says
// which one its first bytes point to (a new-user test got only "zlib:
// invalid header" for an uncompressed file read as zlib).
func TestWrongCompressionHint(t *testing.T) {
	recs := [][]byte{[]byte("one"), []byte("two")}
	files := map[Compression][]byte{None: writeAll(t, None, recs), Gzip: writeAll(t, Gzip, recs), Zlib: writeAll(t, Zlib, recs)}
	for _, tc := range []struct {
		file, read Compression
		want       string // the whole error
	}{
		{None, Zlib, "tfrecord: f: record 0 at byte offset 0: zlib header: zlib: invalid header (it starts like an uncompressed TFRecord: read it as none, or with auto, which detects it)"},
		{None, Gzip, "tfrecord: f: record 0 at byte offset 0: gzip header: gzip: invalid header (it starts like an uncompressed TFRecord: read it as none, or with auto, which detects it)"},
		{Gzip, Zlib, "tfrecord: f: record 0 at byte offset 0: zlib header: zlib: invalid header (it starts like a gzip file: read it as gzip, or with auto, which detects it)"},
		{Zlib, Gzip, "tfrecord: f: record 0 at byte offset 0: gzip header: gzip: invalid header (it starts like a zlib stream: read it as zlib, or with auto, which detects it)"},
		{Gzip, None, "tfrecord: f: record 0 at byte offset 0: length crc mismatch (got 0x%08x, want 0x%08x): not a TFRecord file, or a compressed one read as uncompressed (it starts like a gzip file: read it as gzip, or with auto, which detects it)"},
		{Zlib, None, "tfrecord: f: record 0 at byte offset 0: length crc mismatch (got 0x%08x, want 0x%08x): not a TFRecord file, or a compressed one read as uncompressed (it starts like a zlib stream: read it as zlib, or with auto, which detects it)"},
	} {
		t.Run(tc.file.String()+"_as_"+tc.read.String(), func(t *testing.T) {
			b := files[tc.file]
			want := tc.want
			if tc.read == None {
				want = fmt.Sprintf(want, MaskedCRC(b[:8]), binary.LittleEndian.Uint32(b[8:12]))
			}
			r, err := NewReader(bufio.NewReader(bytes.NewReader(b)), tc.read, "f")
			if err == nil {
				_, err = r.Next()
			}
			if err == nil || err.Error() != want {
				t.Errorf("got  %v\nwant %s", err, want)
			}
		})
	}
}

// TestWriterRefusesWhatNoReaderTakes: the writer refuses a record over the
// limit the reader applies, before writing any of it, and writes on.
func TestWriterRefusesWhatNoReaderTakes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, None)
	if w.maxSize != DefaultMaxRecordSize {
		t.Fatalf("writer limit %d, want %d", w.maxSize, DefaultMaxRecordSize)
	}
	w.maxSize = 9
	err := w.Write([]byte("0123456789"))
	const want = "tfrecord: a record of 10 bytes is over the 9 a protocol buffer (a tf.train.Example) may hold, so neither TensorFlow nor piperun could read it back: record too large"
	if err == nil || err.Error() != want || !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if err := w.Write([]byte("012345678")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()), None, "")
	if err != nil {
		t.Fatal(err)
	}
	r.SetMaxRecordSize(9)
	if rec, err := r.Next(); err != nil || string(rec) != "012345678" {
		t.Errorf("read back %q, %v", rec, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("then %v, want EOF", err)
	}
}
