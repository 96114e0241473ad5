// Package stages holds one file per stage type and the registry that maps
// type names to them.
//
// Stage authors write synchronous code against the small interfaces below;
// the engine owns every goroutine, channel and cancellation. A stage type
// provides a config struct (decoded and validated by package spec through
// the registry, which implements spec.Catalog) and a Build function that
// turns a validated config into one of Source, Processor, Expander, Joiner
// or Sink.
package stages

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// Registry is the catalog spec validates against.
var _ spec.Catalog = (*Registry)(nil)

// Emit passes a sample downstream. It blocks while the pipeline is full and
// returns an error when the run is stopping; stages return that error.
type Emit func(*sample.Sample) error

// Source produces samples. The engine calls Open at the start of every
// epoch, then Next until it returns io.EOF.
type Source interface {
	Open(ctx context.Context, epoch int) error
	Next(ctx context.Context) (*sample.Sample, error)
}

// Processor turns one input sample into zero or more output samples. If the
// type's spec.StageType is Parallel, Process must be safe for concurrent
// use; otherwise the engine calls it from one goroutine.
//
// The values in a sample are read-only: a fan-out's consumers share them,
// and so do a cache's stored copy and the sample it passes on. A stage
// that changes a tensor builds a new one and puts it in the field, as a
// map's set does; the field map itself is the stage's own to change.
// (An embedder's stage that scaled a tensor in place changed what a sink
// on another branch of the same stage wrote, and raced with it.)
type Processor interface {
	Process(ctx context.Context, in *sample.Sample, emit Emit) error
}

// Prefetcher is implemented by processors that can start, ahead of time,
// the slow reads their samples will need (a map's read_file). The engine
// calls Prefetch with each chunk of samples as it arrives at the stage,
// before any of them is processed, while Process may be running on
// samples of earlier chunks. Prefetch reads what it needs of ss there and
// then, without changing them, and returns the work that reads ahead (nil
// for none): the engine runs that on a goroutine of its own, later or not
// at all, when the samples may already be gone.
type Prefetcher interface {
	Prefetch(ss []*sample.Sample) func()
}

// EpochEnder is implemented by processors and sinks that hold samples across
// calls (shuffle, batch): EndEpoch flushes them when an epoch's input ends.
type EpochEnder interface {
	EndEpoch(ctx context.Context, epoch int, emit Emit) error
}

// Idler is implemented by sinks that can be left without a consumer (a
// serve sink between trainers): IdleTime is the time they have spent
// waiting for one since their first sample went out, which the engine
// leaves out of the time a sink's wait for samples is a share of
// (engine.SinkReport.WaitedShare). It is read while the sink runs.
type Idler interface {
	IdleTime() time.Duration
	// Idle reports whether the sink is waiting for a consumer now, for
	// the progress display.
	Idle() bool
}

// Stream is a sequence of samples opened from one input sample, such as the
// records of one file. Next returns io.EOF at the end.
type Stream interface {
	Next() (*sample.Sample, error)
	Close() error
}

// DefaultCycleLength is the interleave width of cycle_length: auto. It is
// one number on every machine, not the core count as in tf.data's
// AUTOTUNE: the width decides the order of the samples, and the same spec
// and seed give the same order at any parallelism (DESIGN.md §4; found by
// a new-user test: 1, 2 and 3 workers gave three orders). Whether the open
// files are read ahead in parallel is the stage's parallelism.
const DefaultCycleLength = 8

// Expander opens a stream per input sample (a file path to its records).
// The engine interleaves the streams (cycle_length, block_length) and reads
// them ahead in parallel; Open may be called concurrently.
type Expander interface {
	Open(ctx context.Context, in *sample.Sample) (Stream, error)
	Interleave() (cycleLength, blockLength int)
}

// Pull receives the next sample of input i; io.EOF marks the end of that
// input's epoch.
type Pull func(i int) (*sample.Sample, error)

// Joiner merges several inputs (mix, concat, zip). JoinEpoch runs once per
// epoch and returns when its output for that epoch is complete; inputs it
// did not drain are drained by the engine.
type Joiner interface {
	JoinEpoch(ctx context.Context, epoch, inputs int, pull Pull, emit Emit) error
}

// InputEnder is implemented by joiners whose output ends once one input
// ends for good (zip ends with the shortest; mix with stop_on_empty): in an
// endless run a take above one input ends its stream, and the join's
// stream ends there too, where its other inputs would go on for ever with
// empty epochs.
type InputEnder interface {
	EndsWithAnInput() bool
}

// Sink consumes samples. Commit is called once after the last epoch and
// must make outputs appear whole (e.g. rename temporary files); Abort is
// called instead when the run fails or is interrupted, and must leave no
// partial output.
//
// Write is the sample's last stop: when it returns, the engine gives the
// sample's part of the memory budget back, so a sink that keeps s or its
// values past Write (a queue to a consumer of its own) holds memory the
// budget no longer counts, and should copy what it keeps or bound it. Its
// values are read-only, as for Processor; a sink done with them may call
// s.Recycle to give their buffers to the tensor pool (the built-in sinks
// do).
type Sink interface {
	Write(ctx context.Context, s *sample.Sample) error
	Commit() error
	Abort() error
}

// Preparer is implemented by sinks whose Commit makes files visible:
// Prepare does everything that can fail short of that (flush, sync, close,
// check the final names), so that the engine commits no sink's files until
// every sink's are ready, and a failed run leaves none in place.
type Preparer interface {
	Prepare() error
}

// Announcer is implemented by sinks whose Commit tells a process outside
// the run that it succeeded (serve's end of stream): they commit after
// every other sink has.
type Announcer interface {
	Announces()
}

// Drainer is implemented by announcers whose announcement waits on a
// process outside the run (serve: a trainer acknowledging the last
// frames). The engine drains every announcer before any announces, so
// that a run stopped or failed while one still waits has told no process
// outside that it succeeded. Drain is called with the run's context.
type Drainer interface {
	Drain(ctx context.Context) error
}

// ContextCommitter is implemented by sinks whose Commit waits on a process
// outside the run (serve: a trainer acknowledging the last frames), for
// as long as that takes: the engine calls CommitContext with the run's
// context instead of Commit, so Ctrl-C ends the wait.
type ContextCommitter interface {
	CommitContext(ctx context.Context) error
}

// Holder is implemented by stages that keep samples across calls (a
// shuffle's buffer): Holding returns the bytes they hold, and may be called
// from another goroutine, so a stuck run can say where its memory is.
type Holder interface {
	Holding() int64
}

// Closer is implemented by stages holding resources released at the end.
type Closer interface {
	Close() error
}

// Env is what a stage's Build receives.
type Env struct {
	Spec  *spec.Spec
	Stage *spec.Stage
	// Seed is the pipeline's resolved seed.
	Seed uint64
	// Workers is the resolved parallelism of this stage.
	Workers int
	// Memory is the pipeline's memory budget in bytes, for stages that size
	// their own buffers from it.
	Memory int64
	// Buffers is the part of Memory that the stage's buffer may fill (a
	// shuffle's, an in-memory cache's), split with the others of its
	// kind; nil gives the stage the whole half.
	Buffers *Buffers
	Log     *zap.Logger
	// Release returns a retained sample's bytes to the memory budget. Stages
	// that implement Retainer call it for samples they drop.
	Release func(*sample.Sample)
	// Hand moves what from holds of the memory budget to to, for a stage
	// whose output replaces its inputs (batch): released instead, the
	// inputs' memory could go upstream before the output reserves its own.
	Hand func(to, from *sample.Sample)
	// Shrink gives back n of the bytes a retained sample holds of the
	// memory budget, for a stage that freed part of it (batch recycles
	// each image it has converted into its batch).
	Shrink func(s *sample.Sample, n int64)
	// TryReserve takes n bytes from the memory budget if they are free, for
	// stages that keep copies of samples (the in-memory cache).
	TryReserve func(n int64) bool
	// Keep returns a copy of s for a stage that keeps it after passing s
	// on (the in-memory cache): the two share s's values and their place
	// in the budget, and the copy reserves its own field map, if free
	// (false if not). Release the copy when done with it.
	Keep func(s *sample.Sample) (*sample.Sample, bool)
	// Copy returns a copy of a kept sample to pass on again (a replay),
	// sharing its values' place in the budget.
	Copy func(s *sample.Sample) *sample.Sample
	// Skip, when set, reports that a downstream cache already holds the
	// result for this sample: the stage passes it on untouched instead of
	// redoing its work, and the cache substitutes what it stored.
	Skip func(*sample.Sample) bool
	// Cached, when set, reports whether a downstream cache already holds
	// the result for this sample, as Skip does but without Skip's
	// accounting: for read-ahead, which must not fetch what will not be
	// read.
	Cached func(*sample.Sample) bool
}

// StateError is an error of a stage's own state, not of the sample it was
// handling when it failed (an in-memory cache outgrowing its share of the
// budget): the engine names no sample with it, as that one is innocent.
type StateError struct{ Err error }

// Error implements error.
func (e *StateError) Error() string { return e.Err.Error() }

// Unwrap returns the error e wraps, for errors.Is and errors.As.
func (e *StateError) Unwrap() error { return e.Err }

// Retainer is implemented by processors that keep input samples after
// Process returns (shuffle, batch). The engine then leaves the samples'
// memory reserved until the stage emits them or calls Env.Release.
type Retainer interface {
	Retains()
}

// Dropper is implemented by retainers (shuffle, batch): Drop gives back
// whatever samples and buffers the stage still holds. The engine calls it
// as the stage's goroutine ends, so what the stage held when the stages
// below stopped early (a take that has its count) or the run failed is
// not left reserved. After a clean end of input it finds nothing to drop.
type Dropper interface {
	Drop()
}

// Resolve makes a spec-relative path absolute.
func (e *Env) Resolve(p string) string { return e.Spec.Resolve(p) }

// ResolvePattern is Spec.ResolvePattern.
func (e *Env) ResolvePattern(p string) string { return e.Spec.ResolvePattern(p) }

// Type is one registered stage type.
type Type struct {
	spec.StageType
	// Build creates the runtime stage from a validated config.
	Build func(env *Env, cfg any) (any, error)
}

// Registry maps stage type names to types. It implements spec.Catalog.
type Registry struct {
	types map[string]*Type
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{types: map[string]*Type{}} }

// Register adds a type. A type that could never be decoded or built is a
// programming error and panics here, at registration, naming what is
// wrong: a nil type, no name, a duplicate name, a role outside the four,
// no Build, or a NewConfig missing or giving no non-nil pointer to a
// struct. Caught later, these panicked inside spec.Parse or failed only
// once a run had started (an embedder's test).
func (r *Registry) Register(t *Type) {
	if err := checkType(t); err != nil {
		panic("stages: " + err.Error())
	}
	if _, dup := r.types[t.Name]; dup {
		panic("stages: duplicate stage type " + t.Name)
	}
	r.types[t.Name] = t
}

// checkType says why t could not be registered, or nil.
func checkType(t *Type) error {
	switch {
	case t == nil:
		return errors.New("a nil type given to Register")
	case t.Name == "":
		return errors.New("a stage type needs a name")
	case t.Role < spec.RoleSource || t.Role > spec.RoleSink:
		return fmt.Errorf("stage type %q has role %d, which is none of source, transform, join and sink", t.Name, int(t.Role))
	case t.Build == nil:
		return fmt.Errorf("stage type %q has no Build", t.Name)
	case t.NewConfig == nil:
		return fmt.Errorf("stage type %q has no NewConfig", t.Name)
	}
	cfg := t.NewConfig()
	v := reflect.ValueOf(cfg)
	switch {
	case v.Kind() == reflect.Pointer && v.IsNil():
		return fmt.Errorf("stage type %q: NewConfig must return a non-nil pointer to a struct, got a nil %T", t.Name, cfg)
	case v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct:
		return fmt.Errorf("stage type %q: NewConfig must return a non-nil pointer to a struct, got %T", t.Name, cfg)
	}
	return nil
}

// Lookup implements spec.Catalog.
func (r *Registry) Lookup(name string) (*spec.StageType, bool) {
	t, ok := r.types[name]
	if !ok {
		return nil, false
	}
	return &t.StageType, true
}

// Type returns a registered type with its Build function.
func (r *Registry) Type(name string) (*Type, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names implements spec.Catalog.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.types))
	for n := range r.types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// builtins registers into the default registry; each stage file adds itself.
var builtins []func(r *Registry)

// Default returns a registry holding every built-in stage type.
func Default() *Registry {
	r := NewRegistry()
	for _, add := range builtins {
		add(r)
	}
	return r
}

// ItemError marks a stream error that spoils one item only (a bad JSON
// line), so the stream can go on after it is skipped. Any other stream
// error ends the stream (a corrupt TFRecord frame makes the rest of the
// file unreadable).
type ItemError struct{ Err error }

// Error implements error.
func (e *ItemError) Error() string { return e.Err.Error() }

// Unwrap returns the error e wraps, for errors.Is and errors.As.
func (e *ItemError) Unwrap() error { return e.Err }

// IsItemError reports whether err spoils a single stream item.
func IsItemError(err error) bool {
	var ie *ItemError
	return errors.As(err, &ie)
}

// buffers returns the share of the budget the stage's buffer fills with
// the others' (Env.Buffers), or, where the Env has none, a share of its
// own.
func (e *Env) buffers() *Buffers {
	if e.Buffers == nil {
		e.Buffers = NewBuffers(e.Memory, 1, "buffers")
	}
	return e.Buffers
}
