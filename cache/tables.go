package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
)

// errNotATable says a table file does not read as one of Badger's.
var errNotATable = errors.New("not a Badger table")

// checkTables reads every table that the MANIFEST of the Badger store at
// path lists as Badger's open would, before Badger opens it. Badger opens
// tables on goroutines of its own and trusts their footers: a footer of
// garbage (a file cut short, a flipped length) panics there, or exits the
// process, and nothing can recover it. Here the same reading runs on the
// caller's goroutine, under recover, from a copy in memory, and every
// block's checksum is verified too. A table that does not hold together
// is an error wrapping errNotATable, naming the file; the system refusing
// to read one is its own error. Tables MANIFEST does not list are left
// alone: Badger deletes them (a table a crash left half written before it
// was recorded). A store with no MANIFEST is new, and one whose MANIFEST
// does not replay is Badger's to report, in its own words.
func checkTables(path string, opt badger.Options) error {
	f, err := os.Open(filepath.Join(path, badger.ManifestFilename))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	mf, _, err := badger.ReplayManifestFile(f, opt.ExternalMagicVersion, opt)
	if err != nil {
		return nil
	}
	var buf []byte
	for _, id := range slices.Sorted(maps.Keys(mf.Tables)) {
		name := table.NewFilename(id, path)
		data, err := readInto(buf, name)
		if errors.Is(err, os.ErrNotExist) {
			continue // Badger says "file does not exist for table N"
		}
		if err != nil {
			return err
		}
		buf = data
		topt := &table.Options{Compression: mf.Tables[id].Compression, BlockSize: opt.BlockSize, ChkMode: options.NoVerification}
		if err := checkTable(id, data, topt); err != nil {
			return fmt.Errorf("table %s: %w", filepath.Base(name), err)
		}
	}
	return nil
}

// readInto reads the file name into buf, grown as needed: the tables of a
// cache of small samples run to hundreds of megabytes, read one at a time.
func readInto(buf []byte, name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	n := int(fi.Size())
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// footerBytes is the least a table ends with: the index's length and the
// checksum's, 4 bytes each.
const footerBytes = 8

// checkTable checks the bytes of table id.
func checkTable(id uint64, data []byte, opt *table.Options) (err error) {
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
	defer func() {
		if r := recover(); r != nil {
			// Badger's own recover in its index reading replaces what went
			// wrong with a banner of debugging lines; keep the first line.
			msg, _, _ := strings.Cut(strings.TrimSpace(fmt.Sprint(r)), "\n")
			err = fmt.Errorf("%w: its index or its blocks do not parse (Badger panicked: %s)", errNotATable, msg)
		}
	}()
	t, err := table.OpenInMemoryTable(data, id, opt)
	if err != nil {
		return fmt.Errorf("%w: %w", errNotATable, err)
	}
	if err := t.VerifyChecksum(); err != nil {
		return fmt.Errorf("%w: %w", errNotATable, err)
	}
	return nil
}
