package tfrecord

import (
	"github.com/piperun/piperun/internal/testutil"

	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sharedData(t testing.TB) string { return testutil.SharedData(t) }

// expected mirrors the parts of tfrecord/EXPECTED/*.json this package checks.
type expected struct {
	File               string          `json:"file"`
	FileBytes          int64           `json:"file_bytes"`
	FileSHA256         string          `json:"file_sha256"`
	Compression        string          `json:"compression"`
	DecompressedBytes  int64           `json:"decompressed_bytes"`
	DecompressedSHA256 string          `json:"decompressed_sha256"`
	NumRecords         int             `json:"num_records"`
	RecordLengthsRaw   json.RawMessage `json:"record_lengths"`
	RecordSHA256First3 []string        `json:"record_sha256_first3"`
	FramingWalk        []string        `json:"framing_walk"`
	Kind               string          `json:"kind"`
	Records            []struct {
		Len    int    `json:"len"`
		SHA256 string `json:"sha256"` // may be a prefix
	} `json:"records"`
}

type lengthStats struct {
	First20 []int `json:"first20"`
	Min     int   `json:"min"`
	Max     int   `json:"max"`
	Sum     int64 `json:"sum"`
}

func loadExpected(t *testing.T, dir string) map[string]*expected {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "tfrecord", "EXPECTED", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no EXPECTED json: %v", err)
	}
	out := map[string]*expected{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var e expected
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if e.Kind != "" { // companion files such as the raccoon CSV
			continue
		}
		out[filepath.Base(p)] = &e
	}
	return out
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestSharedData(t *testing.T) {
	dir := sharedData(t)
	exps := loadExpected(t, dir)
	if len(exps) < 7 {
		t.Fatalf("only %d EXPECTED files", len(exps))
	}
	for name, e := range exps {
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			path := filepath.Join(dir, "tfrecord", filepath.FromSlash(e.File))
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(raw)) != e.FileBytes || sha(raw) != e.FileSHA256 {
				t.Fatalf("file is %d bytes sha256 %s; EXPECTED says %d %s", len(raw), sha(raw), e.FileBytes, e.FileSHA256)
			}
			if len(e.FramingWalk) > 0 {
				checkCorrupted(t, path)
				return
			}
			checkFile(t, path, raw, e)
		})
	}
}

func checkCorrupted(t *testing.T, path string) {
	r, closer, err := Open(path, None, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	rec, err := r.Next()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Next = %d bytes, %v; want a CorruptError", len(rec), err)
	}
	if rec != nil {
		t.Error("a record was returned from a truncated frame")
	}
	if ce.File != path || ce.Record != 0 || ce.Offset != 0 || !strings.HasPrefix(ce.Reason, "truncated: ") || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("error %+v", ce)
	}
	// The header is intact, so the reason reports the claimed length and
	// how much of payload+crc was present.
	if !strings.Contains(ce.Reason, "length 820669 needs 820673 bytes") || !strings.Contains(ce.Reason, "got 820669") {
		t.Errorf("reason %q", ce.Reason)
	}
	t.Logf("%v", err)
}

func checkFile(t *testing.T, path string, raw []byte, e *expected) {
	wantC := None
	if e.Compression != "" {
		c, auto, err := ParseCompression(e.Compression)
		if err != nil || auto {
			t.Fatalf("compression %q: %v", e.Compression, err)
		}
		wantC = c
	}
	if got := Detect(path, raw[:min(len(raw), 64)]); got != wantC {
		t.Errorf("Detect = %v, want %v", got, wantC)
	}
	stream := raw
	if wantC == Gzip {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if stream, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	if e.DecompressedSHA256 != "" && (sha(stream) != e.DecompressedSHA256 || int64(len(stream)) != e.DecompressedBytes) {
		t.Errorf("decompressed stream is %d bytes sha256 %s; want %d %s", len(stream), sha(stream), e.DecompressedBytes, e.DecompressedSHA256)
	}

	r, closer, err := Open(path, None, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	var recs [][]byte
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("record %d: %v", len(recs), err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != e.NumRecords || r.Index() != e.NumRecords {
		t.Errorf("%d records, want %d", len(recs), e.NumRecords)
	}
	if r.Offset() != int64(len(stream)) {
		t.Errorf("Offset at EOF = %d, want the decompressed length %d", r.Offset(), len(stream))
	}
	lengths := make([]int, len(recs))
	var sum int64
	for i, rec := range recs {
		lengths[i] = len(rec)
		sum += int64(len(rec))
	}
	checkLengths(t, e.RecordLengthsRaw, lengths, sum)
	for i, want := range e.RecordSHA256First3 {
		if got := sha(recs[i]); got != want {
			t.Errorf("record %d sha256 %s, want %s", i, got, want)
		}
	}
	for i, want := range e.Records {
		if i >= len(recs) {
			break
		}
		if len(recs[i]) != want.Len || !strings.HasPrefix(sha(recs[i]), want.SHA256) {
			t.Errorf("record %d: %d bytes sha256 %s, want %d %s…", i, len(recs[i]), sha(recs[i]), want.Len, want.SHA256)
		}
	}
	if len(e.RecordSHA256First3) == 0 && len(e.Records) == 0 {
		t.Error("EXPECTED has no per-record hashes to compare")
	}

	// Re-writing the records uncompressed reproduces TensorFlow's bytes.
	if got := writeAll(t, None, recs); !bytes.Equal(got, stream) {
		t.Errorf("re-written stream differs from the original (%d vs %d bytes)", len(got), len(stream))
	}
}

func checkLengths(t *testing.T, raw json.RawMessage, got []int, sum int64) {
	t.Helper()
	if len(raw) == 0 {
		return
	}
	var list []int
	if err := json.Unmarshal(raw, &list); err == nil {
		if len(list) != len(got) {
			t.Errorf("%d lengths, EXPECTED lists %d", len(got), len(list))
			return
		}
		for i := range list {
			if got[i] != list[i] {
				t.Errorf("record %d length %d, want %d", i, got[i], list[i])
			}
		}
		return
	}
	var st lengthStats
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("record_lengths: %v", err)
	}
	for i, want := range st.First20 {
		if i < len(got) && got[i] != want {
			t.Errorf("record %d length %d, want %d", i, got[i], want)
		}
	}
	mn, mx := got[0], got[0]
	for _, n := range got {
		mn, mx = min(mn, n), max(mx, n)
	}
	if mn != st.Min || mx != st.Max || sum != st.Sum {
		t.Errorf("lengths min/max/sum %d/%d/%d, want %d/%d/%d", mn, mx, sum, st.Min, st.Max, st.Sum)
	}
}
