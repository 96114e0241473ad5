package stages

import "fmt"

// Buffers is the share of the memory budget that the stages of one kind
// holding many samples at once fill together: the shuffles' buffers, or
// the in-memory caches; half the budget for each kind, however many
// stages of it a pipeline has, split evenly among them when the run
// starts. Each took half of its own, so two shuffles filled the whole
// budget and the run stalled at any size of it (found by a memory
// audit). The split is fixed, and each stage measures only its own bytes
// against its part: a count shared between stages, read as they moved,
// made a deterministic run's order differ run to run (a review). A
// shuffle below a cache holds copies sharing the cache's memory, so the
// two kinds do not split one half.
type Buffers struct {
	room  int64
	share int64
	ways  int
	kind  string // "shuffles" or "in-memory caches"
}

// NewBuffers returns the share of memory bytes (what the budget leaves
// samples, plan.SampleRoom; 0: no budget, no bound) split among ways
// stages of a kind ("shuffles"). A share is at least a byte where there
// is a budget, since 0 means no bound.
func NewBuffers(memory int64, ways int, kind string) *Buffers {
	ways = max(1, ways)
	b := &Buffers{room: memory, share: memory / ShuffleShare / int64(ways), ways: ways, kind: kind}
	if memory > 0 {
		b.share = max(1, b.share)
	}
	return b
}

// Room returns the memory the shares are parts of.
func (b *Buffers) Room() int64 { return b.room }

// Share returns the bytes each of the stages may hold.
func (b *Buffers) Share() int64 { return b.share }

// Ways returns how many stages split the half.
func (b *Buffers) Ways() int { return b.ways }

// fits reports whether a stage holding own bytes may take n more.
func (b *Buffers) fits(own, n int64) bool { return b.share <= 0 || own+n <= b.share }

// over reports whether a stage holding own bytes holds more than its part.
func (b *Buffers) over(own int64) bool { return b.share > 0 && own > b.share }

// splitWords says how the half is split, if it is: for a message.
func (b *Buffers) splitWords() string {
	if b.ways > 1 {
		return fmt.Sprintf(", a 1/%d part of the half that the %d %s split", b.ways, b.ways, b.kind)
	}
	return ""
}
