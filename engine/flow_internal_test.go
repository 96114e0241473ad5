package engine

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/piperun/piperun/budget"
	"github.com/piperun/piperun/sample"
)

// TestEmitReleasesWhatItCannotQueue: once every consumer has stopped, emit
// refuses samples; the memory they hold must go back to the budget, or a
// stage that goes on emitting to other outlets would run short.
func TestEmitReleasesWhatItCannotQueue(t *testing.T) {
	b := budget.New(1 << 20)
	l := newLink(1)
	close(l.stop)
	o := newOutlet(context.Background(), []*link{l}, 64, b)
	for i := range 3 {
		s := sample.New(int64(i), 0, "")
		s.Fields["v"] = make([]byte, 1000)
		if err := b.Acquire(context.Background(), s.Size()); err != nil {
			t.Fatal(err)
		}
		s.Held = s.Size()
		err := o.emit(s)
		if err == nil {
			err = o.flush()
		}
		if !errors.Is(err, errDownstreamDone) {
			t.Fatalf("sample %d: err = %v, want errDownstreamDone", i, err)
		}
		if got := b.Used(); got != 0 {
			t.Fatalf("after sample %d the budget holds %d bytes, want 0", i, got)
		}
	}
}

// TestOutletReservesACopyPerConsumer: a sample sent to two consumers is
// reserved twice when emitted, each copy holds one share, and the share of
// a consumer that stopped is returned at send.
func TestOutletReservesACopyPerConsumer(t *testing.T) {
	b := budget.New(1 << 20)
	live, stopped := newLink(4), newLink(4)
	o := newOutlet(context.Background(), []*link{live, stopped, newLink(4)}, 64, b)
	close(stopped.stop)
	s := sample.New(1, 0, "")
	s.Fields["v"] = make([]byte, 1000)
	n := s.Size()
	if err := o.emit(s); err != nil {
		t.Fatal(err)
	}
	if got := b.Used(); got != 3*n {
		t.Fatalf("after emit the budget holds %d, want 3 × %d", got, n)
	}
	if err := o.flush(); err != nil {
		t.Fatal(err)
	}
	if got := b.Used(); got != 2*n {
		t.Fatalf("after send the budget holds %d, want 2 × %d (the stopped consumer's share returned)", got, n)
	}
	a := <-live.ch
	if len(a.samples) != 1 || a.samples[0].Held != n {
		t.Fatalf("first consumer got %d samples holding %d, want one holding %d", len(a.samples), a.samples[0].Held, n)
	}
	c := <-o.links[2].ch
	if len(c.samples) != 1 || c.samples[0] == a.samples[0] || c.samples[0].Held != n {
		t.Fatalf("third consumer's copy: %+v", c.samples)
	}
}

// TestHoldEarlyBoundsAQuarter: work finished ahead of the head may hold at
// most a quarter of the budget, whatever the sample count window says.
func TestHoldEarlyBoundsAQuarter(t *testing.T) {
	w := newWindow(2, 512, 1000)
	for _, tc := range []struct {
		n    int64
		want bool
		held int64
	}{{100, true, 100}, {150, true, 250}, {1, false, 250}, {-250, true, 0}, {251, false, 0}, {250, true, 250}} {
		if got := w.holdEarly(tc.n); got != tc.want || w.held.Load() != tc.held {
			t.Fatalf("holdEarly(%d) = %v with %d held, want %v with %d", tc.n, got, w.held.Load(), tc.want, tc.held)
		}
	}
	none := newWindow(2, 512, 0) // no budget: no bound, but still counted
	if !none.holdEarly(1<<40) || none.held.Load() != 1<<40 {
		t.Fatalf("without a budget holdEarly refused or did not count")
	}
}

// sizedStream yields n samples of about size bytes each.
type sizedStream struct{ i, n, size int }

func (s *sizedStream) Next() (*sample.Sample, error) {
	if s.i == s.n {
		return nil, io.EOF
	}
	x := sample.New(int64(s.i), 0, "")
	x.Fields["v"] = make([]byte, s.size)
	s.i++
	return x, nil
}

func (s *sizedStream) Close() error { return nil }

// TestReadAheadWaitsForBudgetAfterAnAsk: a read-ahead stream over its
// share waits for the consumer to ask; asked, it must then wait for the
// budget, not for a second ask that will never come (the consumer is
// already waiting on it). Found as a hang of tfrecord interleave at 1MiB.
func TestReadAheadWaitsForBudgetAfterAnAsk(t *testing.T) {
	b := budget.New(4000) // a read-ahead share of 1000 bytes
	r := &Run{budget: b}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var g errgroup.Group
	sl := &slot{stream: &sizedStream{n: 3, size: 1100}}
	r.startReadAhead(ctx, &g, sl, 1, 1, "interleave")
	deadline := time.Now().Add(10 * time.Second)
	for len(sl.items) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// The first sample is read ahead and puts the stream over its share:
	// it now waits for an ask. Fill the budget, so the next sample will
	// have to wait for memory once asked for.
	time.Sleep(50 * time.Millisecond)
	filler := b.Limit() - b.Used()
	if err := b.Acquire(ctx, filler); err != nil {
		t.Fatal(err)
	}
	noFlush := func() error { return nil }
	first, err := r.nextFromSlot(ctx, sl, noFlush)
	if err != nil || first.ID != 0 {
		t.Fatalf("first item: %v, %v", first, err)
	}
	got := make(chan *sample.Sample, 1)
	go func() {
		s, _ := r.nextFromSlot(ctx, sl, noFlush) // finds nothing: asks, waits
		got <- s
	}()
	time.Sleep(50 * time.Millisecond)
	b.Release(filler + first.Held)
	select {
	case s := <-got:
		if s == nil || s.ID != 1 {
			t.Fatalf("second item: %v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read-ahead never delivered the second sample once memory was free")
	}
	cancel()
	r.closeSlot(sl)
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
