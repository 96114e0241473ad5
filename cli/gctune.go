package cli

import (
	"github.com/piperun/piperun/imageops"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
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

// FirstCycleHeap is the heap at which a run's first collection comes. A
// run allocates its working set (pooled tensor buffers, a batch, decoder
// scratch) in its first tenth of a second, and a collection on the way
// finds all of it live: W1's two, at 16 and 35 MiB, freed 2 and 1 MiB of
// its 47, and it ran 1.4 % faster without them (bench/RESULTS.md, run AF).
// Its garbage, about 4 KB an image, would take over 4000 images to fill
// the rest. Until followCycles sees the first cycle (within 20 ms) the
// next one is set at 17 times the live heap, bounded by the memory limit:
// little garbage is made in that time, since tensors are recycled.
const FirstCycleHeap = 64 << 20

// gcPercentFor is the GOGC that lets a heap of live bytes grow by the
// larger of GCPercent and GCSlackFloor. The runtime scales its minimum
// heap (4 MiB) by GOGC too, so the percent is capped where that minimum
// reaches the floor: a tiny heap grows to GCSlackFloor, not to a multiple
// of it. One not yet marked (live 0) grows to FirstCycleHeap.
func gcPercentFor(live uint64) int {
	const most = GCSlackFloor * 100 / (4 << 20)
	if live == 0 {
		return FirstCycleHeap * 100 / (4 << 20)
	}
	floor := (GCSlackFloor*100 + live - 1) / live
	return int(min(most, max(GCPercent, floor)))
}

// tuner is the process's one GC tuner, shared by the runs in progress
// (tests run several applies in one process).
var tuner struct {
	mu       sync.Mutex
	users    int
	stop     chan struct{}
	done     chan struct{}
	percent  int   // GOGC before the first user
	limit    int64 // memory limit before the first user
	setLimit bool
}

// tuneMemory points the garbage collector at a run's budget, so it works
// harder before the heap outgrows it, and sizes its growth from the live
// heap after every cycle (gcPercentFor), unless GOMEMLIMIT or GOGC say
// otherwise. (The pool of idle tensor buffers lives inside the budget's
// free room: engine.Run binds it.) The returned func, called when the run
// ends, restores both settings once no run needs them.
func tuneMemory(budget int64) (restore func()) {
	_, userGOGC := os.LookupEnv("GOGC")
	_, userLimit := os.LookupEnv("GOMEMLIMIT")
	tuner.mu.Lock()
	defer tuner.mu.Unlock()
	if tuner.users == 0 {
		tuner.setLimit = !userLimit
		if tuner.setLimit {
			tuner.limit = debug.SetMemoryLimit(-1)
		}
		if !userGOGC {
			tuner.percent = debug.SetGCPercent(gcPercentFor(liveHeap()))
			tuner.stop, tuner.done = make(chan struct{}), make(chan struct{})
			go followCycles(tuner.stop, tuner.done)
		}
	}
	tuner.users++
	if tuner.setLimit {
		debug.SetMemoryLimit(budget + max(MemoryHeadroom, imageops.DecodeMemoryFor(budget)))
	}
	return sync.OnceFunc(func() {
		tuner.mu.Lock()
		defer tuner.mu.Unlock()
		if tuner.users--; tuner.users > 0 {
			return
		}
		if tuner.stop != nil {
			close(tuner.stop)
			<-tuner.done
			tuner.stop, tuner.done = nil, nil
			debug.SetGCPercent(tuner.percent)
		}
		if tuner.setLimit {
			debug.SetMemoryLimit(tuner.limit)
		}
	})
}

// cyclePoll is how often followCycles looks for a finished collection. A
// filling heap is collected every few milliseconds; the check reads two
// counters. With no collection for a while (a serve sink waiting for its
// trainer) it looks less often, down to every maxCyclePoll: an idle run
// polling every 2 ms cost 3 % of a core. No less often than that: the
// first collection after a quiet spell (a heap that starts growing) is
// tuned at most 20 ms late, while the tuning for the heap before it
// holds (a review measured a 100 ms cap raise such a run's peak heap).
const (
	cyclePoll    = 2 * time.Millisecond
	maxCyclePoll = 20 * time.Millisecond
)

// followCycles sets GOGC from the live heap after each garbage collection
// until stop is closed. It polls the cycle count rather than hooking each
// cycle with a cleanup: a cleanup runs only after sweeping, sometimes once
// the next cycle is marking, and then both misses that cycle and tunes it
// from the heap of the one before (4× the live heap
// instead of 1.25× while the heap grew).
func followCycles(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	every := cyclePoll
	t := time.NewTimer(every)
	defer t.Stop()
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	var seen uint64
	idle := 0 // polls since the last collection
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		metrics.Read(s)
		if c := s[0].Value.Uint64(); c != seen {
			seen = c
			debug.SetGCPercent(gcPercentFor(s[1].Value.Uint64()))
			idle, every = 0, cyclePoll
		} else if idle++; idle >= 10 && every < maxCyclePoll {
			// 10 polls without a collection: look half as often (at
			// 20 ms after 0.3 s).
			idle, every = 0, min(2*every, maxCyclePoll)
		}
		t.Reset(every)
	}
}

// liveHeap is the heap the last collection marked live, 0 before the first.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
