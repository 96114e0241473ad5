package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
)

// realTable fills a small cache and returns the bytes of its one table
// file, as Badger wrote it.
func realTable(tb testing.TB) []byte {
	tb.Helper()
	dir := tb.TempDir()
	fillBig(tb, dir, true)
	names, err := filepath.Glob(filepath.Join(dir, "fp", badgerName, "*.sst"))
	if err != nil || len(names) != 1 {
		tb.Fatalf("table files %v (%v), want one", names, err)
	}
	b, err := os.ReadFile(names[0])
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzCheckTable feeds checkTable a real table and damaged copies of it:
// it must answer nil or an error wrapping errNotATable, never panic, and
// never let Badger exit the process (its readers call log.Fatal on a read
// past the end).
func FuzzCheckTable(f *testing.F) {
	good := realTable(f)
	if err := checkTest(good); err != nil {
		f.Fatalf("a table Badger wrote: %v", err)
	}
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0xff
		return b
	}
	f.Add(good)
	f.Add(flip(len(good) - 4))     // the checksum's length
	f.Add(flip(len(good) - 1))     // the same, by a little
	f.Add(flip(len(good) - 12))    // the index's length or the checksum
	f.Add(flip(len(good) / 2))     // the index or a block
	f.Add(flip(0))                 // the first block
	f.Add(good[:len(good)/2])      // cut short
	f.Add(good[:7])                // shorter than a footer
	f.Add([]byte{})                // empty
	f.Add(make([]byte, len(good))) // zeros
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkTest(data); err != nil && !errors.Is(err, errNotATable) {
			t.Errorf("checkTable: %v, want an error wrapping errNotATable", err)
		}
	})
}

// TestCheckTableSays checks the words of checkTable's answers to the
// damage a footer can take, each an exact message.
func TestCheckTableSays(t *testing.T) {
	good := realTable(t)
	n := len(good)
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0xff
		return b
	}
	sumLen := int(binary.BigEndian.Uint32(good[n-4:]))
	lenAt := n - 4 - sumLen - 4
	badSum, badIndex := flip(n-4), flip(lenAt)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"good", good, ""},
		{"empty", nil, "not a Badger table: 0 bytes, shorter than a table's footer"},
		{"seven bytes", good[:7], "not a Badger table: 7 bytes, shorter than a table's footer"},
		{"checksum length", badSum, fmt.Sprintf("not a Badger table: its footer gives a checksum of %d bytes, more than the table's %d",
			binary.BigEndian.Uint32(badSum[n-4:]), n)},
		{"index length", badIndex, fmt.Sprintf("not a Badger table: its footer gives an index of %d bytes, more than the %d before it",
			binary.BigEndian.Uint32(badIndex[lenAt:]), lenAt)},
	} {
		err := checkTest(tc.data)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: checkTable = %q, want %q", tc.name, got, tc.want)
		}
	}
	if err := checkTest(flip(n / 2)); !errors.Is(err, errNotATable) {
		t.Errorf("a byte flipped mid-table: %v, want errNotATable", err)
	}
}

// checkTest checks data as table 1 of a store written as piperun's are.
func checkTest(data []byte) error {
	return checkTable(1, data, &table.Options{Compression: options.None})
}

// TestUnlistedTableIsLeftToBadger: a table file that MANIFEST does not
// list (one a crash left half written before Badger recorded it: empty,
// zeros) is not damage. Badger deletes it when it opens the store, and
// the cache opens whole.
func TestUnlistedTableIsLeftToBadger(t *testing.T) {
	for _, orphan := range [][]byte{nil, make([]byte, 512<<10)} {
		dir := t.TempDir()
		fillDay(t, dir, "fp", time.Now(), 0, 20)
		stray := filepath.Join(dir, "fp", badgerName, "000099.sst")
		mustNil(t, os.WriteFile(stray, orphan, 0o644))
		c := openT(t, dir, "fp", Options{})
		checkContents(t, c, 20)
		mustNil(t, c.Close())
		if ms, err := List(dir); err != nil || len(ms) != 1 || ms[0].Damaged != "" {
			t.Errorf("List = %+v, %v; want one healthy cache", ms, err)
		}
	}
}
