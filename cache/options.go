package cache

import (
	"fmt"
	"math/bits"
	"strings"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/skl"
)

// Options tunes a Cache. The zero value selects the defaults documented on
// each field, which keep Badger small: Badger's own defaults (64 MiB
// memtables × 5, a 256 MiB block cache, 4 compactors) are sized for a
// database server, and a cache that quietly takes half a gigabyte is what
// badger#1268 users met. A cache's values are written once and read in key
// order, so caches and big memtables buy little.
type Options struct {
	// MemTableSize is the size of one Badger memtable; default 4 MiB.
	// Sample values above ValueThreshold live in the value log, so a
	// memtable holds only keys and value pointers (about 60 bytes per
	// sample) and 4 MiB covers tens of thousands of samples.
	MemTableSize int64
	// NumMemtables is how many memtables may wait to be flushed; default 2.
	NumMemtables int
	// BaseTableSize is the size of the SSTables compactions write; default
	// 512 KiB. Every compaction output is built in memory, so this bounds
	// compaction memory (see MemoryBytes).
	BaseTableSize int64
	// BlockCacheSize and IndexCacheSize are Badger's caches; default 0.
	// Without compression or encryption Badger reads blocks and indexes
	// straight from the memory-mapped tables, so the caches would only
	// duplicate the page cache.
	BlockCacheSize int64
	IndexCacheSize int64
	// ValueThreshold is the value size from which Badger stores a value in
	// the value log instead of the LSM tree; default 1 KiB. Keeping large
	// samples out of the LSM tree keeps memtables and compactions small.
	ValueThreshold int64
	// NumCompactors is Badger's number of compaction goroutines; default 2,
	// the least Badger allows with compaction on.
	NumCompactors int
	// BatchBytes bounds the encoded samples Put holds before writing them
	// to Badger; default 4 MiB. A single sample larger than BatchBytes is
	// written on its own.
	BatchBytes int64
	// Logf receives Badger's warnings and errors and the cache's own
	// warnings; nil drops them. Info and debug messages are always dropped,
	// so everything Logf gets deserves a warning level: among them is
	// Badger's only report of a value that failed its checksum ("Unable to
	// read: ... checksum mismatch"), which the read itself then reports as
	// a CorruptError without the cause.
	Logf func(format string, args ...any)
	// Now returns the current time for the manifest; nil means time.Now.
	Now func() time.Time
}

// Defaults and Badger settings that are not Options.
const (
	defaultMemTableSize   = 4 << 20
	defaultNumMemtables   = 2
	defaultBaseTableSize  = 512 << 10
	defaultValueThreshold = 1 << 10
	defaultNumCompactors  = 2
	defaultBatchBytes     = 4 << 20

	// numLevelZeroTables and numLevelZeroTablesStall are lower than Badger's
	// 5 and 15 because an L0→L0 compaction merges every L0 table into one
	// table built in memory; stalling writes earlier bounds that table.
	numLevelZeroTables      = 3
	numLevelZeroTablesStall = 6
	// valueLogFileSize is smaller than Badger's 1 GiB so that a small cache
	// does not map a gigabyte of address space.
	valueLogFileSize = 256 << 20
	// buildersPerCompaction bounds the tables one Badger compaction builds
	// in memory at once: up to 8 finishing (its throttle) plus one being
	// filled per key-range split (at most about 6).
	buildersPerCompaction = 16
	// fixedOverhead covers what does not scale with the options: Badger's
	// goroutines, level and table metadata, the write channel, the
	// oracle, and this package's bookkeeping.
	fixedOverhead = 8 << 20
)

// maxValueBytes is the largest stored sample Badger takes: a value may not
// be larger than a value log file. A variable so that tests can lower it.
var maxValueBytes int64 = valueLogFileSize

func (o Options) withDefaults() Options {
	if o.MemTableSize <= 0 {
		o.MemTableSize = defaultMemTableSize
	}
	if o.NumMemtables <= 0 {
		o.NumMemtables = defaultNumMemtables
	}
	if o.BaseTableSize <= 0 {
		o.BaseTableSize = defaultBaseTableSize
	}
	if o.BlockCacheSize < 0 {
		o.BlockCacheSize = 0
	}
	if o.IndexCacheSize < 0 {
		o.IndexCacheSize = 0
	}
	if o.ValueThreshold <= 0 {
		o.ValueThreshold = defaultValueThreshold
	}
	// Badger rejects a threshold above its largest batch.
	if maxT := 15 * o.MemTableSize / 100; o.ValueThreshold > maxT {
		o.ValueThreshold = maxT
	}
	if o.NumCompactors < 2 {
		o.NumCompactors = defaultNumCompactors
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = defaultBatchBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// MemoryBytes returns an upper bound of the heap an open Cache with these
// options uses, Badger included, excluding the samples the caller holds. The engine reserves it
// from the pipeline's memory budget.
//
// The bound is the sum of:
//   - memtables: Badger holds the mutable memtable, up to NumMemtables
//     waiting in its flush queue and one being flushed, each an arena of
//     MemTableSize plus room for one maximal write batch (15% of
//     MemTableSize) and its skiplist nodes;
//   - one memtable flush, whose table builder holds up to an arena's data
//     or its initial allocation, whichever is larger;
//   - compactions: compactor 0 builds either up to 16 tables at once, each
//     allocated at BaseTableSize×2 rounded up to a power of two, or one
//     L0→L0 table holding every L0 table (at most 6 memtables' worth);
//     the other compactors build up to 16 tables each;
//   - the block and index caches;
//   - the samples Put holds before a write, encoded: BatchBytes, twice for
//     the slack of a growing buffer;
//   - 8 MiB of fixed overhead.
//
// It excludes memory-mapped files (value log, SSTables, memtable logs):
// those pages belong to the kernel's page cache, which it reclaims under
// pressure, and are not Go heap. With the defaults the bound is about
// 81 MiB; a cache at rest uses far less (its memtables fill lazily).
func (o Options) MemoryBytes() int64 {
	o = o.withDefaults()
	node := int64(skl.MaxNodeSize)
	batch := 15 * o.MemTableSize / 100
	arena := o.MemTableSize + batch + batch/node*node
	memtables := int64(o.NumMemtables+2) * arena
	builder := pow2(2 * o.BaseTableSize)
	flush := max(arena, pow2(2*o.BaseTableSize))
	tables := buildersPerCompaction * builder
	l0 := int64(numLevelZeroTablesStall) * o.MemTableSize
	compaction := max(tables, l0) + int64(o.NumCompactors-1)*tables
	return memtables + flush + compaction + o.BlockCacheSize + o.IndexCacheSize + 2*o.BatchBytes + fixedOverhead
}

// pow2 rounds n up to a power of two, as Badger's allocator does.
func pow2(n int64) int64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(uint64(n-1))
}

// badgerOptions translates o, which has its defaults applied.
func (o Options) badgerOptions(path string) badger.Options {
	bo := badger.DefaultOptions(path)
	// Equal table sizes at every level keep compaction builders at
	// BaseTableSize instead of doubling per level. (Badger has no setter
	// for it.)
	bo.TableSizeMultiplier = 1
	return bo.
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(o.NumMemtables).
		WithBaseTableSize(o.BaseTableSize).
		WithBlockCacheSize(o.BlockCacheSize).
		WithIndexCacheSize(o.IndexCacheSize).
		WithValueThreshold(o.ValueThreshold).
		WithNumCompactors(o.NumCompactors).
		WithNumLevelZeroTables(numLevelZeroTables).
		WithNumLevelZeroTablesStall(numLevelZeroTablesStall).
		WithValueLogFileSize(valueLogFileSize).
		// Samples are mostly pixels and floats that do not compress, and
		// without compression table blocks need no block cache.
		WithCompression(options.None).
		// A cached sample is read back many epochs later; a CRC-32C check
		// per value (several GB/s) turns silent disk corruption into an
		// error instead of a wrong sample.
		WithVerifyValueChecksum(true).
		// One writer per cache (the directory lock ensures it), so there
		// are no conflicts to detect, and no expvar metrics to publish.
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		WithNumGoroutines(2).
		WithLogger(logger{o.Logf})
}

// logger routes Badger's warnings and errors to a function and drops the
// rest, so that Badger never writes to the terminal of a running pipeline.
type logger struct{ f func(string, ...any) }

func (l logger) Errorf(format string, args ...any) { l.say(format, args...) }

func (l logger) Warningf(format string, args ...any) { l.say(format, args...) }

// say passes Badger's message on as one line: its errors can hold the
// system's newlines ("truncate …\nerror while truncation").
func (l logger) say(format string, args ...any) {
	if l.f != nil {
		l.f("cache: badger: %s", strings.ReplaceAll(strings.TrimSpace(fmt.Sprintf(format, args...)), "\n", "; "))
	}
}

func (logger) Infof(string, ...any)  {}
func (logger) Debugf(string, ...any) {}
