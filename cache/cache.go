// Package cache stores the samples of one pass over a pipeline on disk, so
// that later epochs and later runs read them back instead of redoing the
// work upstream of a cache stage.
//
// A cache lives in DIR/<fingerprint>/: a Badger database (badger/), a
// manifest.json saying what was cached and whether the pass completed, and
// a lock file. Several fingerprints, i.e. versions of a pipeline, can share
// one DIR. Samples are keyed by their int64 ID, big-endian with the sign
// bit flipped, so Badger's key order is ID order.
//
// Unlike tf.data's cache, an interrupted pass is kept: everything written
// before the last Commit survives a crash, and a later run can resume it
// (Has tells which IDs are stored). Only MarkComplete makes the cache
// complete.
package cache

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/piperun/piperun/internal/bytesize"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// File names inside DIR/<fingerprint>/.
const (
	manifestName = "manifest.json"
	lockName     = "lock"
	badgerName   = "badger"
)

// Manifest describes one cache. It is stored as manifest.json next to the
// database so that List can read it while another process has the cache
// open.
type Manifest struct {
	// Fingerprint names the cache directory: a hash of everything upstream
	// of the cache stage that affects its samples.
	Fingerprint string `json:"fingerprint"`
	Pipeline    string `json:"pipeline"`
	Stage       string `json:"stage"`
	// Describe is a human summary of what was fingerprinted.
	Describe string    `json:"describe"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	// Complete is set by MarkComplete once a whole pass was written.
	Complete bool `json:"complete"`
	// Samples and Bytes count the samples and encoded bytes stored at the
	// last Commit. When Open finds more samples than the manifest says
	// (written after the last Commit of a run that crashed), Bytes becomes
	// Badger's estimate, within a few bytes per sample.
	Samples int64 `json:"samples"`
	Bytes   int64 `json:"bytes"`
	// Format is the version of the sample encoding; Open refuses a cache
	// written in another format rather than misread it.
	Format int `json:"format"`
	// SkippedWhenFilled counts, by stage, the samples that the stages above
	// the cache skipped (on_error: skip) in the pass that completed it,
	// and SkipCausesWhenFilled keeps the first causes at each stage, as
	// that run's report had them under skipped and skip_causes: the
	// samples the cache lacks for good. They are set by MarkComplete, {}
	// when nothing was skipped. A partial cache has none: a resumed fill
	// computes every sample not yet stored, the ones skipped before
	// included, so the run that completes the cache counts each skip
	// once. Absent (nil) in a cache completed by a piperun that did not
	// record them: unknown, not none.
	SkippedWhenFilled    map[string]int64    `json:"skipped_when_filled,omitzero"`
	SkipCausesWhenFilled map[string][]string `json:"skip_causes_when_filled,omitempty"`
	// Damaged, when set, says why the cache cannot be used: a run found
	// its store damaged or a sample corrupt, or (set by List, never
	// written) its manifest does not parse or names another fingerprint.
	// Prune removes damaged caches whatever their age.
	//
	// Only damage Badger or piperun positively identifies marks a cache:
	// an open or a read refused by the system (permissions, a full or
	// read-only disk, too few file descriptors, an I/O error) or failing
	// for a reason not known to mean damage fails without marking it.
	Damaged string `json:"damaged,omitempty"`
	// Unreadable, set by List and never written, says why the manifest
	// could not be read when that says nothing about the cache itself
	// (permission denied, an I/O error, too many open files, a directory
	// in its place). Such a cache is neither known healthy nor known
	// damaged: Prune keeps it, whatever its age.
	Unreadable string `json:"unreadable,omitempty"`
}

// Cache is an open on-disk cache. Its methods are safe for concurrent use.
type Cache struct {
	dir  string // DIR/<fingerprint>
	opts Options
	lock *dirLock
	db   *badger.DB

	mu     sync.Mutex
	man    Manifest
	count  int64 // distinct IDs stored, pending ones included
	bytes  int64 // encoded bytes stored, pending ones included
	maxID  int64 // the largest ID stored; Puts above it need no lookup
	anyID  bool  // whether maxID is set
	buf    []byte
	pend   []pending
	pendAt map[int64]int // ID → index in pend
	err    error         // a failed write; the cache refuses further writes
	closed bool
	// skipped and causes are what SetSkippedWhenFilled recorded, for
	// MarkComplete to write; fillSkips says it was called.
	skipped   map[string]int64
	causes    map[string][]string
	fillSkips bool
	// readOnly is set when the database was opened read-only (a complete
	// cache); shared when the directory lock is shared with other readers.
	readOnly, shared bool
	// tablesChecked is set once checkTables has passed: a second openDB
	// of the same Open (read-only after writable, or the reverse) finds
	// only what this process's Badger wrote since, and need not read every
	// table again.
	tablesChecked bool
}

type pending struct {
	id       int64
	off, end int // the encoding in buf
}

var fingerprintRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Open creates or opens the cache DIR/<fingerprint>. For a new cache the
// manifest is meta with the fingerprint, times and counts filled in; for an
// existing one the stored manifest is kept, its LastUsed updated and its
// Pipeline, Stage and Describe replaced by meta's where those are set.
//
// Open counts the keys in the database rather than trusting the manifest:
// after a crash they may hold samples written after the last Commit. If the
// manifest claims a complete cache but the keys disagree with its count,
// the cache is reopened as incomplete.
//
// A cache being written by another process is refused with an error
// naming that process's pid; a complete cache is shared by the processes
// that read it, and refused to one that would write it.
//
// A cache marked damaged (Manifest.Damaged) is tried again: opened by no
// other process, it is opened exclusively, and the mark goes once its
// store opens (a file restored from a backup); a read that finds a
// corrupt sample marks it again. Processes sharing a complete cache never
// clear the mark: one opening it while others read it reads it as they
// do, mark kept.
func Open(dir, fingerprint string, meta Manifest, opts Options) (*Cache, error) {
	if !fingerprintRE.MatchString(fingerprint) {
		return nil, fmt.Errorf("cache: fingerprint %q must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit", fingerprint)
	}
	opts = opts.withDefaults()
	path := filepath.Join(dir, fingerprint)
	// A complete cache is only read, so processes may share it (one per
	// accelerator of a data-parallel job, each reading the same cache):
	// under a shared lock, opening Badger read-only. A process holding it
	// exclusively is repairing it (after a crash) or removing it, briefly:
	// wait a little for it. Anything short of a clean read-only open takes
	// the exclusive lock and starts again.
	deadline := time.Now().Add(sharedWait)
	recheck := markedManifest(path, fingerprint)
	for {
		if !recheck {
			c, busy, err := openShared(path, fingerprint, meta, opts)
			if c != nil || err != nil {
				return c, err
			}
			if busy && time.Now().Before(deadline) {
				time.Sleep(sharedRetry)
				continue
			}
		}
		c, err := openExclusive(path, fingerprint, meta, opts)
		var locked errLocked
		if recheck && errors.As(err, &locked) {
			// Others hold the marked cache: share it with them if they
			// read it, the mark kept, or wait for the one that holds it.
			recheck = false
			continue
		}
		// Readers of a crashed complete cache all find it needs repair,
		// and all but one lose the race for the exclusive lock: they wait
		// for the one repairing it to share it.
		if errors.As(err, &locked) && completeManifest(path, fingerprint) && time.Now().Before(deadline) {
			time.Sleep(sharedRetry)
			continue
		}
		if errors.As(err, &locked) {
			return nil, inUseError("open", path, err)
		}
		return c, err
	}
}

// openExclusive opens the cache at path under the exclusive lock, as a
// writer.
func openExclusive(path, fingerprint string, meta Manifest, opts Options) (*Cache, error) {
	lock, err := lockDir(path)
	if err != nil {
		var locked errLocked
		if errors.As(err, &locked) {
			return nil, locked // Open words it, once it stops waiting
		}
		return nil, inUseError("open", path, err)
	}
	c := &Cache{dir: path, opts: opts, lock: lock, pendAt: make(map[int64]int)}
	if err := c.open(fingerprint, meta); err != nil {
		if c.db != nil {
			c.db.Close()
		}
		c.markDamaged(err)
		lock.unlock()
		return nil, err
	}
	// A complete cache is only read from here: share it. One opened
	// read-only (it became complete after openShared looked) needs only
	// the lock shared; one that needed a writable open (Badger had a log
	// to truncate after a crash) is repaired now and reopened read-only.
	if c.man.Complete && c.readOnly && readOnlyWorks {
		if err := c.lock.share(); err != nil {
			c.db.Close()
			lock.unlock()
			return nil, fmt.Errorf("cache: share %s: %w", c.dir, err)
		}
		c.shared = true
	}
	if c.man.Complete && !c.readOnly && readOnlyWorks {
		if err := c.reopenShared(); err != nil {
			if c.db != nil {
				c.db.Close()
			}
			lock.unlock()
			return nil, err
		}
	}
	return c, nil
}

// completeManifest reports whether path's manifest says a complete cache
// of fingerprint in this format.
func completeManifest(path, fingerprint string) bool {
	m, err := readManifest(path)
	return err == nil && m.Complete && m.Fingerprint == fingerprint && m.Format == codecVersion
}

// markedManifest reports whether path's manifest is fingerprint's and
// marked damaged.
func markedManifest(path, fingerprint string) bool {
	m, err := readManifest(path)
	return err == nil && m.Damaged != "" && m.Fingerprint == fingerprint
}

// sharedWait bounds how long Open waits for a process holding a complete
// cache exclusively (repairing or removing it); sharedRetry is the step.
const (
	sharedWait  = 5 * time.Second
	sharedRetry = 50 * time.Millisecond
)

// readOnlyWorks is false where Badger cannot open a database read-only
// (Windows), so that a complete cache is not tried read-only first there.
const readOnlyWorks = runtime.GOOS != "windows"

// openShared opens the complete cache at path as one of its readers. It
// returns nil and no error when that is not the way: the manifest does not
// say complete, or the cache needs a writer (busy is false), or another
// process holds it exclusively (busy is true).
func openShared(path, fingerprint string, meta Manifest, opts Options) (c *Cache, busy bool, err error) {
	if !readOnlyWorks || !completeManifest(path, fingerprint) {
		return nil, false, nil
	}
	lock, err := lockDirShared(path)
	if err != nil {
		var locked errLocked
		return nil, errors.As(err, &locked), nil
	}
	c = &Cache{dir: path, opts: opts, lock: lock, shared: true, pendAt: make(map[int64]int)}
	err = c.open(fingerprint, meta)
	if err == nil {
		return c, false, nil
	}
	if c.db != nil {
		c.db.Close()
	}
	lock.unlock()
	if errors.Is(err, errNeedsWriter) {
		return nil, false, nil
	}
	return nil, false, err
}

// reopenShared turns a writable open of a complete cache into a shared,
// read-only one.
func (c *Cache) reopenShared() error {
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("cache: close %s: %w", c.dir, err)
	}
	c.db = nil
	if err := c.lock.share(); err != nil {
		return fmt.Errorf("cache: share %s: %w", c.dir, err)
	}
	c.shared = true
	return c.openDB(true)
}

// errNeedsWriter tells Open that a cache opened as a shared reader needs
// the exclusive lock: its manifest said complete, but the database could
// not be opened read-only or disagrees with it.
var errNeedsWriter = errors.New("cache needs a writer")

// inUseError turns a lock failure into the error users see.
func inUseError(op, path string, err error) error {
	var locked errLocked
	if !errors.As(err, &locked) {
		return fmt.Errorf("cache: %s %s: %w", op, path, err)
	}
	if locked.readers {
		return fmt.Errorf("cache: %s is being read by other piperun processes", path)
	}
	if locked.pid > 0 {
		return fmt.Errorf("cache: %s is in use by another piperun process (pid %d)", path, locked.pid)
	}
	return fmt.Errorf("cache: %s is in use by another piperun process", path)
}

func (c *Cache) open(fingerprint string, meta Manifest) error {
	now := c.opts.Now()
	old, err := readManifest(c.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		c.man = Manifest{Fingerprint: fingerprint, Pipeline: meta.Pipeline, Stage: meta.Stage,
			Describe: meta.Describe, Created: now, Format: codecVersion}
	case err != nil:
		var de *DamagedError
		if errors.As(err, &de) {
			return err // it names the cache and the way out already
		}
		return fmt.Errorf("cache: open %s: %w", c.dir, err)
	default:
		if old.Fingerprint != fingerprint {
			return misnamed(c.dir, old.Fingerprint, fingerprint)
		}
		if old.Format != codecVersion {
			return fmt.Errorf("cache: %s was written in sample format %d, this piperun reads %d; remove it", c.dir, old.Format, codecVersion)
		}
		c.man = old
		if meta.Pipeline != "" {
			c.man.Pipeline = meta.Pipeline
		}
		if meta.Stage != "" {
			c.man.Stage = meta.Stage
		}
		if meta.Describe != "" {
			c.man.Describe = meta.Describe
		}
	}
	c.man.LastUsed = now
	// The manifest goes first: a directory with a database but no manifest
	// would be invisible to List and Prune. A reader sharing the cache
	// (whose manifest is there) writes it once the store has opened.
	if !c.shared {
		if err := c.touchManifest(); err != nil {
			return err
		}
	}
	// A complete cache is only read, so it is opened read-only: a
	// writable open scans the whole last value log to find where to append
	// (the whole of a cache written in one pass: 170 ms for 120 MB, three
	// times the 50 ms of reading the samples back) and starts a new one.
	// A read-only open that fails (a log left to truncate by a crash) or
	// finds the manifest wrong falls back to a writable one.
	if err := c.openDB(c.man.Complete); err != nil {
		return err
	}
	if c.readOnly && c.count != c.man.Samples {
		if c.shared {
			return errNeedsWriter
		}
		if err := c.db.Close(); err != nil {
			return fmt.Errorf("cache: close %s: %w", c.dir, err)
		}
		c.db = nil
		if err := c.openDB(false); err != nil {
			return err
		}
	}
	if c.count != c.man.Samples {
		if c.man.Complete {
			c.logf("cache: %s: manifest says %d samples in a complete cache, the database holds %d; treating it as incomplete", c.dir, c.man.Samples, c.count)
			c.man.Complete = false
		}
		c.man.Samples = c.count
		c.man.Bytes = c.bytes
	} else {
		// Badger only approximates the size of values in its value log;
		// the manifest's figure, written at Commit, is exact.
		c.bytes = c.man.Bytes
	}
	if !c.man.Complete {
		// Only a complete cache has a record of its fill's skips; the run
		// that completes this one records them anew.
		c.man.SkippedWhenFilled, c.man.SkipCausesWhenFilled = nil, nil
	}
	if c.shared {
		// Others may be reading the cache, and one may have marked it
		// damaged since we read the manifest: a reader changes only what
		// this open sets, and never clears a mark.
		return c.updateShared(func(m *Manifest) {
			m.LastUsed = now
			if meta.Pipeline != "" {
				m.Pipeline = meta.Pipeline
			}
			if meta.Stage != "" {
				m.Stage = meta.Stage
			}
			if meta.Describe != "" {
				m.Describe = meta.Describe
			}
		})
	}
	// A mark left by an earlier run is tried again, not trusted: the
	// damage may have been repaired (a file restored from a backup). Only
	// now that the store has opened, under the exclusive lock, does it
	// go; an open that failed kept it, and one that found damage again
	// marked the cache again. A read that finds a corrupt sample marks it
	// again.
	c.man.Damaged = ""
	return c.touchManifest()
}

// openDB opens the Badger database and counts its keys; readOnly tries a
// read-only open first.
func (c *Cache) openDB(readOnly bool) error {
	path := filepath.Join(c.dir, badgerName)
	c.count, c.bytes, c.maxID, c.anyID = 0, 0, 0, false
	if c.shared && !readOnly {
		// The manifest changed between Open's look and ours (a prune, a
		// repair): writing needs the exclusive lock.
		return errNeedsWriter
	}
	if err := checkDescriptors(path); err != nil {
		return fmt.Errorf("cache: open %s: %w", c.dir, err)
	}
	if !c.tablesChecked {
		if err := checkTables(path, c.opts.badgerOptions(path)); err != nil {
			if !errors.Is(err, errNotATable) {
				return fmt.Errorf("cache: open %s: %w", c.dir, err)
			}
			if c.shared {
				return errNeedsWriter // the writer marks the damage
			}
			return &DamagedError{Dir: c.dir, Reason: fmt.Sprintf("its Badger store %s does not open (%s)", path, oneLine(err)), Err: err}
		}
		c.tablesChecked = true
	}
	if readOnly && readOnlyWorks {
		db, err := badger.Open(c.opts.badgerOptions(path).WithReadOnly(true))
		if err == nil {
			c.db, c.readOnly = db, true
			return c.scan()
		}
		if c.shared {
			return errNeedsWriter
		}
		c.logf("cache: %s: read-only open failed (%s); opening it for writing", c.dir, oneLine(err))
	}
	db, err := badger.Open(c.opts.badgerOptions(path))
	if err != nil {
		// Our lock keeps piperun processes out; Badger's catches anything
		// else that opened the database directly.
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			return fmt.Errorf("cache: %s is in use by another process: %w", c.dir, err)
		}
		// Badger's own words ("file does not exist for table 1") name
		// neither the cache nor a way out. Only words known to mean
		// damage make the cache damaged, which marks it for Prune to
		// remove: anything else, the system's refusals first, fails as
		// it is, and the cache is left alone.
		if badgerDamage(err) {
			return &DamagedError{Dir: c.dir, Reason: fmt.Sprintf("its Badger store %s does not open (%s)", path, oneLine(err)), Err: err}
		}
		return fmt.Errorf("cache: open %s: %w", c.dir, err)
	}
	c.db, c.readOnly = db, false
	return c.scan()
}

// oneLine is err's text on one line: Badger's can hold the system's
// newlines ("truncate …\nerror while truncation"), which broke a log line
// and a cache listing in two.
func oneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}

// badgerDamageWords are what Badger (v4) says, in the error of a writable
// open, about a store whose files are damaged: removing the cache and
// filling it again cures it, and nothing short of that does. Badger
// flattens most errors into text (y.Wrap), so words are all there is.
var badgerDamageWords = []string{
	// MANIFEST lists a table whose file is gone.
	"file does not exist for table",
	// MANIFEST: garbage or cut short before its header, a changeset that
	// fails its CRC or does not fit the file, or one that makes no sense.
	"manifest has bad magic",
	"manifest has checksum mismatch",
	"manifest has unsupported version",
	"external magic number doesn't match",
	"Manifest file might be corrupted",
	"MANIFEST invalid",
	"MANIFEST file has invalid manifestChange op",
	// Tables whose key ranges overlap where MANIFEST puts them.
	"Level validation",
	// A table file whose index or checksums do not verify.
	"failed to initialize table",
	"failed to verify checksum",
	"checksum mismatch",
	// KEYREGISTRY: cut short, or its check text wrong (piperun sets no
	// encryption key, so no key can be the wrong one).
	"for key registry",
	"reading sanity text",
	"Encryption key mismatch",
	// A value log or memtable file whose header names a key the registry
	// lacks (garbage in it), or one left empty, which Badger never writes.
	"Invalid datakey id",
	"err: Create a new file",
}

// systemErrnos are the errors of the system refusing (permissions, a
// read-only or full disk, too few file descriptors or too little memory,
// a failing disk) rather than of damaged files: removing the cache would
// not cure them.
var systemErrnos = []syscall.Errno{syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT,
	syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EIO, syscall.EAGAIN, syscall.EINTR, syscall.EBUSY}

// badgerDamage reports whether err, from a writable open of a Badger
// store, positively says its files are damaged. An error from the system
// never does, whether it comes as an errno or, flattened by Badger, as
// the errno's words ("Error while opening key registry. err: open
// .../KEYREGISTRY: too many open files"); nor does one Badger words in a
// way not known to mean damage.
func badgerDamage(err error) bool {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return false
	}
	msg := err.Error()
	for _, e := range systemErrnos {
		if strings.Contains(msg, e.Error()) {
			return false
		}
	}
	for _, w := range badgerDamageWords {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// scan counts the stored keys without reading values.
func (c *Cache) scan() error {
	return c.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			id, ok := keyID(item.Key())
			if !ok {
				return &DamagedError{Dir: c.dir, Reason: fmt.Sprintf("its Badger store holds a key piperun never writes (%x)", item.Key())}
			}
			c.count++
			c.bytes += item.ValueSize()
			c.maxID, c.anyID = id, true // keys come in ID order
		}
		return nil
	})
}

// key encodes id big-endian with the sign bit flipped, so that byte order
// is numeric order for every int64.
func key(id int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(id)^(1<<63))
}

func keyID(k []byte) (int64, bool) {
	if len(k) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k) ^ (1 << 63)), true
}

func (c *Cache) logf(format string, args ...any) {
	if c.opts.Logf != nil {
		c.opts.Logf(format, args...)
	}
}

// Dir returns the cache's directory, DIR/<fingerprint>.
func (c *Cache) Dir() string { return c.dir }

// Put stores s under id, replacing a sample stored under the same id. It
// buffers up to Options.BatchBytes of encoded samples before writing them
// to Badger; Commit makes them durable. Put fails on a complete cache and
// on values the encoding cannot hold.
func (c *Cache) Put(id int64, s *sample.Sample) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writable(); err != nil {
		return err
	}
	if v := payloadBytes(s); v > maxValueBytes {
		// Refused before encoding it: a copy of a sample that size is
		// memory beyond the budget for nothing.
		return fmt.Errorf("cache: sample %d takes at least %.1f MiB stored, more than the %.0f MiB a disk cache holds for one sample (Badger's value log file): cache below a stage that makes samples smaller, or in memory (no dir:)",
			id, float64(v)/(1<<20), float64(maxValueBytes)/(1<<20))
	}
	off := len(c.buf)
	buf, err := encode(c.buf, s)
	if err != nil {
		return fmt.Errorf("cache: put %d: %w", id, err)
	}
	size := int64(len(buf) - off)
	if size > maxValueBytes {
		// Badger refuses it at the commit, with the value's bytes in hex
		// in its message (68 lines of a log and a
		// report), and the samples pending with it unwritten.
		c.buf = buf[:off]
		return fmt.Errorf("cache: sample %d takes %.1f MiB stored, more than the %.0f MiB a disk cache holds for one sample (Badger's value log file): cache below a stage that makes samples smaller, or in memory (no dir:)",
			id, float64(size)/(1<<20), float64(maxValueBytes)/(1<<20))
	}
	c.buf = buf
	if i, ok := c.pendAt[id]; ok {
		old := c.pend[i]
		c.bytes += size - int64(old.end-old.off)
		c.pend[i] = pending{id, off, len(buf)}
	} else {
		// IDs arrive in increasing order in a first pass, so the lookup is
		// needed only when resuming or overwriting.
		if c.anyID && id <= c.maxID {
			old, found, err := c.stored(id)
			if err != nil {
				return err
			}
			if found {
				c.bytes -= old
			} else {
				c.count++
			}
		} else {
			c.count++
		}
		c.bytes += size
		c.pendAt[id] = len(c.pend)
		c.pend = append(c.pend, pending{id, off, len(buf)})
	}
	if int64(len(c.buf)) >= c.opts.BatchBytes {
		return c.flush()
	}
	return nil
}

func (c *Cache) writable() error {
	switch {
	case c.closed:
		return errors.New("cache: closed")
	case c.err != nil:
		return c.err
	case c.man.Complete:
		return fmt.Errorf("cache: %s is complete; it takes no more samples", c.dir)
	}
	return nil
}

// noDB is the error of a cache whose database a failed reopen left closed.
func (c *Cache) noDB() error {
	if c.err != nil {
		return c.err
	}
	return fmt.Errorf("cache: %s has no open database", c.dir)
}

// stored reports whether id is in the database and the size of its value.
func (c *Cache) stored(id int64) (size int64, found bool, err error) {
	if c.db == nil {
		return 0, false, c.noDB()
	}
	err = c.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		// ValueSize only estimates values in the value log; reading the
		// mapped value costs no copy and keeps Bytes exact.
		found = true
		return item.Value(func(v []byte) error {
			if len(v) == 0 {
				// Counting a corrupt value as a sample of 0 bytes would
				// make Bytes drift and hide the damage until a read.
				return c.corrupt(id, nil)
			}
			size = int64(len(v))
			return nil
		})
	})
	var ce *CorruptError
	if errors.As(err, &ce) {
		c.markCorrupt(ce)
		return 0, false, ce
	}
	if err != nil {
		return 0, false, fmt.Errorf("cache: %s: lookup %d: %w", c.dir, id, err)
	}
	return size, found, nil
}

// ErrCorrupt matches, with errors.Is, every error reporting a stored sample
// that cannot be read back; the error itself is a *CorruptError.
var ErrCorrupt = errors.New("cache: corrupt sample")

// CorruptError reports a sample the cache stores but cannot read back: its
// bytes on disk are not what Put wrote. The cache must be removed and
// filled again; see Error for how.
type CorruptError struct {
	// Dir is the cache's directory, DIR/<fingerprint>.
	Dir string
	// ID is the sample's ID.
	ID int64
	// Err is why the stored bytes do not decode, or nil when Badger handed
	// back no bytes at all.
	Err error
	// Unrecorded says the damage could not be written to the manifest (a
	// read-only cache), so "prune --damaged" does not know of it.
	Unrecorded bool
}

// unrecordedNote is what a damaged cache's error says when its manifest
// could not record the damage.
const unrecordedNote = "; its manifest could not record the damage (read-only?), so \"piperun cache prune --damaged\" does not know of it: remove the directory"

// Error implements error.
func (e *CorruptError) Error() string {
	// Badger logs a value log checksum mismatch (or a value cut short by a
	// truncated file, or one in a value log file that was deleted) and
	// hands back an empty value instead of an error, so an empty value is
	// all that is left of the cause here.
	cause := "checksum mismatch, truncated value or missing value log file"
	if e.Err != nil {
		cause = e.Err.Error()
	}
	// The read that found the damage marked the manifest (markCorrupt),
	// so "prune --damaged" removes this cache and leaves healthy ones.
	if e.Unrecorded {
		return fmt.Sprintf("cache %s: sample %d is corrupt (%s)%s (rm -r %s), then run again to refill it", e.Dir, e.ID, cause, unrecordedNote, e.Dir)
	}
	return fmt.Sprintf("cache %s: sample %d is corrupt (%s); remove the directory (rm -r %s) or run "+
		"\"piperun cache prune %s --damaged\", then run again to refill it", e.Dir, e.ID, cause, e.Dir, filepath.Dir(e.Dir))
}

// Unwrap returns the decode error, if that is what revealed the damage.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true for every CorruptError.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func (c *Cache) corrupt(id int64, err error) *CorruptError {
	return &CorruptError{Dir: c.dir, ID: id, Err: err}
}

// ErrDamaged matches, with errors.Is, every error reporting a cache that
// cannot be opened because its files are damaged; the error itself is a
// *DamagedError.
var ErrDamaged = errors.New("cache: damaged")

// DamagedError reports a cache whose manifest or Badger store cannot be
// read. Nothing in it can be trusted, so it must be removed and filled
// again; see Error for how.
type DamagedError struct {
	// Dir is the cache's directory, DIR/<fingerprint>.
	Dir string
	// Reason says which file is damaged and how, naming it by its path.
	Reason string
	// Err is the error that revealed the damage, if any.
	Err error
	// Unrecorded says the damage could not be written to the manifest.
	Unrecorded bool
}

// Error implements error.
func (e *DamagedError) Error() string {
	if e.Unrecorded {
		return fmt.Sprintf("cache %s is damaged: %s%s (rm -r %s), then run again to refill it", e.Dir, e.Reason, unrecordedNote, e.Dir)
	}
	// "prune --damaged" removes only damaged caches: the healthy ones
	// next to it may have cost hours to fill.
	return fmt.Sprintf("cache %s is damaged: %s; remove it (rm -r %s) or run \"piperun cache prune %s --damaged\", "+
		"then run again to refill it", e.Dir, e.Reason, e.Dir, filepath.Dir(e.Dir))
}

// Unwrap returns the error that revealed the damage.
func (e *DamagedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDamaged) true for every DamagedError.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// misnamed is the error of a manifest that names another fingerprint than
// its directory's: copied or edited by hand, it describes some other
// cache, so nothing says what this store holds.
func misnamed(dir, got, want string) *DamagedError {
	return &DamagedError{Dir: dir, Reason: fmt.Sprintf("manifest %s names fingerprint %q, not %q",
		filepath.Join(dir, manifestName), got, want)}
}

// markDamaged records in the manifest why an open of the cache failed, if
// err says its files are damaged, so that List shows it and Prune removes
// it. Only a cache whose manifest was read is marked: a manifest that
// cannot be read is found damaged by List anyway, and is kept as it is
// for whoever looks into why. The caller holds the exclusive lock.
func (c *Cache) markDamaged(err error) {
	var de *DamagedError
	if !errors.As(err, &de) || c.man.Fingerprint == "" || filepath.Base(c.dir) != c.man.Fingerprint {
		return
	}
	c.man.Damaged = de.Reason
	// Best effort: the open fails with the same words either way.
	if werr := writeManifest(c.dir, c.man); werr != nil {
		c.logf("cache: %s: recording the damage in the manifest: %v", c.dir, werr)
		de.Unrecorded = true
	}
}

// markCorrupt records a corrupt sample of this cache that a read found,
// like markDamaged; err may be any error, a CorruptError of another cache
// (which a caller's function handed to Iterate) included, and only one of
// this cache's marks it. The caller holds c.mu. A reader sharing a
// complete cache re-reads the manifest and sets Damaged only where no
// mark is there yet: the first reader to find damage names it, and no
// other reader's write (of LastUsed, on Close) takes the mark away.
func (c *Cache) markCorrupt(err error) {
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Dir != c.dir || c.man.Damaged != "" {
		return
	}
	reason := fmt.Sprintf("sample %d is corrupt", ce.ID)
	var werr error
	if c.shared {
		werr = c.updateShared(func(m *Manifest) {
			if m.Damaged == "" {
				m.Damaged = reason
			}
		})
	} else {
		c.man.Damaged = reason
		werr = writeManifest(c.dir, c.man)
	}
	if werr != nil {
		c.logf("cache: %s: recording the damage in the manifest: %v", c.dir, werr)
		ce.Unrecorded = true
	}
}

// updateShared changes the manifest on disk as change says, for a reader
// sharing the cache with others: it reads the manifest again and changes
// only what change does, so that readers writing it do not undo each
// other's writes (a mark of damage one found, undone by another's
// LastUsed). Readers on this machine take turns (lockManifest). A
// manifest that no longer reads as this cache's is left as it is, for
// List to show; a complete cache's on a read-only medium is not written
// (see touchManifest). c.man becomes the manifest as changed. The caller
// holds c.mu.
func (c *Cache) updateShared(change func(*Manifest)) error {
	unlock := lockManifest(c.dir)
	defer unlock()
	m, err := readManifest(c.dir)
	if err == nil && m.Fingerprint != c.man.Fingerprint {
		err = misnamed(c.dir, m.Fingerprint, c.man.Fingerprint)
	}
	if err != nil {
		change(&c.man)
		c.logf("cache: %s: manifest left as it is: %v", c.dir, err)
		return nil
	}
	change(&m)
	c.man = m
	err = writeManifest(c.dir, m)
	if err != nil && m.Complete && readOnlyMedium(err) {
		return nil
	}
	return err
}

// decodeStored decodes the stored value of id. Every sample's encoding
// holds at least its header (see encode), so an empty value is never one
// that Put wrote: it is what Badger returns for a value it could not read.
// Nor can a value Put wrote fail to decode, as Open refuses caches written
// in another format; either way the stored bytes are damaged.
func (c *Cache) decodeStored(id int64, v []byte) (*sample.Sample, error) {
	if len(v) == 0 {
		return nil, c.corrupt(id, nil)
	}
	// A copy, not an alias: the value lives in Badger's mapped files only
	// for the transaction, and the sample outlives it.
	s, err := decode(v, false)
	if err != nil {
		return nil, c.corrupt(id, err)
	}
	return s, nil
}

// payloadBytes is a lower bound of what s takes encoded: the bytes of its
// tensors, strings and byte strings.
func payloadBytes(s *sample.Sample) int64 {
	var n int64
	for _, v := range s.Fields {
		if t, ok := v.(*tensor.Tensor); ok {
			n += int64(len(t.Data))
		} else {
			n += sample.TextBytes(v)
		}
	}
	return n
}

// checkRoom refuses to write on with less room on the disk than this
// flush may fill in the files Badger maps into memory: the batch, in the
// value log, and the memtables, with a margin. A page of a mapped file
// that a full disk cannot back ends the process with SIGBUS, no error to
// return (a fill on a full tmpfs did, exit 2, no report); tables Badger
// writes as files fail with an error of their own.
func (c *Cache) checkRoom() error {
	free, err := freeBytes(c.dir)
	if err != nil || free < 0 {
		return nil // unknown: Badger's own errors, where it gives them
	}
	need := int64(len(c.buf)) + int64(c.opts.NumMemtables+1)*c.opts.MemTableSize + roomMargin
	if free < need {
		return fmt.Errorf("cache: %s: the disk has %s free, less than the %s a cache needs to write on (Badger maps its files into memory, and a full disk would end the process with SIGBUS): free some space, or set the cache's dir on another disk", c.dir, bytesize.Format(free), bytesize.Format(need))
	}
	return nil
}

// roomMargin is what checkRoom leaves beyond a flush's own bytes: the
// value log's and memtables' headers, the manifest, a table flushed.
const roomMargin = 16 << 20

// flush writes the pending samples to Badger, in as many transactions as
// Badger's batch limits need. It does not sync.
func (c *Cache) flush() error {
	if len(c.pend) == 0 {
		return nil
	}
	if err := c.checkRoom(); err != nil {
		return err
	}
	txn := c.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, p := range c.pend {
		e := badger.NewEntry(key(p.id), c.buf[p.off:p.end])
		err := txn.SetEntry(e)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err == nil {
				txn = c.db.NewTransaction(true)
				err = txn.SetEntry(e)
			}
		}
		if err != nil {
			return c.fail(err)
		}
	}
	if err := txn.Commit(); err != nil {
		return c.fail(err)
	}
	for _, p := range c.pend {
		if !c.anyID || p.id > c.maxID {
			c.maxID, c.anyID = p.id, true
		}
	}
	// Badger copied the values into its logs and memtable when Commit
	// returned, so the buffer can be reused.
	c.buf = c.buf[:0]
	if int64(cap(c.buf)) > 2*c.opts.BatchBytes {
		c.buf = nil // one oversized sample must not pin its buffer forever
	}
	c.pend = c.pend[:0]
	clear(c.pendAt)
	return nil
}

// fail records a write error: after it the counts may not match the
// database, so the cache takes no more writes; reopening it recounts.
func (c *Cache) fail(err error) error {
	c.err = fmt.Errorf("cache: write %s: %w", c.dir, err)
	return c.err
}

// Commit writes what was Put so far, syncs it to disk and records the
// counts in the manifest. After Commit returns, those samples survive a
// crash of the process or the machine.
func (c *Cache) Commit() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writable(); err != nil {
		return err
	}
	return c.commit()
}

func (c *Cache) commit() error {
	if err := c.flush(); err != nil {
		return err
	}
	if err := c.db.Sync(); err != nil {
		return c.fail(err)
	}
	c.man.Samples, c.man.Bytes = c.count, c.bytes
	c.man.LastUsed = c.opts.Now()
	return writeManifest(c.dir, c.man)
}

// SetSkippedWhenFilled gives the samples skipped above the cache in the
// pass that fills it, by stage, with their first causes, for MarkComplete
// to record in the manifest (Manifest.SkippedWhenFilled). Without it
// MarkComplete records none: unknown. The cache keeps its own copies.
func (c *Cache) SetSkippedWhenFilled(skipped map[string]int64, causes map[string][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.skipped, c.causes, c.fillSkips = maps.Clone(skipped), maps.Clone(causes), true
	if c.skipped == nil {
		c.skipped = map[string]int64{} // known: none
	}
	if len(c.causes) == 0 {
		c.causes = nil
	}
}

// MarkComplete commits and records that the cache holds a whole pass.
// After it the cache takes no more Puts.
func (c *Cache) MarkComplete() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.writable(); err != nil {
		return err
	}
	if err := c.commit(); err != nil {
		return err
	}
	c.man.Complete = true
	if c.fillSkips {
		c.man.SkippedWhenFilled, c.man.SkipCausesWhenFilled = c.skipped, c.causes
	}
	if err := writeManifest(c.dir, c.man); err != nil {
		c.man.Complete = false
		c.man.SkippedWhenFilled, c.man.SkipCausesWhenFilled = nil, nil
		return err
	}
	// From here on this process only reads the cache, as others may: let
	// them in now, not when it ends (the first rank of a job fills the
	// cache, and the others, started with it, wait to read it).
	if readOnlyWorks {
		if err := c.reopenShared(); err != nil {
			c.err = fmt.Errorf("cache: reopen %s read-only after completing it: %w", c.dir, err)
			return c.err
		}
	}
	return nil
}

// Has reports whether a sample is stored under id, Put but not yet
// committed ones included.
func (c *Cache) Has(id int64) bool {
	_, ok := c.Stored(id)
	return ok
}

// Stored is Has with the size of the sample's encoding, about what the
// sample takes in memory once read back (its values are stored raw).
func (c *Cache) Stored(id int64) (size int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, false
	}
	if i, ok := c.pendAt[id]; ok {
		return int64(c.pend[i].end - c.pend[i].off), true
	}
	if !c.anyID || id > c.maxID {
		return 0, false
	}
	size, found, err := c.stored(id)
	return size, err == nil && found
}

// Get returns the stored sample with the given ID, Put but not yet
// committed ones included; found is false when there is none.
func (c *Cache) Get(id int64) (s *sample.Sample, found bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, errors.New("cache: get on a closed cache")
	}
	if c.db == nil {
		return nil, false, c.noDB()
	}
	if _, ok := c.pendAt[id]; ok {
		if err := c.flush(); err != nil {
			return nil, false, err
		}
	}
	err = c.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			found = true
			s, err = c.decodeStored(id, v)
			return err
		})
	})
	var ce *CorruptError
	if errors.As(err, &ce) {
		c.markCorrupt(ce)
		return nil, false, ce // it names the cache and the sample already
	}
	if err != nil {
		return nil, false, fmt.Errorf("cache: %s: get %d: %w", c.dir, id, err)
	}
	return s, found, nil
}

// Count returns the number of distinct IDs stored, Put but not yet
// committed ones included.
func (c *Cache) Count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// Manifest returns the manifest as last written.
func (c *Cache) Manifest() Manifest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.man
}

// Iterate calls fn with every stored sample in ID order, Put but not yet
// committed ones included, reading and decoding each on the caller's
// goroutine. Iteration stops at the first error from fn, which Iterate
// returns, or when ctx is cancelled, with ctx's error. The samples are
// fn's to keep: they share no memory with the cache.
//
// Samples come back as they were Put: the caller sets Epoch for the pass
// that reads them.
func (c *Cache) Iterate(ctx context.Context, fn func(s *sample.Sample) error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("cache: closed")
	}
	if c.db == nil {
		c.mu.Unlock()
		return c.noDB()
	}
	if c.err == nil {
		if err := c.flush(); err != nil {
			c.mu.Unlock()
			return err
		}
	}
	c.mu.Unlock()

	// The caller's goroutine reads, decodes and calls fn in turn: the
	// engine owns the goroutines, and the stages below already overlap
	// with this one through its output.
	err := c.db.View(func(txn *badger.Txn) error {
		// Values are decoded straight from the mapped value log, each
		// tensor copied once into a pooled buffer, where Badger's own
		// prefetch would copy twice.
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			id, ok := keyID(item.Key())
			if !ok {
				return fmt.Errorf("cache: %s: unexpected key %x", c.dir, item.Key())
			}
			var s *sample.Sample
			var derr error
			if err := item.Value(func(v []byte) error {
				s, derr = c.decodeStored(id, v)
				return nil
			}); err != nil {
				return fmt.Errorf("cache: %s: read %d: %w", c.dir, id, err)
			}
			if derr != nil {
				return derr
			}
			if err := fn(s); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrCorrupt) {
		c.mu.Lock()
		c.markCorrupt(err)
		c.mu.Unlock()
	}
	return err
}

// Close commits what was Put, closes the database and releases the
// directory. A cache that is not complete stays on disk, resumable.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var errs []error
	if c.err == nil && !c.man.Complete {
		errs = append(errs, c.commit())
	} else if c.err == nil && c.shared {
		now := c.opts.Now()
		errs = append(errs, c.updateShared(func(m *Manifest) { m.LastUsed = now }))
	} else if c.err == nil {
		c.man.LastUsed = c.opts.Now()
		errs = append(errs, c.touchManifest())
	}
	c.closed = true
	if c.db != nil { // a failed reopen leaves none
		if err := c.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("cache: close %s: %w", c.dir, err))
		}
	}

	if err := c.lock.unlock(); err != nil {
		errs = append(errs, fmt.Errorf("cache: unlock %s: %w", c.dir, err))
	}
	return errors.Join(errs...)
}

// readManifest reads dir's manifest. One that does not parse is a
// *DamagedError; one that cannot be read is the error of the read, which
// names the file.
func readManifest(dir string) (Manifest, error) {
	var m Manifest
	path := filepath.Join(dir, manifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, &DamagedError{Dir: dir, Reason: fmt.Sprintf("manifest %s does not parse (%v)", path, err), Err: err}
	}
	return m, nil
}

// touchManifest writes the manifest with its LastUsed. A complete cache
// on a read-only medium (prepared once, mounted read-only for every rank)
// is read without it: its LastUsed stays, which only Prune reads, and
// Prune cannot remove it there anyway.
func (c *Cache) touchManifest() error {
	err := writeManifest(c.dir, c.man)
	if err != nil && c.man.Complete && readOnlyMedium(err) {
		return nil
	}
	return err
}

// readOnlyMedium reports whether err is a write refused by the file
// system or the permissions, not a failure of the disk.
func readOnlyMedium(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// writeManifest replaces manifest.json atomically: a reader sees the old
// or the new file, never a torn one, even across a crash.
func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("cache: manifest: %w", err)
	}
	b = append(b, '\n')
	f, err := os.CreateTemp(dir, manifestName+".tmp-*")
	if err != nil {
		return fmt.Errorf("cache: manifest: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, manifestName))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cache: manifest: %w", err)
	}
	// Syncing the directory makes the rename itself durable.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// List returns the manifests of the caches under dir, most recently used
// first. It reads only manifest files, so it works while other processes
// have caches open. Directories without a manifest or a Badger store are
// not caches and are skipped; a missing dir holds no caches.
//
// A cache whose manifest cannot be read or names another fingerprint is
// listed all the same, so that one damaged cache hides none of the
// others: its manifest has the directory's name as Fingerprint and the
// manifest file's modification time as LastUsed. Damaged says what is
// wrong with a manifest that does not parse or names another
// fingerprint; Unreadable says why one could not be read (permission
// denied, an I/O error, a directory in its place), which is no sign of
// damage.
func List(dir string) ([]Manifest, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache: list: %w", err)
	}
	var out []Manifest
	for _, e := range entries {
		if !e.IsDir() || !fingerprintRE.MatchString(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		m, err := readManifest(path)
		if errors.Is(err, os.ErrNotExist) {
			if !holdsStore(path) {
				continue
			}
			err = &DamagedError{Dir: path, Reason: "no " + manifestName + " beside its Badger store (deleted?): nothing says what it holds"}
		}
		if err == nil && m.Fingerprint != e.Name() {
			err = misnamed(path, m.Fingerprint, e.Name())
		}
		if err != nil {
			m = unreadable(path, err)
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastUsed.Equal(out[j].LastUsed) {
			return out[i].LastUsed.After(out[j].LastUsed)
		}
		return out[i].Fingerprint < out[j].Fingerprint
	})
	return out, nil
}

// holdsStore reports whether the folder at path holds a Badger store.
// Open writes the manifest before it opens the store, and Prune renames a
// cache aside before deleting it, so a store without a manifest beside it
// is one whose manifest was deleted: without this, its disk space would
// be hidden from ls and prune for good.
func holdsStore(path string) bool {
	_, err := os.Lstat(filepath.Join(path, badgerName))
	return err == nil
}

// unreadable is the manifest List gives for a cache at path whose
// manifest could not be read: err says why. Only a *DamagedError (a
// manifest that does not parse, or names another fingerprint) makes it
// damaged; any other error of the read leaves it unreadable.
func unreadable(path string, err error) Manifest {
	m := Manifest{Fingerprint: filepath.Base(path)}
	var de *DamagedError
	if errors.As(err, &de) {
		m.Damaged = de.Reason
	} else {
		m.Unreadable = err.Error()
	}
	if fi, err := os.Lstat(filepath.Join(path, manifestName)); err == nil {
		m.LastUsed = fi.ModTime()
	}
	return m
}

// Prune removes caches under dir last used more than olderThan before now
// (any age when olderThan is 0), always keeping the keepLast most recently
// used ones. Damaged caches (Manifest.Damaged) are removed whatever their
// age and count for none of the keepLast: none of them can be read.
// Caches whose manifest cannot be read (Manifest.Unreadable) are kept,
// whatever their age, and count for none of the keepLast either: nothing
// says what they hold or when they were used. A cache in use by a process
// is never removed, whatever its age or damage; it is skipped, not
// reported as an error. Prune returns the manifests of the caches it
// removed, and of those it would have removed but found in use; a cache
// it fails to remove does not stop it removing the others, and the errors
// come back joined.
func Prune(dir string, olderThan time.Duration, keepLast int, now time.Time) (removed, inUse []Manifest, err error) {
	all, err := List(dir)
	if err != nil {
		return nil, nil, err
	}
	var errs []error
	healthy := 0
	for _, m := range all {
		if m.Unreadable != "" {
			continue
		}
		if m.Damaged == "" {
			healthy++
			if healthy <= keepLast || now.Sub(m.LastUsed) <= olderThan {
				continue
			}
		}
		err := remove(filepath.Join(dir, m.Fingerprint))
		var locked errLocked
		if errors.As(err, &locked) {
			inUse = append(inUse, m)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cache: prune %s: %w", filepath.Join(dir, m.Fingerprint), err))
			continue
		}
		removed = append(removed, m)
	}
	errs = append(errs, removeLeftovers(dir))
	return removed, inUse, errors.Join(errs...)
}

// Remove deletes the cache DIR/<fingerprint>. It fails if a process has
// the cache open; removing a cache that does not exist is not an error.
func Remove(dir, fingerprint string) error {
	if !fingerprintRE.MatchString(fingerprint) {
		return fmt.Errorf("cache: remove: bad fingerprint %q", fingerprint)
	}
	path := filepath.Join(dir, fingerprint)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := remove(path); err != nil {
		return inUseError("remove", path, err)
	}
	return nil
}

// remove deletes a cache directory while holding its lock, so that no
// process can open it halfway through. Holding the lock is not enough on
// its own: deleting the directory in place removed the lock file first,
// and a run starting then created a fresh one, locked it and opened the
// half-deleted store (its tables missing, so it recorded the cache
// damaged; found by a new-user test racing apply and prune). So the
// directory is first renamed aside under its lock, atomically: a run
// starting after the rename makes a fresh cache, and one that opened the
// lock file before it fails to lock it (we hold it) or sees it replaced
// and starts over. Where the rename fails (a system that cannot rename a
// folder holding an open file), it deletes in place as before.
func remove(path string) error {
	lock, err := lockDir(path)
	if err != nil {
		return err
	}
	defer lock.unlock()
	aside := filepath.Join(filepath.Dir(path), fmt.Sprintf("%s%s-%d", pruningPrefix, filepath.Base(path), os.Getpid()))
	if err := os.Rename(path, aside); err == nil {
		path = aside
	}
	if removing != nil {
		removing(path)
	}
	return os.RemoveAll(path)
}

// removing, when set (by tests), is called with the folder remove is about
// to delete, holding its lock.
var removing func(path string)

// pruningPrefix starts the name of a cache directory being removed (remove
// renames it aside first). The leading dot keeps it out of List; one left
// by a pruner that died is removed by the next Prune.
const pruningPrefix = ".pruning-"

// Leftovers lists the folders under dir that a prune renamed aside and
// did not finish deleting (it died): `cache ls` names them, since they
// take disk space it would otherwise not show, and the next Prune
// removes them.
func Leftovers(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), pruningPrefix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// removeLeftovers deletes what pruners that died left renamed aside under
// dir. Nothing can be using them: a run that opened one's lock file before
// the rename failed to lock it, or let it go on finding it moved.
func removeLeftovers(dir string) error {
	var errs []error
	for _, path := range Leftovers(dir) {
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, fmt.Errorf("cache: prune %s: %w", path, err))
		}
	}
	return errors.Join(errs...)
}
