package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// GCPercent is the collector's target heap growth (GOGC) for a run whose
// live heap is large. Sample tensors are recycled by hand (tensor.Alloc),
// so what the collector frees is small garbage, and the slack Go's default
// of 100 leaves (a heap twice what is live) buys only fresh memory, which
// costs a page fault per 4 KiB on first touch. 25 keeps the heap within a
// quarter of what is live.
const GCPercent = 25

// GCSlackFloor is the least growth above the live heap the collector
// allows before its next cycle. A quarter of a small heap is a few
// megabytes: W1's heap grows from 1 to 44 MiB in its first tenth of a
// second, and at 25 % that was 17 collections, each taking a quarter of
// the processors and stopping the workers twice, for garbage of a few
// megabytes a run (bench/RESULTS.md, run N: 6 % of W1's elapsed time).
// 16 MiB was as fast as 32 there, and a heap can hold that much garbage
// more than at 25 %, so the smaller.
const GCSlackFloor = 16 << 20

// gcPercentFor is the GOGC that lets a heap of live bytes grow by the
// larger of GCPercent and GCSlackFloor. The runtime scales its minimum
// heap (4 MiB) by GOGC too, so the percent is capped where that minimum
// reaches the floor: a tiny heap, or one not yet marked (live 0), grows
// to GCSlackFloor before its first cycle, not to a multiple of it.
func gcPercentFor(live uint64) int {
	const most = GCSlackFloor * 100 / (4 << 20)
	if live == 0 {
		return most
	}
	floor := (GCSlackFloor*100 + live - 1) / live
	return int(min(most, max(GCPercent, floor)))
}

var tuneOnce sync.Once

// setMemoryLimit points the garbage collector at the budget, so it works
// harder before the heap outgrows it, and sizes its growth from the live
// heap after every cycle (gcPercentFor), unless GOMEMLIMIT or GOGC say
// otherwise. (The pool of idle tensor buffers lives inside the budget's
// free room: engine.Run binds it.)
func setMemoryLimit(budget int64) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		tuneOnce.Do(func() {
			retuneGC()
			armGCTuner()
		})
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return
	}
	debug.SetMemoryLimit(budget + MemoryHeadroom)
}

// armGCTuner calls retuneGC after the next garbage collection, and again
// after each one after that. The memory limit still bounds the heap: the
// floor only spaces out the cycles of a heap far below it.
func armGCTuner() {
	sentinel := new([16]byte)
	runtime.AddCleanup(sentinel, func(struct{}) {
		retuneGC()
		armGCTuner()
	}, struct{}{})
}

// retuneGC sets GOGC for the live heap the last cycle marked.
func retuneGC() {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var live uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
	}
	debug.SetGCPercent(gcPercentFor(live))
}
