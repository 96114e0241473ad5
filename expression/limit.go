package expression

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/piperun/piperun/internal/bytesize"
	"github.com/piperun/piperun/tensor"
)

// DefaultMaxValueBytes bounds a tensor sized by a function's arguments
// unless a run sets otherwise (SetMaxValueBytes). It also bounds the
// sizes validate accepts from constant arguments, so that the memory
// estimates built on them stay far from int64's limit.
const DefaultMaxValueBytes int64 = 1 << 40

// maxValue is what a function that sizes its result from its arguments
// (one_hot's n, resize's h and w) may allocate: a size read from a sample
// (one_hot(i, n) with n a field) is known only as the sample runs, and one
// of 40 GB killed the process with the runtime's out-of-memory abort
// before the budget could see the sample.
var maxValue atomic.Int64

// bounds are the bounds set and not yet restored, one per run; the
// largest holds, so that runs overlapping in one process never refuse
// what the largest budget among them can hold, whatever order they end
// in (a swap-and-restore left a finished run's bound behind; found in
// review).
var bounds struct {
	sync.Mutex
	set map[*int64]bool
}

func init() { maxValue.Store(DefaultMaxValueBytes) }

// SetMaxValueBytes sets the largest tensor a function may size from its
// arguments (0 or less: DefaultMaxValueBytes) and returns a function that
// takes the bound away again. A run sets it to its memory budget (engine),
// since a sample larger than that could never be held; where runs overlap
// in one process, the largest of their bounds holds.
func SetMaxValueBytes(n int64) (restore func()) {
	if n <= 0 {
		n = DefaultMaxValueBytes
	}
	key := &n
	bounds.Lock()
	defer bounds.Unlock()
	if bounds.set == nil {
		bounds.set = map[*int64]bool{}
	}
	bounds.set[key] = true
	maxValue.Store(largestBound())
	return func() {
		bounds.Lock()
		defer bounds.Unlock()
		delete(bounds.set, key)
		maxValue.Store(largestBound())
	}
}

// largestBound is the largest bound set, or the default where none is;
// bounds is locked.
func largestBound() int64 {
	if len(bounds.set) == 0 {
		return DefaultMaxValueBytes
	}
	var m int64
	for k := range bounds.set {
		m = max(m, *k)
	}
	return m
}

// valueFits says whether a tensor of dt and shape fits under limit, and
// its size in bytes (math.MaxInt64 where it overflows).
func valueFits(limit int64, dt tensor.DType, shape ...int) (int64, bool) {
	n := int64(dt.Size())
	for _, d := range shape {
		if d < 0 {
			continue // unknown until the run: checked then
		}
		if d > 0 && n > math.MaxInt64/int64(d) {
			return math.MaxInt64, false
		}
		n *= int64(d)
	}
	return n, n <= limit
}

// sizeFits is nil, or an error saying that a dt tensor of shape is larger
// than the run's memory budget allows any sample to be.
func sizeFits(dt tensor.DType, shape ...int) error {
	return sizeUnder(maxValue.Load(), dt, shape...)
}

func sizeUnder(limit int64, dt tensor.DType, shape ...int) error {
	n, ok := valueFits(limit, dt, shape...)
	size, bound := byteWords(n), byteWords(limit)
	if size == bound {
		size, bound = fmt.Sprintf("%d bytes", n), fmt.Sprintf("%d bytes", limit)
	}
	switch {
	case ok:
		return nil
	case n == math.MaxInt64:
		return fmt.Errorf("a %s tensor of shape %v is larger than any memory: its size in bytes overflows int64", dt, shape)
	case limit == DefaultMaxValueBytes:
		return fmt.Errorf("a %s tensor of shape %v would take %s, more than the %s any sample may take", dt, shape, size, bound)
	}
	return fmt.Errorf("a %s tensor of shape %v would take %s, more than the run's memory budget (%s)", dt, shape, size, bound)
}

// byteWords formats n bytes as a spec says sizes.
func byteWords(n int64) string { return bytesize.Format(n) }
