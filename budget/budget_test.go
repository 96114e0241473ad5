package budget

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitQueued polls until n callers are queued; it only orders the test's
// goroutines and asserts nothing about time (the minute only ends a test
// that would otherwise hang until CI's timeout).
func waitQueued(t *testing.T, b *Budget, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		b.mu.Lock()
		k := len(b.waiters)
		b.mu.Unlock()
		if k == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d callers never queued", n)
}

// TestWaitersServedInOrder checks FIFO grants: a small request queued
// behind a large one does not jump ahead even when it would fit, so large
// samples are not starved.
func TestWaitersServedInOrder(t *testing.T) {
	b := New(10)
	ctx := context.Background()
	if err := b.Acquire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	got := make(chan int64, 3)
	for i, n := range []int64{8, 5, 1} {
		go func(n int64) {
			if err := b.Acquire(ctx, n); err != nil {
				t.Error(err)
			}
			got <- n
		}(n)
		waitQueued(t, b, i+1)
	}
	b.Release(10)
	if n := <-got; n != 8 {
		t.Fatalf("first grant %d, want 8", n)
	}
	waitQueued(t, b, 2)
	if b.Used() != 8 {
		t.Fatalf("used %d after the first grant; the 1-byte waiter jumped the queue", b.Used())
	}
	b.Release(8)
	a, c := <-got, <-got
	if a+c != 6 || b.Used() != 6 || b.Peak() != 10 {
		t.Errorf("grants %d %d, used %d, peak %d", a, c, b.Used(), b.Peak())
	}
}

// TestLowerStagesServedFirst: a holder further down the pipeline (a
// higher rank) is served before waiters above it, and may pass them when
// what it asks for fits; among equal ranks the order holds. This is the
// stall the quickstart hit at 8MiB: batch waited for 865KiB at the head
// of the queue while prefetch, below it, waited behind for the few bytes
// that would have let the sinks free memory.
func TestLowerStagesServedFirst(t *testing.T) {
	b := New(10)
	ctx := context.Background()
	if err := b.Acquire(ctx, 9); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	for i, w := range []struct {
		n    int64
		name string
		rank int
	}{{5, "batch", 6}, {1, "records", 1}, {2, "labels", 9}, {2, "out", 9}} {
		go func() {
			if err := b.AcquireFor(ctx, w.n, Holder{Name: w.name, Rank: w.rank}); err != nil {
				t.Error(err)
			}
			got <- w.name
		}()
		waitQueued(t, b, i+1)
		if i == 2 {
			// labels (rank 9) passed the others: 1 byte was free but it asks 2.
			break
		}
	}
	if w := b.Waiters(); !slices.Equal(w, []string{"labels (2B)", "batch (5B)", "records (1B)"}) {
		t.Fatalf("waiters in service order: %q", w)
	}
	if !b.TryAcquireAt(1, 10) {
		t.Fatal("a 1-byte reservation of rank 10 that fits was refused while only lower ranks wait")
	}
	if b.TryAcquireAt(1, 9) || b.TryAcquire(1) {
		t.Fatal("a reservation passed a waiter of its own rank or higher")
	}
	b.Release(1)
	b.Release(2) // 2 free: labels fits
	if n := <-got; n != "labels" {
		t.Fatalf("first grant %s, want labels", n)
	}
	// A rank-9 reservation that fits passes batch and records at once.
	go func() {
		if err := b.AcquireFor(ctx, 1, Holder{Name: "out", Rank: 9}); err != nil {
			t.Error(err)
		}
		got <- "out"
	}()
	if n := <-got; n != "out" {
		t.Fatalf("grant %s, want out passing the waiters above it", n)
	}
	b.Release(5) // room for batch alone, which records may not pass
	if n := <-got; n != "batch" {
		t.Fatalf("then %s, want batch", n)
	}
	b.Release(1)
	if n := <-got; n != "records" || b.Used() != 10 {
		t.Errorf("then %s with %d used, want records with 10", n, b.Used())
	}
}

func TestCancelledWaiterLeavesNoReservation(t *testing.T) {
	b := New(10)
	_ = b.Acquire(context.Background(), 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Acquire(ctx, 5) }()
	waitQueued(t, b, 1)
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
	b.Release(10)
	if b.Used() != 0 || len(b.waiters) != 0 {
		t.Errorf("used %d, waiters %d after cancel", b.Used(), len(b.waiters))
	}
}

// TestSpareGivesWay checks that memory kept idle in the budget's free room
// (a buffer pool) is trimmed to the room left after each reservation,
// including one granted to a waiter, and never blocks a reservation.
func TestSpareGivesWay(t *testing.T) {
	b := New(100)
	ctx := context.Background()
	var idle atomic.Int64
	idle.Store(60)
	var mu sync.Mutex
	var trims []int64
	b.SetSpare(idle.Load, func(m int64) {
		mu.Lock()
		trims = append(trims, m)
		mu.Unlock()
		idle.Store(min(idle.Load(), m))
	})
	if !b.TryAcquire(30) { // free 70 >= idle 60: no trim
		t.Fatal("TryAcquire(30) of 100 failed")
	}
	if err := b.Acquire(ctx, 30); err != nil { // free 40
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, 40); err != nil { // free 0
		t.Fatal(err)
	}
	idle.Store(50)
	done := make(chan struct{})
	go func() {
		if err := b.Acquire(ctx, 50); err != nil { // granted by the Release below: free 10
			t.Error(err)
		}
		close(done)
	}()
	waitQueued(t, b, 1)
	b.Release(60)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if want := []int64{40, 0, 10}; !slices.Equal(trims, want) {
		t.Errorf("trims = %v, want %v", trims, want)
	}
	if b.Used() != 90 {
		t.Errorf("Used = %d, want 90", b.Used())
	}
}

// TestMessages: sizes in binary units, exact where rounding would hide the
// difference; waiters grouped by holder, in the order they are served.
func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		err  TooLargeError
		want string
	}{
		{TooLargeError{Need: 200, Limit: 100}, "a sample of 200B exceeds the whole memory budget of 100B; raise resources.memory to at least 200B, the least that holds it alone"},
		{TooLargeError{Need: 3 << 20, Limit: 1 << 20}, "a sample of 3MiB exceeds the whole memory budget of 1MiB; raise resources.memory to at least 3MiB, the least that holds it alone"},
		{TooLargeError{Need: 1<<20 + 128, Limit: 1 << 20}, "a sample of 1MiB (128 bytes more) exceeds the whole memory budget of 1MiB; raise resources.memory to at least 1.01MiB, the least that holds it alone"},
		{TooLargeError{Need: 1 << 20, Limit: 1<<20 - 8}, "a sample of 1MiB (8 bytes more) exceeds the whole memory budget of 1023.99KiB; raise resources.memory to at least 1MiB, the least that holds it alone"},
		{TooLargeError{Need: 3 << 20, Limit: 4 << 20, Kept: 2 << 20}, "a sample of 3MiB exceeds the 2MiB the memory budget of 4MiB leaves samples (stages keep 2MiB for their own use); raise resources.memory to at least 5MiB, the least that holds it alone with what stages keep"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q\nwant %q", got, tc.want)
		}
	}
	b := New(10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.Acquire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		who string
		n   int64
	}{{"b", 4}, {"r", 2}, {"", 1}, {"r", 3}} {
		go b.AcquireAs(ctx, w.n, w.who)
		waitQueued(t, b, i+1)
	}
	if got, want := b.Waiters(), []string{"b (4B)", "r (2 waiting, 5B)"}; !slices.Equal(got, want) {
		t.Errorf("Waiters = %q, want %q", got, want)
	}
}

// TestKeptBytesBoundASample: what stages keep for the run is no sample's,
// so a sample larger than the rest fails at once rather than waiting for
// memory that never frees; given back, the whole budget is there again.
func TestKeptBytesBoundASample(t *testing.T) {
	b := New(1000)
	ctx := context.Background()
	if !b.Keep(600) {
		t.Fatal("600 of 1000 not kept")
	}
	if b.Keep(500) {
		t.Fatal("500 more kept of the 400 free")
	}
	err := b.Acquire(ctx, 401)
	if tl, ok := err.(*TooLargeError); !ok || *tl != (TooLargeError{Need: 401, Limit: 1000, Kept: 600}) {
		t.Fatalf("Acquire(401) = %v, want a TooLargeError with 600 kept", err)
	}
	if err := b.Acquire(ctx, 400); err != nil {
		t.Fatal(err)
	}
	b.Release(400)
	b.Unkeep(600)
	if err := b.Acquire(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	if b.Used() != 1000 || b.Peak() != 1000 {
		t.Errorf("used %d, peak %d, want 1000 and 1000", b.Used(), b.Peak())
	}
}
