package imageops

import (
	"fmt"
	"sync"
)

// DefaultDecodeMemory is what decodes in flight may hold together unless a
// run sets otherwise (SetDecodeMemory): the headroom beyond a run's memory
// budget that GOMEMLIMIT leaves for decoder scratch.
const DefaultDecodeMemory int64 = 128 << 20

// decodeMem bounds the memory that decodes in flight hold together. A
// decoded frame is no sample until its stage emits it, so the run's budget
// does not see it: without this bound, two workers decoding 144-megapixel
// PNGs (under the pixel limit) took a process with a 256 MiB budget to
// 1.9 GB.
var decodeMem = &byteSem{limit: DefaultDecodeMemory}

// DecodeMemoryFor is the decode memory a run with the given budget allows:
// a quarter of the budget, and at least DefaultDecodeMemory, so that a
// large budget decodes large photos (a 50-megapixel RGB frame is 143 MiB)
// without a small one letting decodes double it.
func DecodeMemoryFor(budget int64) int64 { return max(DefaultDecodeMemory, budget/4) }

// SetDecodeMemory sets what decodes in flight may hold together, in bytes
// (0 or less: DefaultDecodeMemory), and returns a function that takes the
// bound away again. The bound is the process's: a run sets it from its
// budget (engine), and where runs overlap in one process the largest of
// their bounds holds, whatever order they end in (a restore of the value
// found left a finished run's bound behind; a concurrency review).
func SetDecodeMemory(n int64) (restore func()) {
	if n <= 0 {
		n = DefaultDecodeMemory
	}
	key := &n
	decodeMem.mu.Lock()
	defer decodeMem.mu.Unlock()
	if decodeMem.bounds == nil {
		decodeMem.bounds = map[*int64]bool{}
	}
	decodeMem.bounds[key] = true
	decodeMem.setLimit()
	return func() {
		decodeMem.mu.Lock()
		defer decodeMem.mu.Unlock()
		delete(decodeMem.bounds, key)
		decodeMem.setLimit()
	}
}

// setLimit makes the largest bound set the limit, or the default where
// none is, and wakes the decodes waiting; s.mu is held.
func (s *byteSem) setLimit() {
	s.limit = DefaultDecodeMemory
	if len(s.bounds) > 0 {
		s.limit = 0
		for b := range s.bounds {
			s.limit = max(s.limit, *b)
		}
	}
	s.cond().Broadcast()
}

// byteSem is a counting semaphore of bytes.
type byteSem struct {
	mu    sync.Mutex
	c     *sync.Cond
	used  int64
	limit int64
	// bounds are the bounds set and not yet taken away (SetDecodeMemory).
	bounds map[*int64]bool
}

func (s *byteSem) cond() *sync.Cond {
	if s.c == nil {
		s.c = sync.NewCond(&s.mu)
	}
	return s.c
}

// acquireDecode takes the memory a decode of an h×w image will hold,
// bytesPerPixel for each pixel, waiting while other decodes hold it. A
// decode that could never fit fails at once, before anything is allocated.
// The wait cannot deadlock: decodes hold the memory only while they run,
// and never wait for anything else meanwhile.
func acquireDecode(h, w int, bytesPerPixel int64) (release func(), err error) {
	n := int64(h) * int64(w) * bytesPerPixel
	s := decodeMem
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > s.limit {
		return nil, fmt.Errorf("%w: decoding this %dx%d (width×height) image takes about %s, more than the %s that decodes may hold beyond the memory budget "+
			"(a quarter of resources.memory, at least 128MiB): raise resources.memory, or shrink such images before the pipeline",
			ErrTooLarge, w, h, mib(n), mib(s.limit))
	}
	for s.used+n > s.limit {
		s.cond().Wait()
	}
	s.used += n
	return func() {
		s.mu.Lock()
		s.used -= n
		s.cond().Broadcast()
		s.mu.Unlock()
	}, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }
