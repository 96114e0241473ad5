package tfrecord

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shapesFile is a real TFRecord of 250 records (~2.3 KB each) from the
// quickstart data, which go run ./examples/gen makes and the repository
// holds.
const shapesFile = "../examples/data/shapes/train-00000-of-00004.tfrecord"

// loadShapes returns the shapes file's bytes, its records and the offset of
// each record's header, with the file's length appended.
func loadShapes(t *testing.T) (raw []byte, recs [][]byte, offs []int64) {
	t.Helper()
	raw, err := os.ReadFile(shapesFile)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(raw), None, shapesFile)
	if err != nil {
		t.Fatal(err)
	}
	for {
		off := r.Offset()
		rec, err := r.Next()
		if err == io.EOF {
			offs = append(offs, off)
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		recs, offs = append(recs, rec), append(offs, off)
	}
	if len(recs) != 250 || offs[250] != int64(len(raw)) {
		t.Fatalf("%s: %d records in %d bytes, want 250 records", shapesFile, len(recs), len(raw))
	}
	return raw, recs, offs
}

// readResync reads every record of r, stepping over errors that read on.
// It returns the records, those errors, and the error that ended the
// stream (nil at io.EOF), which Next must then return again.
func readResync(t *testing.T, r *Reader) (recs [][]byte, skips []*CorruptError, final error) {
	t.Helper()
	for range 1000 {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, skips, nil
		}
		var ce *CorruptError
		if errors.As(err, &ce) && ce.ReadsOn() {
			if rec != nil {
				t.Errorf("a record with the error %v", err)
			}
			skips = append(skips, ce)
			continue
		}
		if err != nil {
			if _, again := r.Next(); again != err {
				t.Errorf("after %v, Next = %v; want the same error", err, again)
			}
			return recs, skips, err
		}
		recs = append(recs, rec)
	}
	t.Fatal("no end after 1000 calls to Next")
	return
}

// TestResync damages a real file in the ways a disk or a careless copy
// does and checks what a resynchronising reader makes of it (found by a
// new-user test: one flipped bit in record 100's length lost the 149
// records after it, counted as one skip).
func TestResync(t *testing.T) {
	raw, orig, offs := loadShapes(t)
	garbage := make([]byte, 37)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	// fakeHeader is a header whose length checksum passes.
	fakeHeader := func(n uint64) []byte {
		h := make([]byte, headerSize)
		binary.LittleEndian.PutUint64(h, n)
		putCRC(h)
		return h
	}
	flip := func(at int64, bit byte) func([]byte) []byte {
		return func(b []byte) []byte { b[at] ^= bit; return b }
	}
	span := func(from, to int) []int { // record indices from..to-1
		var s []int
		for i := from; i < to; i++ {
			s = append(s, i)
		}
		return s
	}
	type skip = resyncSkip
	resumedMsg := func(rec int, off, skipped, at int64, next int) string {
		return fmt.Sprintf("tfrecord: %%s: record %d at byte offset %d: length crc mismatch (got 0x", rec, off) + "\x00" +
			fmt.Sprintf("; skipped %d bytes to the next valid record, at byte offset %d, and read on from there as record %d (numbering the skipped bytes as one record)", skipped, at, next)
	}
	tests := []struct {
		name    string
		damage  func([]byte) []byte
		comp    Compression
		resync  bool
		want    []int // indices of orig read, in order
		skips   []skip
		final   string // substring of the error that ends the stream; "" for io.EOF
		endIdx  int    // Index() at the end
		endOff  int64  // Offset() at the end, when not ended by an error
		noFinal bool
	}{
		{
			name:   "a: a bit flipped in record 100's length",
			damage: flip(offs[100]+1, 0x10),
			resync: true,
			want:   append(span(0, 100), span(101, 250)...),
			skips:  []skip{{100, offs[100], offs[101] - offs[100], true, resumedMsg(100, offs[100], offs[101]-offs[100], offs[101], 101)}},
			endIdx: 250, endOff: offs[250],
		},
		{
			name:   "b: a bit flipped in record 100's length crc",
			damage: flip(offs[100]+9, 0x01),
			resync: true,
			want:   append(span(0, 100), span(101, 250)...),
			skips:  []skip{{100, offs[100], offs[101] - offs[100], true, resumedMsg(100, offs[100], offs[101]-offs[100], offs[101], 101)}},
			endIdx: 250, endOff: offs[250],
		},
		{
			name: "c: 37 bytes of garbage before record 100",
			damage: func(b []byte) []byte {
				return append(append(append([]byte{}, b[:offs[100]]...), garbage...), b[offs[100]:]...)
			},
			resync: true,
			want:   span(0, 250),
			skips:  []skip{{100, offs[100], 37, true, resumedMsg(100, offs[100], 37, offs[100]+37, 101)}},
			// Nothing was lost, but the garbage counts as one record.
			endIdx: 251, endOff: offs[250] + 37,
		},
		{
			name:   "d: cut inside record 100's header",
			damage: func(b []byte) []byte { return b[:offs[100]+5] },
			resync: true,
			want:   span(0, 100),
			final:  fmt.Sprintf("record 100 at byte offset %d: truncated: header has 5 of 12 bytes", offs[100]),
			endIdx: 100,
		},
		{
			name:   "bad headers of records 100 and 200: two resyncs",
			damage: func(b []byte) []byte { b[offs[100]] ^= 1; b[offs[200]+3] ^= 0x80; return b },
			resync: true,
			want:   append(append(span(0, 100), span(101, 200)...), span(201, 250)...),
			skips: []skip{
				{100, offs[100], offs[101] - offs[100], true, resumedMsg(100, offs[100], offs[101]-offs[100], offs[101], 101)},
				{200, offs[200], offs[201] - offs[200], true, resumedMsg(200, offs[200], offs[201]-offs[200], offs[201], 201)},
			},
			endIdx: 250, endOff: offs[250],
		},
		{
			name:   "bad headers of records 100 and 101: one region",
			damage: func(b []byte) []byte { b[offs[100]] ^= 1; b[offs[101]+10] ^= 4; return b },
			resync: true,
			want:   append(span(0, 100), span(102, 250)...),
			// Record 102 is read as 101: the scan cannot tell how many
			// records the skipped bytes held, and says so.
			skips:  []skip{{100, offs[100], offs[102] - offs[100], true, resumedMsg(100, offs[100], offs[102]-offs[100], offs[102], 101)}},
			endIdx: 249, endOff: offs[250],
		},
		{
			name:   "the last record's header: no record follows",
			damage: flip(offs[249]+2, 0x02),
			resync: true,
			want:   span(0, 249),
			skips: []skip{{249, offs[249], offs[250] - offs[249], false,
				fmt.Sprintf("record 249 at byte offset %d: length crc mismatch (got 0x", offs[249]) + "\x00" +
					fmt.Sprintf("; no valid record follows in the remaining %d bytes from byte offset %d", offs[250]-offs[249], offs[249])}},
			endIdx: 250, endOff: offs[250],
		},
		{
			// After the bad header come a frame whose length passes its
			// check but whose data does not, and one whose length runs
			// past the end: neither is a place to read on from.
			name: "length checks that pass by themselves near the end",
			damage: func(b []byte) []byte {
				b[offs[249]+2] ^= 0x02
				b = append(b, fakeHeader(3)...)
				b = append(b, "abc\x00\x00\x00\x00"...)
				return append(b, append(fakeHeader(1000), "xy"...)...)
			},
			resync: true,
			want:   span(0, 249),
			skips: []skip{{249, offs[249], offs[250] - offs[249] + 12 + 7 + 12 + 2, false,
				fmt.Sprintf("; no valid record follows in the remaining %d bytes from byte offset %d", offs[250]-offs[249]+33, offs[249])}},
			endIdx: 250, endOff: offs[250] + 33,
		},
		{
			name:   "a, gzip: the scan reads the decompressed stream",
			damage: flip(offs[100]+1, 0x10),
			comp:   Gzip,
			resync: true,
			want:   append(span(0, 100), span(101, 250)...),
			skips: []skip{{100, offs[100], offs[101] - offs[100], true, strings.Replace(resumedMsg(100, offs[100], offs[101]-offs[100], offs[101], 101),
				": length crc", " of the decompressed stream: length crc", 1)}},
			endIdx: 250, endOff: offs[250],
		},
		{
			name:   "a without resync: the stream ends at the bad header",
			damage: flip(offs[100]+1, 0x10),
			want:   span(0, 100),
			final:  fmt.Sprintf("tfrecord: %%s: record 100 at byte offset %d: length crc mismatch (got 0x", offs[100]),
			endIdx: 100,
		},
	}
	for _, tt := range tests {
		// Damage a copy: the committed file stays as it is.
		path := filepath.Join(t.TempDir(), "shapes.tfrecord")
		b := compress(t, tt.comp, tt.damage(bytes.Clone(raw)))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		// Each case twice: with the file's reader, and with a buffer of
		// 16 bytes, smaller than every record, so that the scan reads
		// out and puts back each candidate it checks.
		for _, small := range []bool{false, true} {
			name := tt.name
			if small {
				name += ", 16-byte buffer"
			}
			t.Run(name, func(t *testing.T) {
				r, err := newReaderSize(bytes.NewReader(b), Detect(path, b), path, 16)
				if !small {
					var c io.Closer
					r, c, err = Open(path, None, true)
					if err == nil {
						defer c.Close()
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				r.SetResync(tt.resync)
				checkResync(t, r, path, orig, resyncWant{tt.want, tt.skips, tt.final, tt.endIdx, tt.endOff})
			})
		}
	}
}

// resyncWant is what TestResync expects of a reader.
type resyncWant struct {
	want   []int // indices of orig read, in order
	skips  []resyncSkip
	final  string // substring of the error that ends the stream; "" for io.EOF
	endIdx int    // Index() at the end
	endOff int64  // Offset() at the end, when not ended by an error
}

type resyncSkip struct {
	record  int
	offset  int64
	skipped int64
	resumed bool
	msg     string // substrings of the message, split at \x00; %s is the path
}

// checkResync reads r to its end and checks it against tt.
func checkResync(t *testing.T, r *Reader, path string, orig [][]byte, tt resyncWant) {
	t.Helper()
	recs, skips, final := readResync(t, r)
	if len(recs) != len(tt.want) {
		t.Errorf("read %d records, want %d", len(recs), len(tt.want))
	}
	for i := range min(len(recs), len(tt.want)) {
		if !bytes.Equal(recs[i], orig[tt.want[i]]) {
			t.Errorf("record %d read is not record %d of the file", i, tt.want[i])
			break
		}
	}
	if len(skips) != len(tt.skips) {
		t.Errorf("%d errors read on, want %d: %v", len(skips), len(tt.skips), skips)
	}
	for i := range min(len(skips), len(tt.skips)) {
		got, want := skips[i], tt.skips[i]
		if got.File != path || got.Record != want.record || got.Offset != want.offset || got.Skipped != want.skipped || got.Resumed != want.resumed || got.DataOnly {
			t.Errorf("error %d: record %d, offset %d, skipped %d, resumed %v, data only %v; want %d, %d, %d, %v, false",
				i, got.Record, got.Offset, got.Skipped, got.Resumed, got.DataOnly, want.record, want.offset, want.skipped, want.resumed)
		}
		for _, part := range strings.Split(strings.ReplaceAll(want.msg, "%s", path), "\x00") {
			if !strings.Contains(got.Error(), part) {
				t.Errorf("error %d %q lacks %q", i, got, part)
			}
		}
	}
	switch {
	case tt.final == "" && final != nil:
		t.Errorf("stream ended with %v, want io.EOF", final)
	case tt.final != "" && (final == nil || !strings.Contains(final.Error(), strings.ReplaceAll(tt.final, "%s", path))):
		t.Errorf("stream ended with %v, want an error holding %q", final, tt.final)
	case tt.final != "" && strings.Contains(final.Error(), "skipped"):
		t.Errorf("error %q speaks of skipping", final)
	}
	if r.Index() != tt.endIdx {
		t.Errorf("Index() = %d at the end, want %d", r.Index(), tt.endIdx)
	}
	if final == nil && r.Offset() != tt.endOff {
		t.Errorf("Offset() = %d at the end, want %d", r.Offset(), tt.endOff)
	}
}

// TestResyncNotATFRecord: a file that is no TFRecord at all, read with
// resync on, is scanned to its end and still says what it may be.
func TestResyncNotATFRecord(t *testing.T) {
	text := strings.Repeat("{\"a\": 1}\n", 1000)
	r, err := NewReader(strings.NewReader(text), None, "x.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	r.SetResync(true)
	_, err = r.Next()
	want := fmt.Sprintf(": not a TFRecord file, or a compressed one read as uncompressed (it starts with text: a JSON lines or CSV file?); no valid record follows in the remaining %d bytes from byte offset 0", len(text))
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Next = %v, want it to end %q", err, want)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("then Next = %v, want io.EOF", err)
	}
}

// TestResyncDamagedCompression: a compressed stream that breaks during the
// scan ends the stream with both causes, as it cannot be stepped over.
func TestResyncDamagedCompression(t *testing.T) {
	var recs [][]byte
	for i := range 200 {
		recs = append(recs, bytes.Repeat([]byte{byte(i)}, 1000+i))
	}
	b := writeAll(t, None, recs)
	b[1000+16+1] ^= 0x40 // record 1's length
	gz := compress(t, Gzip, b)
	gz = gz[:len(gz)-8] // the trailer cut off: truncation while scanning
	r, err := NewReader(bytes.NewReader(gz), Gzip, "x.gz")
	if err != nil {
		t.Fatal(err)
	}
	r.SetResync(true)
	got, skips, final := readResync(t, r)
	// The scan finds record 2 in the decompressed stream before the cut
	// shows; the cut then ends the stream as it would without the damage.
	if len(got) != 199 || len(skips) != 1 || skips[0].Record != 1 || !skips[0].Resumed || !errors.Is(final, io.ErrUnexpectedEOF) {
		t.Errorf("%d records, skips %v, final %v", len(got), skips, final)
	}

	// The last header damaged, so the scan runs into the cut.
	b = writeAll(t, None, recs)
	last := len(b) - (1000 + 199 + 16)
	b[last] ^= 1
	gz = compress(t, Gzip, b)
	r, err = NewReader(bytes.NewReader(gz[:len(gz)-8]), Gzip, "x.gz")
	if err != nil {
		t.Fatal(err)
	}
	r.SetResync(true)
	got, skips, final = readResync(t, r)
	want := fmt.Sprintf("record 199 at byte offset %d of the decompressed stream: length crc mismatch (got 0x", last)
	if len(got) != 199 || len(skips) != 0 || final == nil || !strings.Contains(final.Error(), want) ||
		!strings.Contains(final.Error(), "; then, looking for the next valid record: truncated: the gzip stream is cut short (the file ends before it does)") || !errors.Is(final, io.ErrUnexpectedEOF) {
		t.Errorf("%d records, skips %v, final %v; want 199, none, and one holding %q", len(got), skips, final, want)
	}
}

// TestResyncGivesUp: a crafted stream of headers that pass their length
// check and claim much data makes the scan give up, with an error that
// ends the stream, once its checks would cover more than 8 bytes per byte
// of the stream plus the maximum record size (the
// scan's cost grew with the square of such a stream's length, 1.8 s for
// 1 MiB).
func TestResyncGivesUp(t *testing.T) {
	const most = 64 << 10
	crafted := adversarialResync(1<<20, most)
	valid := writeAll(t, None, [][]byte{make([]byte, 100), make([]byte, 100), make([]byte, 100)})
	const gaveUp = "; gave up looking for the next valid record after scanning %d %s from byte offset %d, as the headers there claim more data to check than the scan allows (a crafted file?): the rest of the file was not read"
	// With the maximum record size at 64 KiB, the first candidate (at
	// 12 bytes after the bad header) spends that much of the budget, and
	// the second (at 24) is past it: 2×64 KiB > 8×24 + 64 KiB.
	for _, tc := range []struct {
		name    string
		stream  []byte
		comp    Compression
		records int
		want    string
	}{
		{"at the start", crafted, None, 0, fmt.Sprintf("tfrecord: crafted: record 0 at byte offset 0: length crc mismatch (got 0x%08x, want 0xeeeeeeee): not a TFRecord file, or a compressed one read as uncompressed"+gaveUp, MaskedCRC(crafted[:8]), 24, "bytes", 0)},
		{"after 3 records", append(bytes.Clone(valid), crafted...), None, 3, fmt.Sprintf("tfrecord: crafted: record 3 at byte offset 348: length crc mismatch (got 0x%08x, want 0xeeeeeeee)"+gaveUp, MaskedCRC(crafted[:8]), 24, "bytes", 348)},
		{"after 3 records, gzip", append(bytes.Clone(valid), crafted...), Gzip, 3, fmt.Sprintf("tfrecord: crafted: record 3 at byte offset 348 of the decompressed stream: length crc mismatch (got 0x%08x, want 0xeeeeeeee)"+gaveUp, MaskedCRC(crafted[:8]), 24, "decompressed bytes", 348)},
	} {
		for _, size := range []int{bufferSize, 16} {
			t.Run(fmt.Sprintf("%s, buffer %d", tc.name, size), func(t *testing.T) {
				r, err := newReaderSize(bytes.NewReader(compress(t, tc.comp, tc.stream)), tc.comp, "crafted", size)
				if err != nil {
					t.Fatal(err)
				}
				r.SetResync(true)
				r.SetMaxRecordSize(most)
				recs, skips, final := readResync(t, r)
				if len(recs) != tc.records || len(skips) != 0 || final == nil || final.Error() != tc.want {
					t.Errorf("%d records, %d skips, then\n%v\nwant %d, none, then\n%s", len(recs), len(skips), final, tc.records, tc.want)
				}
				var ce *CorruptError
				if !errors.As(final, &ce) || ce.ReadsOn() || ce.Skipped != 0 || ce.Resumed {
					t.Errorf("%#v reads on; want it to end the stream", final)
				}
				// Only the first candidate was checked.
				if r.scanWork != most {
					t.Errorf("the scan checked %d bytes of data, want %d", r.scanWork, most)
				}
			})
		}
	}

	// With the default maximum record size, the stream of the benchmark:
	// each header claims the rest of 1 MiB. The scan gives up once its
	// checks would pass 8 bytes per byte plus 2 GiB, after 2,072
	// candidates, where it went on through all 87,380 of them.
	crafted = adversarialResync(1<<20, 1<<20)
	var work, scanned uint64
	for at := uint64(headerSize); ; at += headerSize {
		n := uint64(len(crafted)) - at - headerSize - footerSize
		if work+n > 8*at+DefaultMaxRecordSize {
			scanned = at
			break
		}
		work += n
	}
	r, err := NewReader(bytes.NewReader(crafted), None, "crafted")
	if err != nil {
		t.Fatal(err)
	}
	r.SetResync(true)
	_, err = r.Next()
	want := fmt.Sprintf("tfrecord: crafted: record 0 at byte offset 0: length crc mismatch (got 0x%08x, want 0xeeeeeeee): not a TFRecord file, or a compressed one read as uncompressed"+gaveUp, MaskedCRC(crafted[:8]), scanned, "bytes", 0)
	if err == nil || err.Error() != want || r.scanWork != work || scanned != 24876 {
		t.Errorf("Next = %v\nwant %s\nafter checking %d bytes of data, want %d (%d candidates)", err, want, r.scanWork, work, scanned/headerSize-1)
	}
	if _, again := r.Next(); again != err {
		t.Errorf("then Next = %v, want the same error", again)
	}
}

// TestResyncBudgetAcrossScans: the budget holds for all the scans of a
// reader together, not for each one, or a stream of many short damaged
// stretches, each with a header that claims the rest of the stream, would
// cost a checksum over the rest for each stretch.
func TestResyncBudgetAcrossScans(t *testing.T) {
	const size = 1 << 20
	// Stretches of 42 bytes: a bad header, a false one claiming the
	// rest of the stream, and a valid record.
	ok := writeAll(t, None, [][]byte{[]byte("ok")})
	var b []byte
	for len(b)+42 <= size {
		b = append(b, bytes.Repeat([]byte{0xee}, headerSize)...)
		h := make([]byte, headerSize)
		binary.LittleEndian.PutUint64(h, uint64(size-len(b)-headerSize-footerSize))
		putCRC(h)
		b = append(append(b, h...), ok...)
	}
	b = append(b, make([]byte, size-len(b))...)
	r, err := NewReader(bytes.NewReader(b), None, "crafted")
	if err != nil {
		t.Fatal(err)
	}
	r.SetResync(true)
	r.SetMaxRecordSize(size)
	var got []string
	for {
		off := r.Offset()
		rec, err := r.Next()
		if err != nil {
			got = append(got, fmt.Sprintf("%d: %v", off, err))
			var ce *CorruptError
			if errors.As(err, &ce) && ce.ReadsOn() {
				continue
			}
			break
		}
		got = append(got, fmt.Sprintf("%d: %q", off, rec))
	}
	// The first stretch's false header is checked (1 MiB less 28 bytes
	// of data, within the 1 MiB the budget starts with), then its valid
	// record (2 bytes); the second stretch's false header is not:
	// 2 MiB - 68 > 8×54 + 1 MiB. With a budget for each scan, each of
	// the 24,966 stretches would check a false header of up to 1 MiB.
	want := []string{
		fmt.Sprintf("0: tfrecord: crafted: record 0 at byte offset 0: length crc mismatch (got 0x%08x, want 0xeeeeeeee): the file starts with 24 bytes that are not a TFRecord record; skipped 24 bytes to the next valid record, at byte offset 24, and read on from there as record 1 (numbering the skipped bytes as one record)", MaskedCRC(b[:8])),
		`24: "ok"`,
		fmt.Sprintf("42: tfrecord: crafted: record 2 at byte offset 42: length crc mismatch (got 0x%08x, want 0xeeeeeeee); gave up looking for the next valid record after scanning 12 bytes from byte offset 42, as the headers there claim more data to check than the scan allows (a crafted file?): the rest of the file was not read", MaskedCRC(b[:8])),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.scanWork != size-28+2 {
		t.Errorf("the scans checked %d bytes of data, want %d", r.scanWork, size-26)
	}
}

// TestResyncPrefixedFile: a valid file behind bytes that are not a record
// says so, not that it may be no TFRecord file at all, nor a JSON lines or
// CSV one (the hint came before the scan, which then
// read all 250 records). When nothing valid follows, the hint stays
// (TestResyncNotATFRecord).
func TestResyncPrefixedFile(t *testing.T) {
	raw, _, _ := loadShapes(t)
	prefix := strings.Repeat("{\"a\": 1}\n", 4) + "\n" // 37 bytes of text
	b := append([]byte(prefix), raw...)
	for _, tc := range []struct {
		comp  Compression
		where string
	}{
		{None, "the file"},
		{Gzip, "the decompressed stream"},
	} {
		t.Run(tc.comp.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "prefixed.tfrecord")
			if err := os.WriteFile(path, compress(t, tc.comp, b), 0o644); err != nil {
				t.Fatal(err)
			}
			r, c, err := Open(path, None, true)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r.SetResync(true)
			recs, skips, final := readResync(t, r)
			at := ""
			if tc.comp != None {
				at = " of the decompressed stream"
			}
			want := fmt.Sprintf("tfrecord: %s: record 0 at byte offset 0%s: length crc mismatch (got 0x%08x, want 0x%08x): %s starts with 37 bytes that are not a TFRecord record; skipped 37 bytes to the next valid record, at byte offset 37, and read on from there as record 1 (numbering the skipped bytes as one record)",
				path, at, MaskedCRC([]byte(prefix[:8])), binary.LittleEndian.Uint32([]byte(prefix[8:12])), tc.where)
			if len(recs) != 250 || len(skips) != 1 || skips[0].Error() != want || final != nil {
				t.Errorf("%d records, then %v, ending with %v; want 250 and\n%s", len(recs), skips, final, want)
			}
		})
	}
}

// TestResyncLargeRecords: records larger than the reader's buffer, which
// the scan reads out whole to check (and hands on, or puts back), match
// the reference reader, plain and gzip-compressed.
func TestResyncLargeRecords(t *testing.T) {
	var recs [][]byte
	for i := range 8 {
		rec := make([]byte, bufferSize+40_000+i)
		for j := range rec {
			rec[j] = byte(j*13 + i)
		}
		recs = append(recs, rec)
	}
	b := writeAll(t, None, recs)
	offs := []int{0}
	for _, rec := range recs {
		offs = append(offs, offs[len(offs)-1]+headerSize+len(rec)+footerSize)
	}
	// Record 2's header and 3's data: the scan checks 3 and puts it back,
	// then reads on at 4. Then the same for 5 and 6, with the first
	// bytes put back still ahead of the reader: it reads on at 7.
	b[offs[2]+1] ^= 0x20
	b[offs[3]+headerSize+1000] ^= 1
	b[offs[5]+9] ^= 4
	b[offs[6]+headerSize+5] ^= 1
	for _, comp := range []Compression{None, Gzip} {
		t.Run(comp.String(), func(t *testing.T) {
			data := compress(t, comp, b)
			r, err := NewReader(bytes.NewReader(data), comp, "large")
			if err != nil {
				t.Fatal(err)
			}
			r.SetResync(true)
			fuzzResync(t, r, data, comp, DefaultMaxRecordSize)

			r, _ = NewReader(bytes.NewReader(data), comp, "large")
			r.SetResync(true)
			got, skips, final := readResync(t, r)
			if len(got) != 4 || !bytes.Equal(got[0], recs[0]) || !bytes.Equal(got[1], recs[1]) || !bytes.Equal(got[2], recs[4]) || !bytes.Equal(got[3], recs[7]) ||
				len(skips) != 2 || skips[0].Skipped != int64(offs[4]-offs[2]) || skips[1].Skipped != int64(offs[7]-offs[5]) || final != nil || r.back == nil {
				t.Errorf("%d records, skips %v, final %v; want records 0, 1, 4 and 7, by way of the bytes put back", len(got), skips, final)
			}
		})
	}

	// Cut inside record 6, after 5's bad header: the scan puts back what
	// it read of 6, finds nothing there, and ends with the cut.
	gz := compress(t, Gzip, b[:offs[6]+200_000])
	r, err := NewReader(bytes.NewReader(gz[:len(gz)-50]), Gzip, "large.gz")
	if err != nil {
		t.Fatal(err)
	}
	r.SetResync(true)
	got, skips, final := readResync(t, r)
	want := fmt.Sprintf("tfrecord: large.gz: record 4 at byte offset %d of the decompressed stream: length crc mismatch (got 0x", offs[5])
	if len(got) != 3 || len(skips) != 1 || final == nil || !strings.HasPrefix(final.Error(), want) ||
		!strings.HasSuffix(final.Error(), "; then, looking for the next valid record: truncated: the gzip stream is cut short (the file ends before it does)") || !errors.Is(final, io.ErrUnexpectedEOF) {
		t.Errorf("%d records, skips %v, final %v; want 3, one, and the cut", len(got), skips, final)
	}
}
