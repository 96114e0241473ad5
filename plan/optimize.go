package plan

import (
	"fmt"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// Rewrite is one change the planner made to the DAG as written, for the
// plan's text and the run's log and report.
type Rewrite struct {
	// Stage is the stage that moved; Past lists the stages it moved above,
	// nearest first.
	Stage string   `json:"stage"`
	Past  []string `json:"past"`
	// SameOrder says the output is the same as optimize: false gives,
	// sample for sample; false when the shuffle as written would have
	// shrunk to its share of the budget (see pushShuffles).
	SameOrder bool `json:"same_order"`
	// Why is a sentence for people.
	Why string `json:"why"`
}

// pushShuffles moves every shuffle above the maps that feed it, when that
// changes nothing but memory: tf.data users are told to shuffle file names
// or records rather than decoded images, and `map → shuffle` is what they
// write anyway. A shuffle holds its whole buffer, so behind a decoding map
// it holds decoded images (W1: 200 × 147 KiB, and every one of them fresh
// memory in the first epoch); in front of it, the paths or records the map
// reads. The output of a run that succeeds is the same, sample for sample,
// when the spec is deterministic:
//
//   - a map keeps each sample's ID, and its random functions draw from
//     generators keyed by (seed, epoch, ID, stage, call site), so its output
//     for a sample does not depend on where in the stream it came;
//   - a map with on_error: fail emits exactly one sample per input, in
//     order, so the shuffle sees the same sequence of IDs either way and
//     draws the same permutation (its generator is keyed by its own name
//     and the epoch). A map that skips bad samples would change the count
//     the shuffle sees, and so its draws: it stays where it is.
//
// One exception, which the rewrite states: a shuffle whose samples would
// outgrow its share of the budget shuffles over fewer samples (and draws
// depending on their sizes). If the plan estimates that the shuffle as
// written would do so, the moved one, holding smaller samples, shuffles
// over more: the same samples come out, in a better-mixed but different
// order than with optimize: false. (A run that fails on a bad sample may
// also name a different one first: the moved map decodes in shuffled
// order, and only what the shuffle has emitted.)
//
// Only a map whose one consumer is the shuffle moves (another consumer
// would see a different stream), only when no cache is downstream of the
// shuffle (a cache stores and replays the order it receives, and the
// stages above it may skip work it already holds), and only when the map's
// input is known to be smaller than its output (see heldBytes): a map
// that decodes a small crop out of an encoded image may shrink its
// samples, and then the shuffle is better where it is.
func pushShuffles(sp *spec.Spec, memory int64, workers int) []Rewrite {
	var out []Rewrite
	for _, sh := range sp.Order {
		if sh.Type != "shuffle" || len(sh.Inputs) != 1 || cacheBelow(sh) {
			continue
		}
		asWritten := heldBytes(sh.InSchemas[0])
		var past []string
		for {
			m := sh.Inputs[0]
			if m.Type != "map" || m.Skip() || len(m.Outputs) != 1 || len(m.Inputs) != 1 {
				break
			}
			in, out := heldBytes(m.InSchemas[0]), heldBytes(m.Schema)
			if in < 0 || out < 0 || in >= out {
				break
			}
			swapDown(sp, m, sh)
			past = append(past, m.Name)
		}
		if len(past) == 0 {
			continue
		}
		r := Rewrite{Stage: sh.Name, Past: past, SameOrder: true,
			Why: fmt.Sprintf("shuffle %q runs before %s, so it holds samples as they were before %s, not after", sh.Name, quoteList("map", past), pronoun(past))}
		if held := shrunkTo(sh, asWritten, memory, workers); held > 0 {
			r.SameOrder = false
			r.Why += fmt.Sprintf(". As written, samples of about %s would fill its share of resources.memory at about %d of its %d, so it now shuffles over more: the same samples come out, in another order than with optimize: false",
				spec.ByteSize(asWritten), held, sh.Config.(Bufferer).BufferSamples(workers))
		} else {
			r.Why += "; the samples out and their order are the same"
		}
		out = append(out, r)
	}
	return out
}

// pathBytes is what heldBytes counts for a string: Linux's longest path.
// Strings in samples are mostly paths, labels and class names.
const pathBytes = 4096

// heldBytes estimates a sample of schema s as the plan does, except that
// a string counts as pathBytes instead of unknown; -1 if the size of any
// field is unknown (bytes, tensors of unknown shape, fields of an open
// schema), which is where a map may as well shrink samples as grow them.
func heldBytes(s sample.Schema) int64 { return s.EstimateBytesStrings(pathBytes) }

// shrunkTo returns about how many samples of bytes each the shuffle sh
// would hold before they fill its share of the budget, if that is fewer
// than its buffer; 0 if the buffer fits (see stages.shuffleStage).
func shrunkTo(sh *spec.Stage, bytes, memory int64, workers int) int64 {
	b, ok := sh.Config.(Bufferer)
	bs, ok2 := sh.Config.(BufferSharer)
	if !ok || !ok2 || bytes <= 0 || memory <= 0 {
		return 0
	}
	room := memory / int64(max(1, bs.BufferShare()))
	if int64(b.BufferSamples(workers))*bytes <= room {
		return 0
	}
	return max(1, room/bytes)
}

// cacheBelow reports whether a cache stage is downstream of st.
func cacheBelow(st *spec.Stage) bool {
	seen := map[*spec.Stage]bool{}
	var walk func(*spec.Stage) bool
	walk = func(s *spec.Stage) bool {
		for _, o := range s.Outputs {
			if seen[o] {
				continue
			}
			seen[o] = true
			if o.Type == "cache" || walk(o) {
				return true
			}
		}
		return false
	}
	return walk(st)
}

// swapDown turns up → m → sh → downs into up → sh → m → downs. sh passes
// samples through untouched, so it takes m's input schema, and m's own
// schemas stay what they were.
func swapDown(sp *spec.Spec, m, sh *spec.Stage) {
	up := m.Inputs[0]
	replace(up.Outputs, m, sh)
	for _, d := range sh.Outputs {
		replace(d.Inputs, sh, m)
	}
	m.Outputs, sh.Outputs = sh.Outputs, []*spec.Stage{m}
	sh.Inputs, m.Inputs = []*spec.Stage{up}, []*spec.Stage{sh}
	sh.InSchemas = append([]sample.Schema(nil), m.InSchemas...)
	sh.Schema = m.InSchemas[0]
	// Keep Order topological: sh takes m's place, m follows right after.
	var order []*spec.Stage
	for _, s := range sp.Order {
		switch s {
		case m:
			order = append(order, sh, m)
		case sh:
		default:
			order = append(order, s)
		}
	}
	sp.Order = order
}

func replace(l []*spec.Stage, old, new *spec.Stage) {
	for i, s := range l {
		if s == old {
			l[i] = new
		}
	}
}

func pronoun(l []string) string {
	if len(l) == 1 {
		return "it"
	}
	return "them"
}

// quoteList names stages of one type: `map "a"` or `maps "b" and "a"`.
func quoteList(typ string, names []string) string {
	if len(names) == 1 {
		return fmt.Sprintf("%s %q", typ, names[0])
	}
	s := typ + "s "
	for i := len(names) - 1; i >= 0; i-- {
		s += fmt.Sprintf("%q", names[i])
		switch {
		case i > 1:
			s += ", "
		case i == 1:
			s += " and "
		}
	}
	return s
}
