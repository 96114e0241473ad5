package stages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/piperun/piperun/cache"
	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.Counter     = (*CacheConfig)(nil)
	_ plan.DiskStorer  = (*CacheConfig)(nil)
	_ plan.EpochHolder = (*CacheConfig)(nil)
	_ plan.Reserver    = (*CacheConfig)(nil)
	_ spec.Checker     = (*CacheConfig)(nil)
	_ spec.Outputter   = (*CacheConfig)(nil)
	_ Cacher           = (*diskCache)(nil)
	_ Closer           = (*diskCache)(nil)
	_ Cacher           = (*memCache)(nil)
	_ Closer           = (*memCache)(nil)
)

// CacheConfig configures the cache stage.
type CacheConfig struct {
	Dir         string `yaml:"dir" jsonschema_description:"Directory of the on-disk (Badger) cache, relative to the spec; no dir = in memory, inside the budget."`
	CommitEvery int    `yaml:"commit_every" jsonschema:"minimum=1" jsonschema_description:"Samples between durable commits of the on-disk cache (default 512); a crash loses at most this many."`

	// through is set by Check where the cache passes its samples on and
	// stores none (PassesThrough): it then holds and reserves nothing.
	through bool
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "cache", Role: spec.RoleTransform,
			Doc:       "Stores the first pass over its input (on disk with dir, else in memory); later epochs and later runs read it back and skip all upstream work.",
			NewConfig: func() any { return &CacheConfig{CommitEvery: 512} }},
		Build: buildCache,
	})
}

// EpochSamples implements plan.Counter.
func (c *CacheConfig) EpochSamples(in int64) int64 { return in }

// EpochShare implements plan.EpochHolder: an in-memory cache holds its
// first pass in half the budget (memCache.Put); one on disk holds none.
func (c *CacheConfig) EpochShare() int {
	if c.Dir != "" || c.through {
		return 0
	}
	return 2
}

// ReservedBytes implements plan.Reserver: what Badger itself may hold in
// memory, counted inside the pipeline's budget.
func (c *CacheConfig) ReservedBytes(int64) int64 {
	if c.Dir == "" || c.through {
		return 0
	}
	return cache.Options{}.MemoryBytes()
}

// ReservedFor implements plan.Reserver.
func (c *CacheConfig) ReservedFor() string { return "Badger's tables and caches" }

// StoresOnDisk implements plan.DiskStorer.
func (c *CacheConfig) StoresOnDisk() bool { return c.Dir != "" && !c.through }

// Check implements spec.Checker.
func (c *CacheConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.CommitEvery < 1 {
		cc.Errorf("commit_every", "must be at least 1, got %d", c.CommitEvery)
	}
	c.through = PassesThrough(cc.Spec, cc.Stage)
	if c.Dir != "" && cc.Environment && !c.through { // one that stores nothing opens no folder
		// Named as what it is: a cache's directory is no output.
		if err := checkDirFor(filepath.Join(cc.Resolve(c.Dir), "x"), "cache directory"); err != nil {
			// A complete cache there can still be read (prepared once,
			// mounted read-only for every rank); what the run needs is
			// known only once its fingerprint is.
			if n := completeCaches(cc.Resolve(c.Dir)); n > 0 {
				cc.Warnf("dir", "%v: only a complete cache there can be read (it holds %d); a run whose upstream matches none of them fails", err, n)
			} else {
				cc.Errorf("dir", "%v", err)
			}
		}
	}
	if c.through {
		cc.Warnf("", "this cache stores nothing: with epochs: 0 a take above it ends the stream after its count, which may span epochs, and a replay could not; put the take below the cache (after it, the take counts the replayed stream), or set epochs")
		return cc.Input()
	}
	// Without a seed each run draws one, and a cache below anything random
	// is keyed by it (Fingerprint): it would be refilled every run.
	if c.Dir != "" && cc.Spec != nil && cc.Spec.Seed == nil {
		for _, up := range upstream(cc.Stage) {
			if cfg, err := json.Marshal(up.Config); err == nil && isRandom(up, string(cfg)) {
				cc.Warnf("dir", "stage %q above this cache is random and the spec sets no seed: each run draws a new one, so the cache is filled again every run and never read; set seed:", up.Name)
				break
			}
		}
	}
	// What a random function above draws is stored with the sample, so
	// every later epoch (and run) gets the first epoch's crops and flips
	// again: augmentation frozen, without a word.
	for _, up := range upstream(cc.Stage) {
		if c.Dir == "" && cc.Spec != nil && cc.Spec.Epochs == 1 {
			break // one epoch, in memory: nothing is replayed
		}
		if _, ok := up.Config.(*MapConfig); ok && IsRandom(up) {
			later := "every later epoch" // an in-memory cache does not outlive its run
			if c.Dir != "" {
				later += " and run"
			}
			cc.Warnf("", "stage %q above this cache draws random numbers: the cache stores the first epoch's draws and replays them in %s, so its augmentation is the same each epoch; move the random functions to a map below the cache", up.Name, later)
			break
		}
	}
	// The store replays by sample ID, so an order drawn above it holds for
	// the pass that fills it only.
	for _, up := range upstream(cc.Stage) {
		fc, files := up.Config.(*FilesConfig)
		if up.Type != "shuffle" && !(files && fc.Shuffle) {
			continue
		}
		const replays = "stage %q above this cache shuffles, but a cache replays its samples in the order of their IDs: "
		if below := shuffleBelow(cc.Spec, cc.Stage); below != nil {
			cc.Warnf("", replays+"after the pass that fills it (and in later runs) only shuffle %q below reorders them, within its buffer, and the shuffle of stage %q changes the first pass alone", up.Name, below.Name, up.Name)
		} else {
			cc.Warnf("", replays+"the epochs after the one that fills it (and later runs) are not shuffled; shuffle below the cache", up.Name)
		}
		break
	}
	return cc.Input()
}

// OutputPaths implements spec.Outputter: the cache's directory, which no
// other cache may share (two with the same stages above would have the
// same fingerprint) and no sink may write.
func (c *CacheConfig) OutputPaths(resolve func(string) string) []string {
	if c.Dir == "" || c.through {
		return nil
	}
	return []string{resolve(c.Dir)}
}

// CacheStats describe what a cache stage did in a run.
type CacheStats struct {
	Fingerprint string `json:"fingerprint,omitempty"`
	Dir         string `json:"dir,omitempty"`
	// FromCache counts samples served from what an earlier pass stored;
	// Written counts samples stored by this run.
	FromCache int64 `json:"from_cache"`
	Written   int64 `json:"written"`
	Complete  bool  `json:"complete"`
	// Resumed is the number of samples an earlier, interrupted run left.
	Resumed int64 `json:"resumed"`
	// SkippedWhenFilled counts, by stage, the samples the stages above the
	// cache skipped (on_error: skip) in the pass that filled it, and
	// SkipCausesWhenFilled has their first causes, as skipped and
	// skip_causes had them in the report of the run that completed it:
	// the samples the cache lacks. They are the cache's record, not this
	// run's: a run replaying the cache skips nothing above it and says so
	// in skipped, while this still counts what its fill lost; in the run
	// that completes the fill it repeats skipped's counts for those
	// stages, so do not add the two. {} when the fill skipped nothing;
	// absent while the cache is partial, and for a cache completed by a
	// piperun that did not record skips (unknown, not none).
	SkippedWhenFilled    map[string]int64    `json:"skipped_when_filled,omitzero"`
	SkipCausesWhenFilled map[string][]string `json:"skip_causes_when_filled,omitempty"`
	// FilledBefore says the cache was complete when the run opened it:
	// an earlier run filled it, and this one only replays it.
	FilledBefore bool `json:"-"`
}

// Cacher is implemented by stages that store one pass over their input
// and replay it. The engine feeds the first pass through Put and, once the
// cache is Complete, stops reading the input and calls Replay instead.
type Cacher interface {
	Complete() bool
	// Stored reports whether an earlier run stored the sample with this
	// ID, and about the bytes it takes once read; Get returns it.
	Stored(id int64) (size int64, ok bool)
	Get(id int64) (*sample.Sample, bool, error)
	Put(ctx context.Context, s *sample.Sample) error
	Commit() error
	// MarkComplete ends the first pass. skipped counts, by stage, the
	// samples the stages above skipped in it, and causes has their first
	// causes, for the cache's record (CacheStats.SkippedWhenFilled); nil
	// skipped means unknown.
	MarkComplete(skipped map[string]int64, causes map[string][]string) error
	Replay(ctx context.Context, epoch int, emit Emit) error
	Stats() CacheStats
	Close() error
}

// storeOptions routes Badger's warnings and errors (a value failing its
// checksum among them) to the run's log as warnings.
func storeOptions(env *Env) cache.Options {
	return cache.Options{Logf: func(f string, a ...any) { env.Log.Warn(fmt.Sprintf(f, a...)) }}
}

func buildCache(env *Env, cfg any) (any, error) {
	c := cfg.(*CacheConfig)
	if c.Dir == "" || PassesThrough(env.Spec, env.Stage) {
		// One that passes its samples on stores none: it opens no store,
		// which would lock, make and describe a folder (its
		// report told of samples resumed from an earlier run's store).
		return &memCache{env: env}, nil
	}
	fp, desc, err := Fingerprint(env.Spec, env.Stage, env.Seed)
	if err != nil {
		return nil, err
	}
	dir := env.Resolve(c.Dir)
	// Say when an older version of this stage's cache is being left behind,
	// so a user knows why the run recomputes.
	// One line, naming the one used last: a folder of many (a week of
	// experiments) gave a line for each, every run.
	if ms, err := cache.List(dir); err == nil {
		var others int
		var last cache.Manifest
		for _, m := range ms {
			if m.Fingerprint != fp && m.Pipeline == env.Spec.Name && m.Stage == env.Stage.Name {
				if others++; m.LastUsed.After(last.LastUsed) || others == 1 {
					last = m
				}
			}
		}
		if others > 0 {
			// Not "older": with ranks sharing a folder, the others' current
			// caches are listed too (a test of concurrent runs).
			env.Log.Info("not using other caches of this stage (another upstream, seed or rank; piperun cache ls lists them)", zap.String("this", fp),
				zap.Int("others", others), zap.String("last_used", last.Fingerprint), zap.Int64("last_used_samples", last.Samples), zap.Bool("last_used_complete", last.Complete))
		}
	}
	store, err := cache.Open(dir, fp, cache.Manifest{Pipeline: env.Spec.Name, Stage: env.Stage.Name, Describe: desc},
		storeOptions(env))
	if err != nil {
		return nil, err
	}
	if m := store.Manifest(); !m.Complete && store.Count() > 0 && !env.Spec.Deterministic {
		// Resuming takes stored samples in place of the ones with the same
		// IDs. With deterministic: false the stages above number samples in
		// the order they finish, so an ID names other samples in each run:
		// resuming would store some twice and lose others, for good once
		// the cache completes. Start the fill afresh instead.
		env.Log.Warn("not resuming a partly filled cache: with deterministic: false its sample IDs do not name the same samples from run to run; filling it afresh",
			zap.String("dir", store.Dir()), zap.Int64("dropped_samples", store.Count()))
		if err := store.Close(); err != nil {
			return nil, err
		}
		if err := cache.Remove(dir, fp); err != nil {
			return nil, err
		}
		if store, err = cache.Open(dir, fp, cache.Manifest{Pipeline: env.Spec.Name, Stage: env.Stage.Name, Describe: desc},
			storeOptions(env)); err != nil {
			return nil, err
		}
	}
	d := &diskCache{env: env, cfg: c, store: store}
	m := store.Manifest()
	d.stats = CacheStats{Fingerprint: fp, Dir: store.Dir(), Complete: m.Complete, Resumed: store.Count()}
	if d.stats.Complete {
		d.stats.Resumed = 0
		d.stats.FilledBefore = true
		d.stats.SkippedWhenFilled, d.stats.SkipCausesWhenFilled = m.SkippedWhenFilled, m.SkipCausesWhenFilled
	}
	env.Log.Info("cache", zap.String("dir", store.Dir()), zap.Bool("complete", d.stats.Complete), zap.Int64("samples", store.Count()))
	return d, nil
}

// shuffleBelow returns a shuffle stage that reads st's output, directly
// or further down, or nil.
func shuffleBelow(sp *spec.Spec, st *spec.Stage) *spec.Stage {
	if sp == nil {
		return nil
	}
	for _, s := range sp.Stages {
		if s.Type == "shuffle" && slices.Contains(upstream(s), st) {
			return s
		}
	}
	return nil
}

// PassesThrough reports whether cache stage st passes its samples on and
// stores none: in an endless run a take above it ends the stream after its
// count, which may span epochs (repeat().take(n)), so a replay, knowing
// nothing of the count, would run for ever, and the epochs after the
// first are not the first again (a shuffle, random maps, and IDs, which
// are positions in an epoch, name other samples).
func PassesThrough(sp *spec.Spec, st *spec.Stage) bool {
	if sp == nil || sp.Epochs != 0 {
		return false
	}
	for _, up := range upstream(st) {
		if up.Type == "take" {
			return true
		}
	}
	return false
}

// upstream returns every stage st reads from, directly or not, each once,
// a stage after all it reads from.
func upstream(st *spec.Stage) []*spec.Stage {
	var up []*spec.Stage
	seen := map[*spec.Stage]bool{}
	var walk func(s *spec.Stage)
	walk = func(s *spec.Stage) {
		for _, in := range s.Inputs {
			if !seen[in] {
				seen[in] = true
				walk(in)
				up = append(up, in)
			}
		}
	}
	walk(st)
	return up
}

// SamplesVersion changes when a change to piperun changes the samples
// that the same spec makes from the same files, so that caches written
// before are not replayed as if nothing had changed. 2 (2026-12-04):
// gray+alpha PNGs decode to 2 channels, and batched booleans of a field
// typed only at run time carry their mark (cache/codec.go's
// tagBoolTensor). 3 (2026-12-06): each set entry of a map draws its
// random numbers by its own key, so a random map above a cache makes
// other samples. Caches of earlier versions stay on disk for `cache prune`.
const SamplesVersion = 3

// literalFiler is a config whose expressions read files named by
// literal paths, which a cache's fingerprint must cover.
type literalFiler interface{ literalFiles() []string }

// Fingerprint identifies everything upstream of a stage: each upstream
// stage's type and config, the identity (path, size, modification time)
// of every input file the file sources match, seed, the run's resolved
// seed, when anything upstream is random, and SamplesVersion. Change any
// of it and the fingerprint changes.
func Fingerprint(sp *spec.Spec, st *spec.Stage, seed uint64) (string, string, error) {
	up := upstream(st)
	cfgs := make([][]byte, len(up))
	random := false
	at := map[*spec.Stage]int{}
	for i, s := range up {
		at[s] = i
		switch s.Config.(type) {
		case *PrefetchConfig, *CacheConfig:
			// How far ahead a prefetch reads, and where and how often a
			// cache above stores, change no sample: tuning them must not
			// recompute everything upstream.
			cfgs[i] = []byte("{}")
			continue
		}
		cfg, err := json.Marshal(s.Config)
		if err != nil {
			return "", "", fmt.Errorf("fingerprint %s: %w", s.Name, err)
		}
		cfgs[i] = cfg
		random = random || isRandom(s, string(cfg))
	}
	// Stages are named by their place, unless something is random: the
	// generators are seeded by stage names, so a renamed stage draws anew.
	name := func(s *spec.Stage) string {
		if random {
			return s.Name
		}
		return fmt.Sprint("#", at[s])
	}
	var b strings.Builder
	var names []string
	for i, s := range up {
		ins := make([]string, len(s.Inputs))
		for j, in := range s.Inputs {
			ins[j] = name(in)
		}
		fmt.Fprintf(&b, "stage %s type=%s inputs=%v on_error=%s config=%s\n", name(s), s.Type, ins, s.OnError, cfgs[i])
		names = append(names, s.Name)
		if lf, ok := s.Config.(literalFiler); ok {
			// read_file("classes.txt"): the text names a file, whose
			// contents the config does not hold; nor does it say which
			// file a relative path names, which is the spec's folder's.
			for _, f := range lf.literalFiles() {
				if fi, err := os.Stat(f); err == nil {
					fmt.Fprintf(&b, "file %s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
				} else {
					fmt.Fprintf(&b, "file %s absent\n", f)
				}
			}
		}
		if fc, ok := s.Config.(*FilesConfig); ok {
			// shard: auto reads the rank from the launcher's environment;
			// each rank reads other files, so each needs its own cache
			// (rank 1 replayed rank 0's files).
			if fc.Shard.Auto {
				index, count, err := ShardFromEnv(os.LookupEnv)
				if err != nil {
					return "", "", fmt.Errorf("fingerprint %s: %w", s.Name, err)
				}
				fmt.Fprintf(&b, "shard %d of %d\n", index, count)
			}
			for _, p := range fc.patterns() {
				files, _, err := filesGlob(sp.ResolvePattern(p))
				if err != nil {
					return "", "", err
				}
				for _, f := range files {
					fi, err := os.Stat(f)
					if err != nil {
						return "", "", fmt.Errorf("fingerprint: %w", err)
					}
					fmt.Fprintf(&b, "file %s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
				}
			}
		}
	}
	if random {
		fmt.Fprintf(&b, "seed %d\n", seed)
	}
	if !sp.Deterministic {
		// The stages above number samples in the order they finish, so a
		// fill's IDs and order are its own: a deterministic run must not
		// resume or replay it (DESIGN.md §4), and gets a cache of its own.
		b.WriteString("deterministic false\n")
	}
	if SamplesVersion > 1 {
		fmt.Fprintf(&b, "samples version %d\n", SamplesVersion)
	}
	sum := sha256.Sum256([]byte(b.String()))
	desc := fmt.Sprintf("%s after %s", sp.Name, strings.Join(names, " → "))
	if random {
		desc += " (random upstream: seed included)"
	}
	return hex.EncodeToString(sum[:])[:16], desc, nil
}

// IsRandom reports whether stage s draws random numbers: a shuffle, a
// mix, a files stage that shuffles, or a random expression function.
func IsRandom(s *spec.Stage) bool {
	cfg, err := json.Marshal(s.Config)
	return err == nil && isRandom(s, string(cfg))
}

// isRandom reports whether a stage's output depends on the seed. The
// random functions are the registry's Random marks, read at each call: a
// list written out here missed the ones added later, and one made at
// start would miss an embedder's.
func isRandom(s *spec.Stage, cfg string) bool {
	switch c := s.Config.(type) {
	case *FilesConfig:
		return c.Shuffle
	case *ShuffleConfig, *MixConfig:
		return true
	}
	reg := expression.Default()
	for _, name := range reg.Names() {
		if f, _ := reg.Lookup(name); f.Random && strings.Contains(cfg, name) {
			return true
		}
	}
	return false
}

type diskCache struct {
	env     *Env
	cfg     *CacheConfig
	store   *cache.Cache
	stats   CacheStats
	pending int
	mu      sync.Mutex
}

func (d *diskCache) Complete() bool { return d.store.Manifest().Complete }
func (d *diskCache) Stored(id int64) (int64, bool) {
	if d.stats.Resumed == 0 {
		return 0, false
	}
	return d.store.Stored(id)
}
func (d *diskCache) Get(id int64) (*sample.Sample, bool, error) {
	s, ok, err := d.store.Get(id)
	if ok {
		d.mu.Lock()
		d.stats.FromCache++
		d.mu.Unlock()
	}
	return s, ok, storeFault(err)
}

// storeFault marks the store's damage as the cache's own, not the fault
// of the sample being stored or stood for: the run's error began with
// that sample ("sample 160 (epoch 0): store: …"), a photo's name in an
// interrupt test, which read as if the photo were bad.
func storeFault(err error) error {
	if errors.Is(err, cache.ErrCorrupt) || errors.Is(err, cache.ErrDamaged) {
		return &StateError{err}
	}
	return err
}
func (d *diskCache) Stats() CacheStats { d.mu.Lock(); defer d.mu.Unlock(); return d.stats }
func (d *diskCache) Close() error      { return d.store.Close() }
func (d *diskCache) MarkComplete(skipped map[string]int64, causes map[string][]string) error {
	if skipped != nil {
		d.store.SetSkippedWhenFilled(skipped, causes)
	}
	if err := d.store.MarkComplete(); err != nil {
		return err
	}
	m := d.store.Manifest()
	d.mu.Lock()
	d.stats.Complete = true
	d.stats.SkippedWhenFilled, d.stats.SkipCausesWhenFilled = m.SkippedWhenFilled, m.SkipCausesWhenFilled
	d.mu.Unlock()
	return nil
}

func (d *diskCache) Commit() error {
	d.pending = 0
	return d.store.Commit()
}

func (d *diskCache) Put(_ context.Context, s *sample.Sample) error {
	if err := d.store.Put(s.ID, s); err != nil {
		return storeFault(err)
	}
	d.mu.Lock()
	d.stats.Written++
	d.mu.Unlock()
	if d.pending++; d.pending >= d.cfg.CommitEvery {
		return d.Commit()
	}
	return nil
}

func (d *diskCache) Replay(ctx context.Context, epoch int, emit Emit) error {
	// IDs stay as stored: per-sample randomness downstream is seeded by
	// them, so a replayed epoch matches one computed afresh.
	return d.store.Iterate(ctx, func(s *sample.Sample) error {
		s.Epoch = epoch
		d.mu.Lock()
		d.stats.FromCache++
		d.mu.Unlock()
		return emit(s)
	})
}

// memCache keeps the first pass in memory, its bytes reserved in the
// budget like any other buffer.
type memCache struct {
	env      *Env
	bytes    int64
	samples  []*sample.Sample
	complete bool
	stats    CacheStats
	mu       sync.Mutex
}

func (m *memCache) Complete() bool                          { return m.complete }
func (m *memCache) Stored(int64) (int64, bool)              { return 0, false }
func (m *memCache) Get(int64) (*sample.Sample, bool, error) { return nil, false, nil }
func (m *memCache) Commit() error                           { return nil }
func (m *memCache) Stats() CacheStats                       { m.mu.Lock(); defer m.mu.Unlock(); return m.stats }

func (m *memCache) MarkComplete(skipped map[string]int64, causes map[string][]string) error {
	m.complete = true
	m.mu.Lock()
	m.stats.Complete = true
	m.stats.SkippedWhenFilled, m.stats.SkipCausesWhenFilled = skipped, causes
	m.mu.Unlock()
	sort.SliceStable(m.samples, func(i, j int) bool { return m.samples[i].ID < m.samples[j].ID })
	return nil
}

func (m *memCache) Put(_ context.Context, s *sample.Sample) error {
	n := s.DataSize() // the same every run: whether it fits decides the run's fate
	// Its part of the half of the budget that it splits with the other
	// in-memory caches: the stages feeding it need the rest to keep
	// producing.
	var c *sample.Sample
	ok := m.bytes+n <= m.env.buffers().Share()
	if ok {
		c, ok = m.env.Keep(s)
	}
	if !ok {
		// An on-disk cache is the usual way out, but its Badger store
		// reserves memory of its own: a budget that leaves the samples
		// nothing after it would only trade this error for a stuck run.
		disk := (&CacheConfig{Dir: "set"}).ReservedBytes(0)
		b := m.env.buffers()
		// The half is of what other stages' reservations (an
		// interleave's open files, a serve window) leave the samples; the
		// advice counts them too (a review: "half of 3MiB" where the
		// cache had 1MiB).
		room, others := spec.ByteSize(m.env.Memory).String(), int64(0)
		if b.Room() > 0 && b.Room() < m.env.Memory {
			room = fmt.Sprintf("the %s that resources.memory (%s) leaves samples", spec.ByteSize(b.Room()), spec.ByteSize(m.env.Memory))
			others = m.env.Memory - b.Room()
		}
		share, in := "half of "+room, "half of it"
		if b.Ways() > 1 {
			share = fmt.Sprintf("%s, a 1/%d part of the half of %s that the %d in-memory caches split", spec.ByteSize(b.Share()), b.Ways(), room, b.Ways())
			in = "its part"
		}
		// The budget named for dir: keeps the samples what they have now
		// (at least 16 MiB): it is no least, which validate works out (a
		// tuning test read "at least" and ran fine below it).
		samples, now := m.env.Memory-others, " as now"
		if samples < 16<<20 {
			samples, now = 16<<20, ""
		}
		return &StateError{fmt.Errorf("in-memory cache outgrew its share of the memory budget (%s) after %d samples (%s, about %s a sample); "+
			"set dir: to cache on disk (Badger reserves %s of the budget for itself: resources.memory of %s leaves the samples %s%s), or raise resources.memory to hold the whole first pass in %s%s",
			share, len(m.samples), spec.ByteSize(m.bytes+n), spec.ByteSize((m.bytes+n)/int64(len(m.samples)+1)),
			spec.ByteSize(disk), spec.ByteSize(disk+others+samples), spec.ByteSize(samples), now, in, m.uint8Hint())}
	}
	m.bytes += n
	m.samples = append(m.samples, c)
	m.mu.Lock()
	m.stats.Written++
	m.mu.Unlock()
	return nil
}

// uint8Hint points at a float32 image among the samples cached: kept as
// the uint8 it was decoded as, it takes a quarter of the bytes (a tuning
// test found that way out only in bench's advice).
func (m *memCache) uint8Hint() string {
	if m.env.Stage == nil {
		return ""
	}
	for _, f := range m.env.Stage.Schema.Fields {
		t := f.Type
		if t.Kind == sample.Tensor && t.DType == tensor.Float32 && len(t.Shape) == 3 && (t.Shape[2] == 1 || t.Shape[2] == 3 || t.Shape[2] == 4) {
			return fmt.Sprintf("; or, if %s was decoded as uint8, cache it so, a quarter of the bytes: end the map above before its to_float() (and normalize) and convert in a map after the cache", f.Name)
		}
	}
	return ""
}

func (m *memCache) Replay(_ context.Context, epoch int, emit Emit) error {
	for _, s := range m.samples {
		c := m.env.Copy(s)
		c.Epoch = epoch
		m.mu.Lock()
		m.stats.FromCache++
		m.mu.Unlock()
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *memCache) Close() error {
	for _, s := range m.samples {
		m.env.Release(s)
	}
	m.samples = nil
	m.bytes = 0
	return nil
}

// completeCaches counts the complete caches under dir.
func completeCaches(dir string) int {
	ms, _ := cache.List(dir)
	n := 0
	for _, m := range ms {
		if m.Complete {
			n++
		}
	}
	return n
}
