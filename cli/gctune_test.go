package cli

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 1600},
		{1 << 20, 400},
		{4 << 20, 400},
		{8 << 20, 200},
		{44 << 20, 37},
		{60 << 20, 27},
		{64 << 20, 25},
		{128 << 20, 25},
		{1 << 30, 25},
	} {
		if got := gcPercentFor(tc.live); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// TestGCTunerFollowsTheLiveHeap: while a run is tuned, every collection
// sets GOGC from the heap it found live, and the memory limit is the
// budget's; when the run ends both are as before.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		t.Skip("GOGC is set: the tuner stays off")
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Skip("GOMEMLIMIT is set: the tuner leaves the limit alone")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(77))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(5 << 30))
	read := func(name string) uint64 {
		s := []metrics.Sample{{Name: name}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	gogc := func() int { return int(read("/gc/gogc:percent")) }
	settle := func(what string, want func() int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for gogc() != want() && time.Now().Before(deadline) {
			runtime.GC()
			time.Sleep(5 * cyclePoll)
		}
		if got := gogc(); got != want() {
			t.Fatalf("%s: GOGC %d, want %d", what, got, want())
		}
	}
	restore := tuneMemory(1 << 30)
	// The headroom is a quarter of the budget here, what decodes may hold
	// beyond it, over the 128 MiB floor.
	if got := debug.SetMemoryLimit(-1); got != 1<<30+256<<20 {
		t.Errorf("memory limit %d during the run, want the budget + %d", got, 256<<20)
	}
	// 256 MiB kept live: a quarter of it is more than the floor.
	big := make([]byte, 256<<20)
	settle("256 MiB live", func() int { return GCPercent })
	runtime.KeepAlive(big)
	big = nil
	runtime.GC()
	settle("little live", func() int { return gcPercentFor(read("/gc/heap/live:bytes")) })
	if gogc() <= GCPercent {
		t.Errorf("GOGC %d with %d MiB live, want more than %d", gogc(), read("/gc/heap/live:bytes")>>20, GCPercent)
	}
	restore()
	restore() // twice is once
	if got := gogc(); got != 77 {
		t.Errorf("GOGC %d after the run, want 77 as before", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 5<<30 {
		t.Errorf("memory limit %d after the run, want 5 GiB as before", got)
	}
}
