package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
)

// errNotATable says a table file does not read as one of Badger's.
var errNotATable = errors.New("not a Badger table")

// checkTables reads every table file of the Badger store at path as
// Badger's open would, before Badger opens it. Badger opens tables on
// goroutines of its own and trusts their footers: a footer of garbage (a
// file cut short, a flipped length) panics there, or exits the process,
// and nothing can recover it. Here the same reading runs on the caller's
// goroutine, under recover, from a copy in memory, and every block's
// checksum is verified too. A table that does not hold together is an
// error wrapping errNotATable, naming the file; the system refusing to
// read one is its own error.
func checkTables(path string) error {
	names, err := filepath.Glob(filepath.Join(path, "*.sst"))
	if err != nil {
		return err
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if err := checkTable(filepath.Base(name), data); err != nil {
			return fmt.Errorf("table %s: %w", filepath.Base(name), err)
		}
	}
	return nil
}

// footerBytes is the least a table ends with: the index's length and the
// checksum's, 4 bytes each.
const footerBytes = 8

// checkTable checks one table's bytes; base is its file name.
func checkTable(base string, data []byte) (err error) {
	// A table ends with its index, the index's length, the index's
	// checksum and the checksum's length (table.initIndex). The lengths are
	// checked here because Badger slices by them unchecked.
	n := len(data)
	if n < footerBytes {
		return fmt.Errorf("%w: %d bytes, shorter than a table's footer", errNotATable, n)
	}
	sumLen := int64(binary.BigEndian.Uint32(data[n-4:]))
	if sumLen > int64(n-footerBytes) {
		return fmt.Errorf("%w: its footer gives a checksum of %d bytes, more than the table's %d", errNotATable, sumLen, n)
	}
	lenAt := n - 4 - int(sumLen) - 4
	if indexLen := int64(binary.BigEndian.Uint32(data[lenAt:])); indexLen > int64(lenAt) {
		return fmt.Errorf("%w: its footer gives an index of %d bytes, more than the %d before it", errNotATable, indexLen, lenAt)
	}
	id, ok := table.ParseFileID(base)
	if !ok {
		return fmt.Errorf("%w: its name is not a table's", errNotATable)
	}
	defer func() {
		if r := recover(); r != nil {
			// Badger's own recover adds lines of debugging: the first says
			// what went wrong.
			msg, _, _ := strings.Cut(strings.TrimSpace(fmt.Sprint(r)), "\n")
			err = fmt.Errorf("%w: reading it panics in Badger (%s)", errNotATable, msg)
		}
	}()
	t, err := table.OpenInMemoryTable(data, id, &table.Options{Compression: options.None, ChkMode: options.NoVerification})
	if err != nil {
		return fmt.Errorf("%w: %w", errNotATable, err)
	}
	if err := t.VerifyChecksum(); err != nil {
		return fmt.Errorf("%w: %w", errNotATable, err)
	}
	return nil
}
