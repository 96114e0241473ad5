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
		{0, 400},
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

// TestGCTunerFollowsTheLiveHeap: after setMemoryLimit, every collection
// sets GOGC from the heap it found live.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	if _, ok := os.LookupEnv("GOGC"); ok {
		t.Skip("GOGC is set: the tuner stays off")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	setMemoryLimit(1 << 30)
	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	settle := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for gogc() != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := gogc(); got != want {
			t.Fatalf("GOGC %d after a collection, want %d", got, want)
		}
	}
	// 256 MiB kept live: the tuner's share of a quarter applies.
	big := make([]byte, 256<<20)
	runtime.GC()
	settle(GCPercent)
	runtime.KeepAlive(big)
	big = nil
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	settle(gcPercentFor(s[0].Value.Uint64()))
	if gogc() <= GCPercent {
		t.Errorf("GOGC %d with %d MiB live, want more than %d", gogc(), s[0].Value.Uint64()>>20, GCPercent)
	}
}
