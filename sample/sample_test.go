package sample

import (
	"testing"
	"time"

	"github.com/piperun/piperun/tensor"
)

// TestSharedCovers: a Shared covers a copy only while the copy holds the
// very values it was made of; a field set anew (even to an equal value),
// added or removed means the copy holds memory the Shared does not count.
// Scalars only need their type, since their size cannot change.
func TestSharedCovers(t *testing.T) {
	img := tensor.New(tensor.Uint8, 2, 2, 3)
	raw := []byte("jpeg bytes")
	text := string([]byte("a caption"))
	base := func() *Sample {
		s := New(1, 0, "a.tfrecord record 3")
		s.Fields["image"] = img
		s.Fields["raw"] = raw
		s.Fields["text"] = text
		s.Fields["label"] = int64(3)
		s.Fields["list"] = []any{int64(1)}
		return s
	}
	for _, tc := range []struct {
		name   string
		change func(s *Sample)
		want   bool
	}{
		{"unchanged", func(*Sample) {}, true},
		{"scalar rewritten", func(s *Sample) { s.Fields["label"] = int64(9) }, true},
		{"scalar changes type", func(s *Sample) { s.Fields["label"] = 9.5 }, false},
		{"equal tensor anew", func(s *Sample) { s.Fields["image"] = tensor.New(tensor.Uint8, 2, 2, 3) }, false},
		{"bytes resliced", func(s *Sample) { s.Fields["raw"] = raw[:4] }, false},
		{"bytes copied", func(s *Sample) { s.Fields["raw"] = append([]byte(nil), raw...) }, false},
		{"equal string anew", func(s *Sample) { s.Fields["text"] = string([]byte("a caption")) }, false},
		{"list anew", func(s *Sample) { s.Fields["list"] = []any{int64(1)} }, false},
		{"field added", func(s *Sample) { s.Fields["n"] = int64(1) }, false},
		{"field removed", func(s *Sample) { delete(s.Fields, "raw") }, false},
		{"field renamed", func(s *Sample) { s.Fields["img"] = s.Fields["image"]; delete(s.Fields, "image") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			sh := Share(s, 2)
			c := s.Clone()
			tc.change(c)
			if got := sh.Covers(c); got != tc.want {
				t.Errorf("Covers = %v, want %v", got, tc.want)
			}
			if !sh.Covers(s) {
				t.Error("the original no longer covered after changing its clone")
			}
		})
	}
}

// TestSharedRefs: the last of n copies to drop a Shared is told so, and
// copies added later count too; Bytes is what the values hold.
func TestSharedRefs(t *testing.T) {
	s := New(1, 0, "")
	s.Fields["v"] = make([]byte, 1000)
	s.Fields["n"] = int64(1)
	sh := Share(s, 2)
	if sh.Bytes != 1008 || s.ValueBytes() != 1008 || s.Size() != 1008+sampleOverhead+2*fieldOverhead+2 {
		t.Fatalf("Bytes %d, ValueBytes %d, Size %d", sh.Bytes, s.ValueBytes(), s.Size())
	}
	sh.AddRefs(1)
	for i, want := range []bool{false, false, true} {
		if got := sh.Drop(); got != want {
			t.Fatalf("drop %d: last = %v, want %v", i+1, got, want)
		}
	}
	s.Held, s.SharedPart = 200, 504
	if s.Charge() != 704 {
		t.Errorf("Charge = %d, want 704", s.Charge())
	}
}

// TestNormalizeNamesWhatItRefuses: a value no field can hold is named as a
// spec's author knows it, not by its Go type (fromJSON gives a map).
func TestNormalizeNamesWhatItRefuses(t *testing.T) {
	const can = " cannot be a sample's value (numbers, strings, bytes, booleans, lists of them and tensors can)"
	for _, tc := range []struct {
		v    any
		want string
	}{
		{map[string]any{"a": 1.0}, "a map ({…})" + can},
		{[]any{1, map[string]any{}}, "a map ({…})" + can},
		{time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), "a time" + can},
		{time.Second, "a duration" + can},
		{struct{}{}, "a value of Go type struct {}" + can},
	} {
		if _, err := Normalize(tc.v); err == nil || err.Error() != tc.want {
			t.Errorf("Normalize(%v): %v, want %q", tc.v, err, tc.want)
		}
	}
}

// TestTextBytes: the bytes of text values, and 0 for the rest.
func TestTextBytes(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int64
	}{
		{"héllo", 6},
		{[]byte{1, 2, 3}, 3},
		{[][]byte{{1}, nil, {2, 3}}, 3},
		{[]string{"ab", "", "c"}, 3},
		{int64(7), 0},
		{tensor.New(tensor.Uint8, 10), 0},
		{nil, 0},
	} {
		if got := TextBytes(tc.v); got != tc.want {
			t.Errorf("TextBytes(%#v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// TestDataSizeIgnoresABorrowedBuffer: an epoch's short batch holds an idle
// full batch's buffer when the pool has one and a buffer of its own when
// not, as timing has it; Size (the budget's charge) follows the buffer,
// DataSize, by which a shuffle and a cache decide, does not, so that a
// seed gives one output.
func TestDataSizeIgnoresABorrowedBuffer(t *testing.T) {
	unbind, ok := tensor.BindPool(func() int64 { return 1 << 30 })
	if !ok {
		t.Skip("the tensor pool is bound by another run in this process")
	}
	defer unbind()
	own := tensor.AllocShort(tensor.Uint8, 32, 8, 224, 224, 3) // nothing idle
	full := tensor.Alloc(tensor.Uint8, 32, 224, 224, 3)
	full.Recycle()
	borrowed := tensor.AllocShort(tensor.Uint8, 32, 8, 224, 224, 3)
	if borrowed.HeldBytes() != 32*224*224*3 {
		t.Fatalf("the short batch holds %d bytes, want the borrowed full buffer's %d", borrowed.HeldBytes(), 32*224*224*3)
	}
	a := &Sample{Fields: map[string]any{"x": own, "label": int64(1)}}
	b := &Sample{Fields: map[string]any{"x": borrowed, "label": int64(1)}}
	if a.DataSize() != b.DataSize() || a.DataSize() != a.Size() {
		t.Errorf("DataSize %d with its own buffer, %d with a borrowed one; want both the Size of the first, %d", a.DataSize(), b.DataSize(), a.Size())
	}
	if b.Size()-a.Size() != 24*224*224*3 {
		t.Errorf("Size %d with a borrowed buffer, %d without: want the borrowed rows' %d more", b.Size(), a.Size(), 24*224*224*3)
	}
}
