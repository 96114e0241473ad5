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
	type skip struct {
		record  int
		offset  int64
		skipped int64
		resumed bool
		msg     string // a substring of the message
	}
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
					fmt.Sprintf("; no valid record follows: the rest of the file (%d bytes from byte offset %d) was not read", offs[250]-offs[249], offs[249])}},
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
				fmt.Sprintf("; no valid record follows: the rest of the file (%d bytes from byte offset %d) was not read", offs[250]-offs[249]+33, offs[249])}},
			endIdx: 250, endOff: offs[250] + 33,
		},
		{
			name:   "a, gzip: the scan reads the decompressed stream",
			damage: flip(offs[100]+1, 0x10),
			comp:   Gzip,
			resync: true,
			want:   append(span(0, 100), span(101, 250)...),
			skips:  []skip{{100, offs[100], offs[101] - offs[100], true, resumedMsg(100, offs[100], offs[101]-offs[100], offs[101], 101)}},
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
		t.Run(tt.name, func(t *testing.T) {
			// Damage a copy: the committed file stays as it is.
			path := filepath.Join(t.TempDir(), "shapes.tfrecord")
			b := compress(t, tt.comp, tt.damage(bytes.Clone(raw)))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			r, c, err := Open(path, None, true)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r.SetResync(tt.resync)
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
		})
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
	want := fmt.Sprintf(": not a TFRecord file, or a compressed one read as uncompressed (it starts with text: a JSON lines or CSV file?); no valid record follows: the rest of the file (%d bytes from byte offset 0) was not read", len(text))
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
	want := fmt.Sprintf("record 199 at byte offset %d: length crc mismatch (got 0x", last)
	if len(got) != 199 || len(skips) != 0 || final == nil || !strings.Contains(final.Error(), want) ||
		!strings.Contains(final.Error(), "; then, looking for the next valid record: truncated: the stream ends early") || !errors.Is(final, io.ErrUnexpectedEOF) {
		t.Errorf("%d records, skips %v, final %v; want 199, none, and one holding %q", len(got), skips, final, want)
	}
}
