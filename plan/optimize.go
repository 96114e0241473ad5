package plan

import (
	"fmt"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// Rewrite is one change the planner made to the DAG as written, for the
// plan's text and the run's log and report; or, in Plan.Kept, one it
// considered and did not make.
type Rewrite struct {
	// Stage is the stage that moved; Past lists the stages it moved above,
	// nearest first (none for a stage kept where it is).
	Stage string   `json:"stage"`
	Past  []string `json:"past"`
	// SameOrder says a run that succeeds gives the same output as with
	// optimize: false, sample for sample. It is false where that is not
	// certain: the spec is not deterministic, or the shuffle as written
	// might have shrunk to its share of the budget (see pushShuffles).
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
// reads. A deterministic run that succeeds gives the same output, sample
// for sample:
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
// The exception, which the rewrite states (SameOrder false): a shuffle
// whose samples outgrow its share of the budget shuffles over fewer of
// them, drawing by their sizes. Where the plan cannot rule that out for
// the shuffle as written, the moved one, holding smaller samples, may
// shuffle over more: the same samples come out, maybe in another order.
// Runs that fail differ too: the moved map decodes in shuffled order and
// only what the shuffle emits, so a bad file may be met later, or, with a
// take below, not at all.
//
// A shuffle moves above the chain of maps right above it that each have
// on_error: fail and the next stage as their one consumer (another
// consumer would see a different stream), when no cache is downstream of
// it (a cache stores and replays the order it receives, and the stages
// above it may skip work it holds), as far up the chain as makes its
// samples smallest, and only if that is known to be smaller than what it
// holds as written (see heldBytes): a map that decodes a small crop out of
// an encoded image may shrink its samples, and then the shuffle is better
// where it is. Shuffles that stay behind a map are listed in kept, with
// the reason.
func pushShuffles(sp *spec.Spec, memory int64, budget string, workers int) (moved, kept []Rewrite) {
	for _, sh := range sp.Order {
		if sh.Type != "shuffle" || len(sh.Inputs) != 1 {
			continue
		}
		in := sh.Inputs[0]
		keep := func(format string, args ...any) {
			kept = append(kept, Rewrite{Stage: sh.Name, Past: []string{}, SameOrder: true,
				Why: fmt.Sprintf("shuffle %q stays behind %s %q: ", sh.Name, in.Type, in.Name) + fmt.Sprintf(format, args...)})
		}
		if in.Type != "map" {
			// A user who sees a map a stage or two above may expect the
			// move, so say why not.
			if m := mapAbove(in); m != nil {
				why := fmt.Sprintf("the planner moves a shuffle only up a chain of maps, and %s %q stands between it and map %q", in.Type, in.Name, m.Name)
				// Blame the stage alone only where the move would happen
				// without it.
				if r := stayBelow(sh, m); r != "" {
					why += fmt.Sprintf("; nor would it move above map %q without it: %s", m.Name, r)
				}
				keep("%s", why)
			}
			continue
		}
		if r := stayBelow(sh, nil); r != "" {
			keep("%s", r)
			continue
		}
		// chain[i] is the i-th map above the shuffle; size[i] what the
		// shuffle would hold above chain[i] (its input).
		var chain []*spec.Stage
		var size []int64
		for m := sh.Inputs[0]; m.Type == "map" && len(m.Inputs) == 1; m = m.Inputs[0] {
			if m.Skip() || len(m.Outputs) != 1 {
				break // stayBelow said why, for the first
			}
			chain = append(chain, m)
			size = append(size, heldBytes(m.Inputs[0], m.InSchemas[0]))
		}
		if len(chain) == 0 {
			continue
		}
		asWritten := heldBytes(chain[0], sh.InSchemas[0])
		best := -1
		for i, b := range size {
			if b >= 0 && (best < 0 || b < size[best]) {
				best = i
			}
		}
		if asWritten < 0 || best < 0 || size[best] >= asWritten {
			keep("%s", noSmaller(asWritten, best < 0, len(chain) == 1))
			continue
		}
		var past []string
		for _, m := range chain[:best+1] {
			swapDown(sp, m, sh)
			past = append(past, m.Name)
		}
		r := Rewrite{Stage: sh.Name, Past: past, SameOrder: true,
			Why: fmt.Sprintf("shuffle %q moved above %s: it holds %s samples instead of %s%s", sh.Name, quoteList("map", past),
				sh.Schema, chain[0].Schema, about(chain[0].Schema))}
		origin := originBytes(chain[0])
		room, _ := sharedRoom(sp, sh.Config.(BufferSharer), memory)
		switch n, buffer := shrunkTo(sp, sh, asWritten+origin, memory, workers); {
		case !sp.Deterministic:
			r.SameOrder = false
			r.Why += "; the spec is not deterministic, so its output differs run to run either way"
		case origin < 0:
			r.SameOrder = false
			r.Why += "; its samples' origins (the file each came from) are of unknown length, so as written it might shrink to its share of " + budget + ": the same samples come out, maybe in another order than with optimize: false"
		case n > 0:
			r.SameOrder = false
			r.Why += fmt.Sprintf("; as written, its %d samples might fill its share of %s (%s), and then it shuffles over fewer: the same samples come out, maybe in another order than with optimize: false",
				buffer, budget, spec.ByteSize(room))
		default:
			r.Why += "; a run that succeeds gives the same output as with optimize: false"
		}
		moved = append(moved, r)
	}
	return moved, kept
}

// pathBytes bounds a string that a files source made (a path, a class
// name): Linux's longest path. It also bounds the path in a sample's
// origin (see originBytes).
const pathBytes = 4096

// FieldSetter is implemented by the configs of stages that write fields
// (map): SetsField reports whether the stage writes field.
type FieldSetter interface {
	SetsField(field string) bool
}

// heldBytes estimates a sample of schema s, emitted by stage st, as the
// plan does, except that a string a files source made counts as
// pathBytes instead of unknown; -1 if the size of any field is unknown
// (bytes, other strings, tensors of unknown shape, the fields of an open
// schema), which is where a map may as well shrink samples as grow them.
func heldBytes(st *spec.Stage, s sample.Schema) int64 {
	for _, f := range s.Fields {
		if f.Type.Kind == sample.String && !fromFilesField(st, f.Name) {
			return -1
		}
	}
	return s.EstimateBytesStrings(pathBytes)
}

// fromFilesField reports whether field, as stage st emits it, was made by
// a files source and only passed on since: no map wrote it, and every
// stage on the way hands fields on untouched (spec.PassThrough) or is a
// map that does not write it.
func fromFilesField(st *spec.Stage, field string) bool {
	if st.Type == "files" {
		return true
	}
	_, pass := st.Config.(spec.PassThrough)
	if fs, ok := st.Config.(FieldSetter); ok {
		pass = !fs.SetsField(field)
	}
	if !pass || len(st.Inputs) == 0 {
		return false
	}
	found := false
	for i, in := range st.Inputs {
		if _, ok := st.InSchemas[i].Lookup(field); !ok {
			continue
		}
		found = true
		if !fromFilesField(in, field) {
			return false
		}
	}
	return found
}

// describeBytes bounds the name a sample without an origin gets in a
// batch's origin: "sample N (epoch E)".
const describeBytes = 64

// originBytes bounds the origin of the samples st emits, which the run
// counts in their size and the schema does not: a files source's path; a
// record's or line's path and number; a batch's "batch N (epoch E) of
// FIRST … LAST", twice what it batches; whatever other stages pass on.
// -1 if unbounded: records read from a path no files source made.
func originBytes(st *spec.Stage) int64 {
	switch st.Type {
	case "files":
		return pathBytes
	case "tfrecord", "jsonl":
		if len(st.Inputs) == 1 && fromFilesField(st.Inputs[0], "path") {
			return pathBytes + describeBytes
		}
		return -1
	case "batch":
		in := originBytes(st.Inputs[0])
		if in < 0 {
			return -1
		}
		return describeBytes + 2*max(in, describeBytes)
	}
	var n int64
	for _, in := range st.Inputs {
		b := originBytes(in)
		if b < 0 {
			return -1
		}
		n = max(n, b)
	}
	return n
}

// about is " (about N bytes)" for a schema the plan can size, "" for one
// it cannot (strings among its fields, say).
func about(s sample.Schema) string {
	if b := s.EstimateBytes(); b >= 0 {
		return fmt.Sprintf(" (about %s)", spec.ByteSize(b))
	}
	return ""
}

// shrunkTo says whether the shuffle sh, holding samples of at most bytes
// each, might fill its share of the budget before its buffer: n is then
// at least how many it would hold (as the run shrinks it, even a buffer
// over the whole budget), 0 when it fits.
func shrunkTo(sp *spec.Spec, sh *spec.Stage, bytes, memory int64, workers int) (n int64, buffer int) {
	b, ok := sh.Config.(Bufferer)
	bs, ok2 := sh.Config.(BufferSharer)
	if !ok || !ok2 || bytes <= 0 || memory <= 0 {
		return 0, 0
	}
	buffer = b.BufferSamples(workers)
	switch room, _ := sharedRoom(sp, bs, memory); {
	case int64(buffer)*bytes > room:
		return max(1, room/bytes), buffer
	}
	return 0, buffer
}

// cacheBelow reports whether a cache stage is downstream of st.
func cacheBelow(st *spec.Stage) bool {
	return st.Below(func(s *spec.Stage) bool { return s.Type == "cache" }) != nil
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

// stayBelow says why shuffle sh stays below map m, the stage above it
// (m nil) or the first map above a stage between them; "" if it would
// move, at least above m. It looks at m alone, not the chain above it.
func stayBelow(sh, m *spec.Stage) string {
	if cacheBelow(sh) {
		return "a cache below it stores the order it receives"
	}
	direct := m == nil
	if direct {
		m = sh.Inputs[0]
	}
	switch {
	case m.Skip():
		return "a map that skips bad samples changes what the shuffle draws from"
	case len(m.Outputs) != 1:
		return "the map's other consumers would see its output in another order"
	}
	if direct {
		return "" // pushShuffles weighs the sizes along the chain
	}
	// What the shuffle would hold right below m, as the stage between
	// passes m's samples on.
	asWritten, above := heldBytes(m, m.Schema), heldBytes(m.Inputs[0], m.InSchemas[0])
	if asWritten < 0 || above < 0 || above >= asWritten {
		return noSmaller(asWritten, above < 0, true)
	}
	return ""
}

// noSmaller says why a shuffle holding samples of asWritten bytes (-1 if
// unknown) would gain nothing above maps whose inputs are of unknown size
// (unknownAbove) or no smaller; one says there is one map.
func noSmaller(asWritten int64, unknownAbove, one bool) string {
	const unknown = "of unknown size (bytes, strings not from files, tensors of unknown shape or the open fields of jsonl)"
	switch {
	case asWritten < 0:
		return "its samples as written are " + unknown
	case unknownAbove && one:
		return "the map's input is " + unknown + ": it may be larger than its output"
	case unknownAbove:
		return "the maps' inputs are " + unknown + ": they may be larger than their outputs"
	case one:
		return "its samples would be no smaller above the map"
	}
	return "its samples would be no smaller above the maps"
}

// mapAbove returns the first map up the chain of one-input, one-output
// stages above st (st included), or nil.
func mapAbove(st *spec.Stage) *spec.Stage {
	for cur := st; len(cur.Inputs) == 1 && len(cur.Outputs) == 1; cur = cur.Inputs[0] {
		if cur.Type == "map" {
			return cur
		}
	}
	return nil
}
