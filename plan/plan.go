// Package plan turns a validated spec into the numbers the engine runs
// with: each stage's parallelism, queue and buffer sizes, its estimated
// sample size and its share of the memory budget. It starts nothing.
package plan

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/piperun/piperun/internal/bytesize"
	"github.com/piperun/piperun/spec"
)

// Bufferer is implemented by stage configs that hold samples themselves
// (shuffle, batch, prefetch): BufferSamples is how many input samples they
// may hold at once, given the number of cores.
type Bufferer interface {
	BufferSamples(workers int) int
}

// BufferKeyer is implemented by a Bufferer whose buffer is set by a key
// other than "buffer" (batch: "size"), so problems point at it.
type BufferKeyer interface {
	BufferKey() string
}

// BufferSharer is implemented by stage configs whose buffer may fill only a
// share of the budget (a shuffle: half), and shrinks at run time past it:
// BufferShare is the divisor.
type BufferSharer interface {
	BufferShare() int
}

// BufferWays counts the stages of sp that split the budget's buffer half
// of their kind between them: the shuffles (BufferSharer), and apart from
// them the in-memory caches (EpochHolder). Each counted a half as its
// own, so two shuffles needed more than the budget at any size of it, and
// the run stalled (found by a memory audit); the run splits each half
// evenly, as this counts it.
func BufferWays(sp *spec.Spec) (shuffles, caches int) {
	for _, st := range sp.Stages {
		if o, ok := st.Config.(BufferSharer); ok && o.BufferShare() > 1 {
			shuffles++
		} else if h, ok := st.Config.(EpochHolder); ok && h.EpochShare() >= 1 {
			caches++
		}
	}
	return max(1, shuffles), max(1, caches)
}

// sharedRoom is the bytes the buffer of bs may fill in sp under a budget
// of memory: its share of the budget (a shuffle: half), split evenly among
// the shuffles of sp; and the divisor of the budget that gives.
func sharedRoom(sp *spec.Spec, bs BufferSharer, memory int64) (room int64, divisor int) {
	shuffles, _ := BufferWays(sp)
	divisor = max(1, bs.BufferShare()) * shuffles
	return memory / int64(divisor), divisor
}

// sharerWords names the stages that may fill a divisor of the budget: "a
// shuffle", or "each of the 2 shuffles" where they split it.
func sharerWords(st *spec.Stage, share, divisor int) string {
	if ways := divisor / max(1, share); ways > 1 {
		return fmt.Sprintf("each of the %d %ss", ways, st.Type)
	}
	return "a " + st.Type
}

// OutputSizer is implemented by stage configs that can bound their output
// sample's size where the schema cannot (a batch without drop_remainder,
// whose leading dimension is "up to size"); -1 when unknown.
type OutputSizer interface {
	OutputBytes() int64
	// MinOutputBytes is a lower bound, known where OutputBytes is not
	// (sample.Schema.MinBytes).
	MinOutputBytes() int64
}

// Reserver is implemented by stage configs that hold memory of their own
// beyond samples (the on-disk cache's Badger tables, the serve sink's
// window of samples sent but not acknowledged, an interleave's open
// files), told the run's memory budget; the bytes are taken from the
// budget when the run starts. ReservedFor says what they hold, for
// messages.
type Reserver interface {
	ReservedBytes(memory int64) int64
	ReservedFor() string
}

// Counter is implemented by stage configs that know how many samples they
// emit an epoch, given how many their one input emits (-1 when unknown,
// and for a source): -1 where they cannot tell.
type Counter interface {
	EpochSamples(in int64) int64
}

// ExactCounter is implemented by configs whose Counter gives a bound the
// fit can use rather than what they emit (a batch counts its full
// batches): EpochSamplesExact gives what they emit, for deciding whether a
// take cuts an epoch (a take of 2 batches of 149999 samples by
// 50000 was taken for one of the whole epoch).
type ExactCounter interface {
	EpochSamplesExact(in int64) int64
}

// JoinCounter is implemented by join configs that know how many samples
// they emit an epoch, given how many each input emits (-1 when unknown):
// -1 where they cannot tell.
type JoinCounter interface {
	EpochSamplesOf(ins []int64) int64
}

// OriginAllowance is what the fit of an in-memory cache counts for each
// sample's origin (sample.Sample.Origin: "data/train-3.tfrecord record
// 17", a photo's path), which the run counts and no schema holds, where
// the sources do not know longer ones (OriginSizer).
const OriginAllowance = 128

// OriginSizer is implemented by source configs that know the longest
// origin their samples carry: a files stage, its longest path (-1 where it
// did not look at the machine).
type OriginSizer interface {
	OriginBytes() int64
}

// originOf estimates the origin of the samples st emits, for the fit of
// an in-memory cache: a files stage's longest path (OriginSizer), a
// reader's path and record number, a batch's "batch N (epoch E) of FIRST
// … LAST"; 0 where nothing above knows. (optimize.go's originBytes bounds
// the same from above, for another use.)
func originOf(st *spec.Stage) int64 {
	if o, ok := st.Config.(OriginSizer); ok {
		return max(0, o.OriginBytes())
	}
	var in int64
	for _, up := range st.Inputs {
		in = max(in, originOf(up))
	}
	switch st.Type {
	case "tfrecord", "jsonl":
		return in + int64(len(" record 1000000000"))
	case "batch":
		return describeBytes + 2*max(in, describeBytes)
	}
	return in
}

// originFor is what each sample reaching st counts for its origin in the
// fit: what the stages above tell, and at least OriginAllowance.
func originFor(st *spec.Stage) int64 {
	var in int64
	for _, up := range st.Inputs {
		in = max(in, originOf(up))
	}
	return max(OriginAllowance, in)
}

// EpochHolder is implemented by stage configs that hold a whole first pass
// (the in-memory cache) in 1/EpochShare of the budget; 0 for none.
type EpochHolder interface {
	EpochShare() int
}

// Options tune compilation.
type Options struct {
	// Workers overrides the core count; 0 means DefaultWorkers.
	Workers int
	// Memory is the budget when the spec does not set one; 0 means a quarter
	// of physical memory.
	Memory int64
	// ChunkSize is how many samples travel between stages in one message.
	ChunkSize int
}

// DefaultChunkSize amortizes channel operations over several samples while
// keeping latency low: stages flush partial chunks whenever their input
// would block.
const DefaultChunkSize = 64

// QueueChunks is each inter-stage channel's capacity in chunks.
const QueueChunks = 2

// Plan is a compiled pipeline.
type Plan struct {
	Spec *spec.Spec
	// Seed is the resolved seed; SeedRandom says it was drawn at random.
	Seed       uint64
	SeedRandom bool
	Memory     int64
	// MemoryDefault says neither the spec nor Options set the budget:
	// Memory is DefaultMemory, which depends on the machine.
	MemoryDefault bool
	// Probed says ApplyProbe has filled in measured sample sizes.
	Probed    bool
	Workers   int
	ChunkSize int
	Nodes     []*Node
	// Rewrites lists what the planner changed in the DAG as written; Kept
	// the shuffles it left behind a map, and why.
	Rewrites, Kept []Rewrite
}

// Node is one stage as planned.
type Node struct {
	Stage       *spec.Stage
	Parallelism int
	// Buffer is the number of samples the stage itself may hold.
	Buffer int
	// SampleBytes estimates one output sample, InSampleBytes one input
	// sample; -1 when unknown without data.
	SampleBytes   int64
	InSampleBytes int64
	// Share is the bytes the stage needs to make progress (its buffer and
	// one output sample per consumer), when the sizes are known.
	Share int64
	// MinSampleBytes and MinInSampleBytes are lower bounds of
	// SampleBytes and InSampleBytes: the same where those are known, else
	// with strings and bytes counted empty.
	MinSampleBytes   int64
	MinInSampleBytes int64
	// MinShare is a lower bound of Share where that is unknown: the same
	// with strings, bytes and tensors of unknown shape counted empty.
	MinShare int64
	// Reserved is memory the stage holds besides samples, and ReservedFor
	// what it holds (Reserver).
	Reserved    int64
	ReservedFor string
	// Probed says SampleBytes was measured by --probe, not derived.
	Probed bool
}

// Node returns the node of a stage by name.
func (p *Plan) Node(name string) *Node {
	for _, n := range p.Nodes {
		if n.Stage.Name == name {
			return n
		}
	}
	return nil
}

// DefaultWorkers is what `workers: auto` means: Go's GOMAXPROCS as the
// process started, which is the cores it may run on, lowered to a
// container's CPU limit (Go 1.25 and later read the cgroup's quota), or
// the GOMAXPROCS environment variable when set. runtime.NumCPU counts the
// machine's cores: a pod limited to 2 CPUs on a 64-core node would run 64
// decoders, throttled by the quota. Read at package initialisation, before
// the piperun command adds its spare P (cli/procs.go).
var DefaultWorkers = runtime.GOMAXPROCS(0)

// Compile plans a spec that validated without errors. Unless the spec
// says optimize: false, it first rewrites the spec's DAG in place where
// that keeps the output the same (pushShuffles); compile a spec once.
func Compile(sp *spec.Spec, cat spec.Catalog, opts Options) (*Plan, error) {
	p := &Plan{Spec: sp, Workers: opts.Workers, ChunkSize: opts.ChunkSize}
	if p.Workers <= 0 {
		p.Workers = DefaultWorkers
	}
	if sp.Resources.Workers.N > 0 {
		p.Workers = sp.Resources.Workers.N
	}
	if p.ChunkSize <= 0 {
		p.ChunkSize = DefaultChunkSize
	}
	p.Memory = int64(sp.Resources.Memory)
	if p.Memory == 0 {
		p.Memory = opts.Memory
	}
	if p.Memory == 0 {
		p.Memory, p.MemoryDefault = DefaultMemory(), true
	}
	if sp.Seed != nil {
		p.Seed = uint64(*sp.Seed)
	} else {
		var b [8]byte
		if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
			return nil, fmt.Errorf("draw a random seed: %w", err)
		}
		// Under 2^53, so that a JSON reader that keeps numbers as
		// doubles (jq, JavaScript) reads the report's seed exactly, and
		// --set seed=N from it reruns the same run.
		p.Seed = binary.LittleEndian.Uint64(b[:]) >> 11
		p.SeedRandom = true
	}
	if sp.Optimize {
		budget := "resources.memory"
		if p.MemoryDefault {
			budget = "the default memory budget"
		}
		// The shuffle's share is of what the stages' reservations leave,
		// as the run sizes it: of the whole budget, a rewrite promised
		// the output of a shuffle that, as written, would shrink (a
		// review).
		room := p.Memory
		for _, st := range sp.Stages {
			if rs, ok := st.Config.(Reserver); ok {
				room -= rs.ReservedBytes(p.Memory)
			}
		}
		if room < p.Memory {
			room, budget = max(1, room), "what "+budget+" leaves samples"
		}
		p.Rewrites, p.Kept = pushShuffles(sp, room, budget, p.Workers)
	}
	byStage := map[*spec.Stage]*Node{}
	for _, st := range sp.Order {
		t, ok := cat.Lookup(st.Type)
		if !ok {
			return nil, fmt.Errorf("stage %q: unknown type %q", st.Name, st.Type)
		}
		n := &Node{Stage: st, Parallelism: 1, SampleBytes: st.Schema.EstimateBytes()}
		byStage[st] = n
		if sz, ok := st.Config.(OutputSizer); ok && n.SampleBytes < 0 {
			n.SampleBytes = sz.OutputBytes()
		}
		// A stage that passes its input on unchanged (prefetch, shuffle,
		// take) holds samples of the size its input stage estimated, which
		// may know more than the schema: a batch without drop_remainder
		// has a first dimension of "?" but at most its size.
		var up *Node
		if len(st.Inputs) > 0 {
			up = byStage[st.Inputs[0]]
		}
		if up != nil && n.SampleBytes < 0 && len(st.InSchemas) == 1 && st.Schema.String() == st.InSchemas[0].String() {
			n.SampleBytes = up.SampleBytes
		}
		if t.Parallel {
			n.Parallelism = st.Parallelism.Resolve(p.Workers)
		}
		if b, ok := st.Config.(Bufferer); ok {
			n.Buffer = b.BufferSamples(p.Workers)
		}
		if rs, ok := st.Config.(Reserver); ok {
			n.Reserved, n.ReservedFor = rs.ReservedBytes(p.Memory), rs.ReservedFor()
		}
		// A buffer holds input samples (batch gathers inputs; its output is
		// one batch), the output queues hold output samples.
		n.InSampleBytes = n.SampleBytes
		if len(st.InSchemas) > 0 {
			n.InSampleBytes = st.InSchemas[0].EstimateBytes()
			if n.InSampleBytes < 0 && up != nil {
				n.InSampleBytes = up.SampleBytes
			}
		}
		// The lower bounds flow as the estimates do: a prefetch after a
		// batch of samples with a string in them holds batches at least
		// a full batch's known part, not its schema's "?" rows (a review
		// saw 50 batches of 6.1MiB counted as 16KiB).
		n.MinSampleBytes = st.Schema.MinBytes()
		if sz, ok := st.Config.(OutputSizer); ok {
			n.MinSampleBytes = sz.MinOutputBytes()
		}
		if up != nil && len(st.InSchemas) == 1 && st.Schema.String() == st.InSchemas[0].String() {
			n.MinSampleBytes = max(n.MinSampleBytes, up.MinSampleBytes)
		}
		if n.SampleBytes >= 0 {
			n.MinSampleBytes = n.SampleBytes
		}
		n.MinInSampleBytes = n.MinSampleBytes
		if len(st.InSchemas) > 0 {
			n.MinInSampleBytes = st.InSchemas[0].MinBytes()
			if up != nil {
				n.MinInSampleBytes = max(n.MinInSampleBytes, up.MinSampleBytes)
			}
		}
		if n.InSampleBytes >= 0 {
			n.MinInSampleBytes = n.InSampleBytes
		}
		if st.Role != spec.RoleSink {
			if n.SampleBytes >= 0 && n.InSampleBytes >= 0 {
				n.Share = share(n)
			} else {
				n.MinShare = addSat(mulSat(int64(n.Buffer), n.MinInSampleBytes), n.MinSampleBytes)
			}
		}
		p.Nodes = append(p.Nodes, n)
	}
	return p, nil
}

// share is what a stage must be able to hold for the pipeline to make
// progress: its own buffer of input samples and one output sample, whose
// values the copies sent to several consumers share (engine: need).
// Queues between stages take whatever else the budget allows; they apply
// backpressure rather than need a fixed share.
func share(n *Node) int64 {
	return addSat(mulSat(int64(n.Buffer), n.InSampleBytes), n.SampleBytes)
}

// ApplyProbe replaces unknown sample-size estimates with sizes measured
// by running the pipeline on a few samples (stage name → average bytes of
// one output sample), and recomputes the memory shares.
func (p *Plan) ApplyProbe(avg map[string]int64) {
	p.Probed = true
	measured := map[string]bool{}
	for _, n := range p.Nodes {
		if b, ok := avg[n.Stage.Name]; ok && b > 0 && n.SampleBytes < 0 {
			n.SampleBytes = b
			measured[n.Stage.Name] = true
		}
	}
	for _, n := range p.Nodes {
		if n.InSampleBytes < 0 && len(n.Stage.Inputs) > 0 {
			if in := p.Node(n.Stage.Inputs[0].Name); in != nil {
				n.InSampleBytes = in.SampleBytes
			}
		}
		if n.InSampleBytes < 0 && len(n.Stage.Inputs) == 0 {
			// Compile gave a source its own output size, unknown then: left
			// so, its share stayed a lower bound after the probe.
			n.InSampleBytes = n.SampleBytes
		}
		if n.SampleBytes >= 0 && n.InSampleBytes >= 0 && n.Stage.Role != spec.RoleSink {
			n.Share = share(n)
		}
		n.Probed = measured[n.Stage.Name]
	}
}

// DefaultMemory is the budget of a spec that sets none: a quarter of
// the memory this process may use (MachineMemory), or 1 GiB where that
// cannot be read.
func DefaultMemory() int64 {
	if total := MachineMemory(); total > 0 {
		return total / 4
	}
	return 1 << 30
}

// DefaultMemorySource says where DefaultMemory comes from here: "a
// quarter of this machine's memory", "a quarter of its cgroup's memory
// limit", or "1GiB: this machine's memory could not be read".
func DefaultMemorySource() string {
	total := physicalMemory()
	switch l := cgroupMemoryLimit(); {
	case l > 0 && (total <= 0 || l < total):
		return "a quarter of this process's cgroup memory limit"
	case total > 0:
		return "a quarter of this machine's memory"
	}
	return "this machine's memory could not be read"
}

// MachineMemory returns the memory this process may use: the machine's
// RAM, or its cgroup's limit where that is lower; 0 if neither is known.
func MachineMemory() int64 {
	total := physicalMemory()
	if l := cgroupMemoryLimit(); l > 0 && (total <= 0 || l < total) {
		total = l
	}
	return total
}

// MachineDiagnostics warns when the memory budget is more than this
// machine (or container) has: the budget then no longer keeps the run
// from the OOM killer, and a typo (200GiB for 20GiB) would go unnoticed.
// It depends on the machine, so validate runs it only with its
// environment checks.
func (p *Plan) MachineDiagnostics() spec.Diagnostics {
	have := MachineMemory()
	if have <= 0 || p.Memory <= have {
		return nil
	}
	const path = "resources.memory"
	return spec.Diagnostics{{Pos: p.Spec.PosOf(path), Path: path, Severity: spec.SevWarning,
		Message: fmt.Sprintf("%s is more than the memory this process may use (%s: the machine's RAM, or its cgroup's limit where lower): the budget no longer keeps the run from the OOM killer",
			spec.ByteSize(p.Memory), spec.ByteSize(have))}}
}

// FitProblem is one way the planned buffers do not fit the memory budget.
type FitProblem struct {
	// Path is the spec path it points at: resources.memory, or the key of
	// the buffer at fault.
	Path    string
	Message string
	// Warning marks what a run copes with (a shuffle holding fewer
	// samples than asked), as opposed to what it cannot do.
	Warning bool
}

// Fit returns a problem for each way the planned buffers cannot fit in the
// memory budget, with the numbers.
func (p *Plan) Fit() []FitProblem { return p.fit(true) }

// leastBudget is the least budget under which the plan's buffers fit as
// they are, found by bisection over fit itself: a shuffle's part grows
// with the budget, so advice computed from today's budget crept up one
// try at a time (a re-test went 16.26, 16.39, … 16.52MiB).
func (p *Plan) leastBudget() (n int64, ok bool) {
	q := *p
	q.Nodes = make([]*Node, len(p.Nodes))
	for i, n := range p.Nodes {
		c := *n
		q.Nodes[i] = &c
	}
	fits := func(m int64) bool {
		// What a stage reserves may follow the budget (a serve sink's
		// window), as it does when the spec is compiled with it: advice
		// sized with the reservations of this budget did not fit (a
		// review: 26.22MiB advised, 27.49MiB needed then, then more).
		q.Memory = m
		for _, n := range q.Nodes {
			if rs, ok := n.Stage.Config.(Reserver); ok {
				n.Reserved = rs.ReservedBytes(m)
			}
		}
		for _, f := range q.fit(false) {
			if !f.Warning {
				return false
			}
		}
		return true
	}
	lo, hi := p.Memory, max(p.Memory, 1<<20)*2
	for !fits(hi) {
		if hi > 1<<50 {
			return 0, false // a pebibyte: no machine has it
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; fits(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

// fit is Fit, with advice (what to lower a buffer to, what budget fits)
// where advise is set.
func (p *Plan) fit(advise bool) []FitProblem {
	var total int64
	lower := false // total counts some stages by their lower bound
	var parts []string
	var out []FitProblem
	add := func(path string, warn bool, format string, args ...any) {
		out = append(out, FitProblem{Path: path, Message: fmt.Sprintf(format, args...), Warning: warn})
	}
	errs := 0
	// What every stage holds, so that advice to lower one buffer sizes it
	// to what the others leave: sized against the whole budget, following
	// it only led to the next problem (a new-user test went round twice).
	var all int64
	passes := p.cachePasses()
	for _, n := range p.Nodes {
		h, _, _ := p.held(n)
		if cp, ok := passes[n.Stage]; ok {
			h = cp.bytes
		} else if _, below := passes[cacheAbove(n.Stage)]; below {
			h = 0
		}
		all += n.Reserved + h
	}
	// Where the spec sets no budget there is no resources.memory line to
	// point at: a problem points at the stage, or its key, instead, so
	// that it still has a line (and a CI annotation).
	budgetPath := func(n *Node) string {
		if !p.MemoryDefault {
			return "resources.memory"
		}
		if n == nil {
			return "stages"
		}
		return p.stagePath(n.Stage, "")
	}
	for _, n := range p.Nodes {
		if n.Reserved > 0 {
			total = addSat(total, n.Reserved)
			parts = append(parts, fmt.Sprintf("%s %s (reserved)", n.Stage.Name, spec.ByteSize(n.Reserved)))
			if n.Reserved > p.Memory {
				// With the budget that also fits the rest: raised to the
				// reservation alone, the next try met the next refusal
				// (a re-test).
				// Where sizes are lower bounds the least is one too (a
				// review: at the figure, the run stalled).
				least := ""
				if m, ok := p.leastBudget(); ok && advise {
					least = fmt.Sprintf("; %s fits the whole pipeline", bytesize.FormatAtLeast(m))
					for _, n := range p.Nodes {
						if _, _, lower := p.held(n); lower {
							least = fmt.Sprintf("; the whole pipeline needs at least %s, its strings and bytes counted as empty (--probe N measures them)", bytesize.FormatAtLeast(m))
							break
						}
					}
				}
				add(budgetPath(n), false, "stage %q needs %s for its own use%s, more than %s%s", n.Stage.Name, spec.ByteSize(n.Reserved), parens(n.ReservedFor), p.budget(), least)
				errs++
			}
		}
		// The stage that makes samples too large is named, not the first
		// below it with a share of its own (a map's
		// resize(100000, 100000) was blamed on the take after it); the
		// stages that pass them on are not named again. The copies a
		// fan-out sends share their values, which are reserved once
		// (engine: need).
		// Sizes unknown before the run (strings, bytes): what is known of
		// them still counts, as a lower bound, in the same checks.
		held, fits, atLeast := p.held(n)
		about, out, in := "about", n.SampleBytes, n.InSampleBytes
		if atLeast {
			about, out, in = "at least", n.MinSampleBytes, n.MinInSampleBytes
		}
		if out > p.Memory && in <= p.Memory {
			add(budgetPath(n), false, "stage %q emits samples of %s %s each, more than %s",
				n.Stage.Name, about, spec.ByteSize(out), p.budget())
			errs++
		}
		if held <= 0 {
			continue
		}
		if n.Buffer > 0 && in > 0 {
			need := mulSat(int64(n.Buffer), in)
			if bs, ok := n.Stage.Config.(BufferSharer); ok && bs.BufferShare() > 1 {
				// The run shrinks such a buffer to its share and warns; a
				// warning here says so before the run, since it changes
				// how well the data is mixed, and the fit counts what the
				// buffer will hold (--probe
				// refused at 8MiB a spec that ran at 4MiB).
				if fits > 0 && p.SampleRoom() > 1 { // else the reservations fill the budget, an error above
					noun := "samples"
					if fits == 1 {
						noun = "sample"
					}
					// With sizes a lower bound, fewer may fit.
					holdAbout := "about"
					if atLeast {
						holdAbout = "at most"
					}
					room, divisor := sharedRoom(p.Spec, bs, p.SampleRoom())
					add(p.stagePath(n.Stage, "buffer"), true, "%d samples of %s %s each = %s, more than %s, the 1/%d of %s %s may fill: it will hold %s %d %s",
						n.Buffer, about, spec.ByteSize(in), spec.ByteSize(need), spec.ByteSize(room), divisor, p.roomWords(), sharerWords(n.Stage, bs.BufferShare(), divisor), holdAbout, fits, noun)
				}
			} else if need > p.Memory {
				key := "buffer"
				if k, ok := n.Stage.Config.(BufferKeyer); ok {
					key = k.BufferKey()
				}
				// The stage holds fixed bytes and per bytes a buffered
				// sample: its input and, for a batch, its share of the
				// batch it makes, which grows with its size (a re-test:
				// counted as fixed, the advice was 428 where 5027 fit).
				fixed, per := max(0, held-need), in
				if _, scales := n.Stage.Config.(BufferKeyer); scales {
					fixed, per = 0, max(1, (held+int64(n.Buffer)-1)/int64(n.Buffer))
					if held == math.MaxInt64 {
						// Saturated, held/buffer is next to nothing (a
						// size of 2^62 was advised 66506286): a batch
						// holds each input twice, buffered and batched.
						per = mulSat(2, in)
					}
				}
				room := p.Memory - (all - held) - fixed
				advice := ""
				if advise {
					// Sized on lower bounds, both are bounds too.
					n, ok := p.leastBudget()
					least := bytesize.FormatAtLeast(n)
					if atLeast {
						least = "at least " + least
					}
					raise := " or raise resources.memory to " + least
					if !ok {
						// The search gave up: its bound was advised, and
						// did not fit.
						raise = "; no machine's memory would hold it"
					}
					advice = fmt.Sprintf(": lower its %s to %d (what the other stages leave)%s", key, room/per, raise)
					if atLeast {
						advice = fmt.Sprintf(": lower its %s to %d at most (what the other stages leave)%s", key, room/per, raise)
					}
					if room < per && ok {
						advice = fmt.Sprintf(": the other stages leave no room for one sample; raise resources.memory to %s", least)
					} else if room < per {
						advice = ": the other stages leave no room for one sample, and no machine's memory would hold it"
					}
				}
				// At the stage's key: the number to change is there.
				add(p.stagePath(n.Stage, key), false, "stage %q buffers %d samples of %s %s each = %s, more than %s%s",
					n.Stage.Name, n.Buffer, about, spec.ByteSize(in), spec.ByteSize(need), p.budget(), advice)
				errs++
			}
		}
		// An in-memory cache holds its first pass, and the stages below
		// that hold its samples as they are hold the values it counts
		// (the engine reserves them once): so the total counts them, as
		// plan's table does (a re-test: validate refused budgets the run
		// fitted in, each shuffle below a cache counted in full).
		if cp, ok := passes[n.Stage]; ok {
			held, atLeast = cp.bytes, atLeast || !cp.exact
		} else if _, below := passes[cacheAbove(n.Stage)]; below {
			continue
		}
		total = addSat(total, held)
		if atLeast {
			lower = true
			parts = append(parts, fmt.Sprintf("%s ≥ %s", n.Stage.Name, spec.ByteSize(held)))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s", n.Stage.Name, spec.ByteSize(held)))
		}
	}
	errs += p.fitEpochs(add)
	switch {
	case errs > 0 || total <= p.Memory:
	case lower:
		how := "--probe N measures them"
		if p.Probed {
			how = "the probe's samples did not reach them"
		}
		add(budgetPath(nil), false, "buffers need at least %s (%s; ≥: the sizes of strings and bytes are known only at run time, and count as empty here; %s), more than %s",
			spec.ByteSize(total), strings.Join(parts, ", "), how, p.budget())
	default:
		least := ""
		if advise {
			if n, ok := p.leastBudget(); ok {
				least = fmt.Sprintf("; %s fits", bytesize.FormatAtLeast(n))
			}
		}
		add(budgetPath(nil), false, "buffers need about %s (%s), more than %s%s",
			spec.ByteSize(total), strings.Join(parts, ", "), p.budget(), least)
	}
	return out
}

// fitEpochs reports each stage holding a whole first pass in memory (an
// in-memory cache) that the samples reaching it cannot fit, where their
// count is known (a files stage's matches, a range, through stages that
// keep the count), and returns how many it reported. The run found out
// only when the cache had filled its part of the budget.
func (p *Plan) fitEpochs(add func(path string, warn bool, format string, args ...any)) int {
	_, inCount := p.epochCounts(false)
	_, exactIn := p.epochCounts(true)
	errs := 0
	for _, n := range p.Nodes {
		in := inCount(n.Stage)
		h, ok := n.Stage.Config.(EpochHolder)
		if !ok || h.EpochShare() < 1 || in <= 0 || p.takeBelow(n.Stage, exactIn) {
			continue
		}
		// Strings and bytes are known only at run time: their samples are
		// at least what is known of them, which can be enough to tell (a
		// re-test: photos of at least 147KiB each).
		size, about := n.InSampleBytes, "about"
		if size <= 0 && len(n.Stage.InSchemas) > 0 {
			size, about = n.Stage.InSchemas[0].MinBytes(), "at least"
		}
		if size <= 0 {
			continue
		}
		// The run counts each sample's origin too (the file and record it
		// came from, for messages), which no schema holds: following the
		// advice without it failed the run (a new-user test, 70-byte paths;
		// a review, 230-byte ones).
		size += originFor(n.Stage)
		_, caches := BufferWays(p.Spec)
		divisor := h.EpochShare() * caches
		room := p.SampleRoom() / int64(divisor)
		if in > room/size {
			need := in * size
			if in > math.MaxInt64/size/int64(divisor) {
				need = math.MaxInt64 / int64(divisor) // a count past int64's bytes
			}
			add(p.stagePath(n.Stage, ""), false, "stage %q holds its whole first pass in memory: %d samples of %s %s each = %s, more than %s, the 1/%d of %s it may fill; set dir: to cache on disk, or raise the budget to at least %s",
				n.Stage.Name, in, about, spec.ByteSize(size), spec.ByteSize(need), spec.ByteSize(room), divisor, p.roomWords(), bytesize.FormatAtLeast(addSat(mulSat(need, int64(divisor)), p.Memory-p.SampleRoom())))
			errs++
		}
	}
	return errs
}

// epochCounts returns how many samples each stage emits an epoch (-1
// where unknown), and a function giving the count that reaches a stage of
// one input; exact counts what stages emit (ExactCounter) where the fit's
// bounds would do otherwise.
func (p *Plan) epochCounts(exact bool) (map[*spec.Stage]int64, func(*spec.Stage) int64) {
	counts := map[*spec.Stage]int64{}
	inCount := func(st *spec.Stage) int64 {
		if len(st.Inputs) == 1 {
			if c, ok := counts[st.Inputs[0]]; ok {
				return c
			}
		}
		return -1
	}
	for _, n := range p.Nodes { // inputs first
		counts[n.Stage] = -1
		// A stage that skips bad samples emits fewer, by how many the run
		// alone knows: counted as it is, a skipping decode could push a
		// spec that runs over the line.
		if c, ok := n.Stage.Config.(Counter); ok && len(n.Stage.Inputs) <= 1 && !n.Stage.Skip() {
			counts[n.Stage] = c.EpochSamples(inCount(n.Stage))
			if ec, ok := c.(ExactCounter); ok && exact {
				counts[n.Stage] = ec.EpochSamplesExact(inCount(n.Stage))
			}
		}
		// A join counts from all its inputs (a take of a whole
		// epoch below a zip was taken for one that cuts it).
		if c, ok := n.Stage.Config.(JoinCounter); ok && len(n.Stage.Inputs) > 1 && !n.Stage.Skip() {
			ins := make([]int64, len(n.Stage.Inputs))
			for i, in := range n.Stage.Inputs {
				ins[i] = -1
				if k, ok := counts[in]; ok {
					ins[i] = k
				}
			}
			counts[n.Stage] = c.EpochSamplesOf(ins)
		}
	}
	return counts, inCount
}

// EpochBytes estimates the bytes of one epoch of a stage's output, what
// an in-memory cache right after it would hold (each sample's origin
// counted as OriginAllowance): -1 where the count of its
// samples is unknown (a filter above it, an endless source). exact is
// false where strings and bytes of unknown size were counted at their
// least, making bytes a lower bound.
func (p *Plan) EpochBytes(name string) (bytes int64, exact bool) {
	n := p.Node(name)
	if n == nil {
		return -1, false
	}
	counts, _ := p.epochCounts(false)
	count := counts[n.Stage]
	size, exact := n.SampleBytes, true
	if size < 0 {
		size, exact = n.Stage.Schema.MinBytes(), false
		if sz, ok := n.Stage.Config.(OutputSizer); ok {
			size = sz.MinOutputBytes()
		}
	}
	if count < 0 || size < 0 {
		return -1, false
	}
	size += originFor(n.Stage) // as the in-memory cache's fit counts it
	if size > 0 && count > math.MaxInt64/size {
		return math.MaxInt64, exact
	}
	return count * size, exact
}

// takeBelow reports whether, in a run of at most one epoch (or endless),
// a take below st may end the stream inside st's first pass: the work
// above stops there, and st may never hold its whole pass (found in review:
// a take of 50 below a cache of 100,000 samples was refused, and ran in
// 178 KiB). A take known to pass its whole epoch (in gives the count that
// reaches a stage) does not: a take of 700 below a cache of 200 samples
// was let through and the run failed (a tester). One that cuts the pass
// may still let the cache fill it, as the stages between read ahead; the
// run then fails, naming the cache.
func (p *Plan) takeBelow(st *spec.Stage, in func(*spec.Stage) int64) bool {
	if p.Spec == nil || p.Spec.Epochs > 1 {
		return false
	}
	return st.Below(func(s *spec.Stage) bool {
		if s.Type != "take" {
			return false
		}
		c, ok := s.Config.(Counter)
		n := in(s)
		return !ok || n < 0 || c.EpochSamples(n) < n
	}) != nil
}

// held is the bytes n will hold: its share, less what a buffer that
// shares the budget (a shuffle) leaves out when its samples outgrow its
// part of the budget, as the run shrinks it to that part (and one sample
// at the least). fits is then how many samples it holds, else 0. Where
// the share is unknown (strings, bytes) it is n's lower bound, and
// atLeast says so.
func (p *Plan) held(n *Node) (held, fits int64, atLeast bool) {
	held, in := n.Share, n.InSampleBytes
	if held <= 0 {
		held, in, atLeast = n.MinShare, n.MinInSampleBytes, true
	}
	bs, ok := n.Stage.Config.(BufferSharer)
	if !ok || bs.BufferShare() <= 1 || n.Buffer <= 0 || in <= 0 || held <= 0 {
		return held, 0, atLeast
	}
	need := mulSat(int64(n.Buffer), in)
	room, _ := sharedRoom(p.Spec, bs, p.SampleRoom())
	if need <= room {
		return held, 0, atLeast
	}
	fits = max(1, room/in)
	return held - need + fits*in, fits, atLeast
}

// SampleRoom is the memory budget less what stages reserve for their own
// use (Reserver): what samples may hold, and what the shares of the
// shuffles, caches and parallel stages are parts of. 0 where the budget
// is unbounded.
func (p *Plan) SampleRoom() int64 {
	if p.Memory <= 0 {
		return 0
	}
	room := p.Memory
	for _, n := range p.Nodes {
		room -= n.Reserved
	}
	return max(1, room)
}

// parens is s in parentheses after a space, or nothing where s is empty.
func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// roomWords names SampleRoom in a message: the budget, or what it leaves
// samples where stages reserve part of it.
func (p *Plan) roomWords() string {
	if room := p.SampleRoom(); room < p.Memory {
		return fmt.Sprintf("what %s leaves samples (%s)", p.budget(), spec.ByteSize(room))
	}
	return p.budget()
}

// budget names the memory budget in a message: resources.memory and its
// size, or, where the spec sets none, the default and where it comes
// from, since another machine gives another one.
func (p *Plan) budget() string {
	if p.MemoryDefault {
		return fmt.Sprintf("the default memory budget (%s, %s; set resources.memory)", spec.ByteSize(p.Memory), DefaultMemorySource())
	}
	return fmt.Sprintf("resources.memory (%s)", spec.ByteSize(p.Memory))
}

// stagePath is the spec path of key in st's entry, stages[i].key, or of
// the entry itself when key is "".
func (p *Plan) stagePath(st *spec.Stage, key string) string {
	for i, s := range p.Spec.Stages {
		if s == st {
			if key == "" {
				return fmt.Sprintf("stages[%d]", i)
			}
			return fmt.Sprintf("stages[%d].%s", i, key)
		}
	}
	return "resources.memory"
}

// DiskStorer is a config that keeps what it stores past the run (a cache
// with a folder).
type DiskStorer interface {
	StoresOnDisk() bool
}

// CacheDiagnostics warns of a disk cache that a take below it keeps from
// ever completing: in a run of one epoch, or an endless one, the take ends
// the stream inside the cache's first pass, so the cache stays partial and
// every run stores the same first samples again (tf.data warns of
// cache().take(k) as it runs). In a longer run the take reads its earlier
// epochs to their end, and the first pass fills.
func (p *Plan) CacheDiagnostics() spec.Diagnostics {
	if p.Spec == nil || p.Spec.Epochs > 1 {
		return nil
	}
	counts, in := p.epochCounts(true)
	epoch, advice := "the run's only epoch", "put the take above the cache, whose store then holds what the take passes"
	if p.Spec.Epochs == 0 {
		epoch = "the first of endless epochs"
		advice = "set epochs, and put the take above the cache, whose store then holds what the take passes (with endless epochs a cache below a take stores nothing)"
	}
	var out spec.Diagnostics
	for _, n := range p.Nodes {
		ds, ok := n.Stage.Config.(DiskStorer)
		if !ok || !ds.StoresOnDisk() {
			continue
		}
		take := cutBelow(n.Stage, in)
		if take == nil {
			continue
		}
		msg := fmt.Sprintf("take %q below this cache may end the run inside the cache's first pass (%s): the cache then stays partial", take.Name, epoch)
		if c, pass := counts[take], counts[n.Stage]; c >= 0 && pass >= 0 && in(take) == pass {
			msg = fmt.Sprintf("take %q below this cache ends the run after %d samples, inside the cache's first pass of %d (%s): the cache stays partial", take.Name, c, pass, epoch)
		}
		path := p.stagePath(n.Stage, "")
		out = append(out, spec.Diagnostic{Pos: p.Spec.PosOf(path), Path: path, Severity: spec.SevWarning,
			Message: msg + ", and every run stores the same first samples again; " + advice})
	}
	return out
}

// WholeWriter is a sink config whose output appears only when the run
// ends, renamed into place at its commit.
type WholeWriter interface {
	WritesWhole()
}

// EndlessDiagnostics warns of a sink that writes whole (WholeWriter) in an
// endless run with no take above it: its input never ends, so the run
// can end only by being stopped, which commits nothing. A take anywhere
// above it is taken to end the stream, a zip's other input included: a
// warning where the run may end would be worse than none.
func (p *Plan) EndlessDiagnostics() spec.Diagnostics {
	if p.Spec == nil || p.Spec.Epochs != 0 {
		return nil
	}
	var out spec.Diagnostics
	for _, n := range p.Nodes {
		if _, ok := n.Stage.Config.(WholeWriter); !ok {
			continue
		}
		if n.Stage.Above(func(s *spec.Stage) bool { return s.Type == "take" }) != nil {
			continue
		}
		path := p.stagePath(n.Stage, "")
		out = append(out, spec.Diagnostic{Pos: p.Spec.PosOf(path), Path: path, Severity: spec.SevWarning,
			Message: "with epochs: 0 the input of this sink never ends (no take above it), and its output is renamed into place only when the run ends: stopped, the run commits nothing; set epochs, or put a take above this sink"})
	}
	return out
}

// cutBelow returns a take that may end the stream inside st's first pass
// on a path from st to a sink, where every such path has one, or nil: a
// branch that reads the whole pass (a sink beside the take) fills a cache
// anyway (validate warned of one that completed). in gives the
// count that reaches a stage.
func cutBelow(st *spec.Stage, in func(*spec.Stage) int64) *spec.Stage {
	var first *spec.Stage
	seen := map[*spec.Stage]bool{}
	// uncut says whether a path from s reaches a sink without a take that
	// cuts; a stage seen before said no, or the walk would have ended.
	var uncut func(s *spec.Stage) bool
	uncut = func(s *spec.Stage) bool {
		for _, o := range s.Outputs {
			if seen[o] {
				continue
			}
			seen[o] = true
			if o.Type == "take" {
				c, ok := o.Config.(Counter)
				if n := in(o); !ok || n < 0 || c.EpochSamples(n) < n {
					if first == nil {
						first = o
					}
					continue
				}
			}
			if len(o.Outputs) == 0 || uncut(o) {
				return true
			}
		}
		return false
	}
	if uncut(st) {
		return nil
	}
	return first
}

// Diagnostics returns every problem of the plan that the spec's own
// checks (spec.Load) cannot see, as piperun validate and apply report
// them: a cache a take keeps partial, a sink an endless run never commits,
// buffers that do not fit the memory budget, and, with environment, a
// budget larger than this machine. engine.Start runs a plan as it is
// given; a caller that runs a spec should refuse it when these hold an
// error, as apply does, since a run of buffers that do not fit stalls.
func (p *Plan) Diagnostics(environment bool) spec.Diagnostics {
	out := append(append(p.CacheDiagnostics(), p.EndlessDiagnostics()...), p.FitDiagnostics()...)
	if environment {
		out = append(out, p.MachineDiagnostics()...)
	}
	return out
}

// FitDiagnostics returns Fit's problems as diagnostics at their positions
// in the spec: errors for what a run cannot do, warnings for what it copes
// with.
func (p *Plan) FitDiagnostics() spec.Diagnostics {
	var out spec.Diagnostics
	for _, f := range p.Fit() {
		sev := spec.SevError
		if f.Warning {
			sev = spec.SevWarning
		}
		out = append(out, spec.Diagnostic{Pos: p.Spec.PosOf(f.Path), Path: f.Path, Message: f.Message, Severity: sev})
	}
	return out
}

// Text writes the plan as a table.
func (p *Plan) Text(w io.Writer) {
	// A drawn seed is not printed: the plan runs nothing with it, and a
	// number that differs every time would make plans useless to diff.
	seed := fmt.Sprint(p.Seed)
	if p.SeedRandom {
		seed = "random"
	}
	epochs := fmt.Sprint(p.Spec.Epochs)
	if p.Spec.Epochs == 0 {
		epochs = "until stopped"
	}
	fmt.Fprintf(w, "pipeline %s: %d stages, seed %s, epochs %s, deterministic %v, memory %s, workers %d\n",
		p.Spec.Name, len(p.Nodes), seed, epochs, p.Spec.Deterministic, spec.ByteSize(p.Memory), p.Workers)
	for _, r := range p.Rewrites {
		fmt.Fprintf(w, "rewritten: %s\n", r.Why)
	}
	for _, r := range p.Kept {
		fmt.Fprintf(w, "not rewritten: %s\n", r.Why)
	}
	if len(p.Rewrites) > 0 {
		fmt.Fprintln(w, "(optimize: false runs the stages as written)")
	}
	rows := [][]string{{"STAGE", "TYPE", "INPUTS", "PAR", "BUFFER", "SAMPLE", "SHARE", "OUTPUT"}}
	var total int64
	var atLeast bool
	var reserved, passes, unknownPasses []string
	pass := p.cachePasses()
	for _, n := range p.Nodes {
		ins := make([]string, len(n.Stage.Inputs))
		for i, in := range n.Stage.Inputs {
			ins[i] = in.Name
		}
		in := strings.Join(ins, ",")
		if in == "" {
			in = "-"
		}
		sz, share := "?", "-"
		if n.SampleBytes >= 0 {
			sz = spec.ByteSize(n.SampleBytes).String()
			if n.Probed {
				sz = "~" + sz
			}
		}
		buffer := fmt.Sprint(n.Buffer)
		held, fits, lower := p.held(n)
		if fits > 0 {
			buffer = fmt.Sprintf("%d/%d", fits, n.Buffer)
		}
		// An in-memory cache holds its whole first pass, not one sample
		// (a review: plan said 588KiB where the run held 115MiB).
		if cp, ok := pass[n.Stage]; ok {
			held, lower = cp.bytes, !cp.exact
			passes = append(passes, n.Stage.Name)
		} else if h, ok := n.Stage.Config.(EpochHolder); ok && h.EpochShare() >= 1 {
			unknownPasses = append(unknownPasses, n.Stage.Name)
		}
		if held > 0 {
			share = spec.ByteSize(held).String()
			if lower {
				share = ">=" + share
			}
			// The stages below a cache that hold its samples as they are
			// hold the values its pass counts (the engine reserves them
			// once): counted again, the total was twice the run's peak.
			if _, below := pass[cacheAbove(n.Stage)]; !below {
				total = addSat(total, held)
				atLeast = atLeast || lower
			}
		}
		if n.Reserved > 0 {
			reserved = append(reserved, fmt.Sprintf("%s %s", n.Stage.Name, spec.ByteSize(n.Reserved)))
			total = addSat(total, n.Reserved)
		}
		out := n.Stage.Schema.String()
		if n.Stage.Role == spec.RoleSink {
			out, sz = "-", "-"
		}
		rows = append(rows, []string{n.Stage.Name, n.Stage.Type, in, fmt.Sprint(n.Parallelism), buffer, sz, share, out})
	}
	// Columns keep these widths unless a value is wider, when the whole
	// column widens with it (a shrunk shuffle's "10230/1000000", a long
	// stage name) rather than pushing that row's later columns out of line.
	widths := []int{16, 15, 16, 4, 8, 10, 10}
	for _, r := range rows {
		for i := range widths {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	for _, r := range rows {
		// Names left-aligned, numbers right-aligned.
		fmt.Fprintf(w, "%-*s %-*s %-*s %*s %*s %*s %*s  %s\n", widths[0], r[0], widths[1], r[1], widths[2], r[2],
			widths[3], r[3], widths[4], r[4], widths[5], r[5], widths[6], r[6], r[7])
	}
	// The sum a reader would otherwise add up, against the budget.
	sum := spec.ByteSize(total).String()
	if atLeast {
		sum = ">=" + sum
	}
	if len(reserved) > 0 {
		sum += " (with " + strings.Join(reserved, ", ") + " reserved for the stages' own use)"
	}
	if len(passes) > 0 {
		sum += fmt.Sprintf(" (with the first pass that %s holds in memory, counted once for the stages below that hold its samples)", strings.Join(passes, " and "))
	}
	if len(unknownPasses) > 0 {
		sum += fmt.Sprintf(" (and the first pass that %s holds in memory, up to half the budget, its length unknown here: validate counts the files)", strings.Join(unknownPasses, " and "))
	}
	fmt.Fprintf(w, "memory: the shares total %s of the %s budget; queues between stages take what is left\n", sum, spec.ByteSize(p.Memory))
}

// cachePass is what an in-memory cache's first pass holds.
type cachePass struct {
	bytes int64
	exact bool
}

// cachePasses are the in-memory caches whose first pass's size is known.
// One that a take below cuts short never holds its pass, as fitEpochs
// has it.
func (p *Plan) cachePasses() map[*spec.Stage]cachePass {
	m := map[*spec.Stage]cachePass{}
	_, exactIn := p.epochCounts(true)
	for _, n := range p.Nodes {
		if h, ok := n.Stage.Config.(EpochHolder); ok && h.EpochShare() >= 1 && !p.takeBelow(n.Stage, exactIn) {
			if eb, exact := p.EpochBytes(n.Stage.Name); eb > 0 {
				m[n.Stage] = cachePass{eb, exact}
			}
		}
	}
	return m
}

// passesOn are the stage types that pass on the samples they are given,
// values and all: a map may set new values of the same schema (a re-test:
// a shuffle below a map below a cache was taken for one holding the
// cache's samples, and the total was half the run's peak).
var passesOn = map[string]bool{"shuffle": true, "prefetch": true, "take": true, "skip": true, "filter": true}

// cacheAbove is the in-memory cache right above st's chain of stages that
// pass their input on as it is (passesOn), where st is in one, or nil: the
// stage whose samples st holds.
func cacheAbove(st *spec.Stage) *spec.Stage {
	for passesOn[st.Type] && len(st.Inputs) == 1 {
		up := st.Inputs[0]
		if h, ok := up.Config.(EpochHolder); ok && h.EpochShare() >= 1 {
			return up
		}
		st = up
	}
	return nil
}

// ident turns a stage name into a node ID for dot and Mermaid, one to
// one: letters and digits stay, '_' becomes "__" and any other character
// "_" and its code in six hex digits, so "a-b" and "a_b" stay apart.
func ident(s string) string {
	var b strings.Builder
	b.WriteString("s_")
	for _, r := range s {
		switch {
		case r == '_':
			b.WriteString("__")
		case r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "_%06x", r)
		}
	}
	return b.String()
}

func (p *Plan) edges() [][2]*Node {
	byStage := map[*spec.Stage]*Node{}
	for _, n := range p.Nodes {
		byStage[n.Stage] = n
	}
	var out [][2]*Node
	for _, n := range p.Nodes {
		for _, in := range n.Stage.Inputs {
			out = append(out, [2]*Node{byStage[in], n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i][1].Stage.Index < out[j][1].Stage.Index })
	return out
}

func (n *Node) label() string {
	l := fmt.Sprintf("%s\\n%s", n.Stage.Name, n.Stage.Type)
	if n.Parallelism > 1 {
		l += fmt.Sprintf(" ×%d", n.Parallelism)
	}
	if n.Buffer > 0 {
		l += fmt.Sprintf("\\nbuffer %d", n.Buffer)
	}
	return l
}

// Dot writes the DAG in Graphviz's dot language.
func (p *Plan) Dot(w io.Writer) {
	fmt.Fprintf(w, "digraph %q {\n", p.Spec.Name)
	for _, r := range p.Rewrites {
		fmt.Fprintf(w, "  // rewritten: %s\n", r.Why)
	}
	fmt.Fprintf(w, "  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n")
	for _, n := range p.Nodes {
		shape := ""
		switch n.Stage.Role {
		case spec.RoleSource:
			shape = ", shape=invhouse"
		case spec.RoleSink:
			shape = ", shape=house"
		}
		fmt.Fprintf(w, "  %s [label=\"%s\"%s];\n", ident(n.Stage.Name), n.label(), shape)
	}
	for _, e := range p.edges() {
		fmt.Fprintf(w, "  %s -> %s;\n", ident(e[0].Stage.Name), ident(e[1].Stage.Name))
	}
	fmt.Fprintln(w, "}")
}

// Mermaid writes the DAG as a Mermaid flowchart.
func (p *Plan) Mermaid(w io.Writer) {
	fmt.Fprintln(w, "flowchart TD")
	for _, r := range p.Rewrites {
		fmt.Fprintf(w, "  %%%% rewritten: %s\n", r.Why)
	}
	for _, n := range p.Nodes {
		l := strings.ReplaceAll(n.label(), "\\n", "<br/>")
		fmt.Fprintf(w, "  %s[\"%s\"]\n", ident(n.Stage.Name), l)
	}
	for _, e := range p.edges() {
		fmt.Fprintf(w, "  %s --> %s\n", ident(e[0].Stage.Name), ident(e[1].Stage.Name))
	}
}
