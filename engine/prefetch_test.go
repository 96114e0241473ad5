package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// prefetching records the samples it was asked to prefetch, and fails a
// sample processed before that.
type prefetching struct {
	mu   sync.Mutex
	seen map[[2]int64]bool
	// handed and ran count the read-ahead work returned and run.
	handed, ran int
	// started is closed when the work first runs, and Process waits for
	// it: otherwise a parallel stage's dispatcher could hand every chunk
	// and end before the read-ahead goroutine ran any (seen under -race
	// in CI: 10 handed, 0 ran). The first chunk's work always finds the
	// queue empty, so it is never dropped.
	started chan struct{}
	once    sync.Once
}

func (p *prefetching) Prefetch(ss []*sample.Sample) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range ss {
		p.seen[[2]int64{int64(s.Epoch), s.ID}] = true
	}
	p.handed++
	return func() {
		p.mu.Lock()
		p.ran++
		p.mu.Unlock()
		p.once.Do(func() { close(p.started) })
	}
}

func (p *prefetching) Process(ctx context.Context, s *sample.Sample, emit stages.Emit) error {
	select {
	case <-p.started:
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute): // fail, not hang, if it never runs
		return errors.New("the read-ahead work never ran")
	}
	p.mu.Lock()
	ok := p.seen[[2]int64{int64(s.Epoch), s.ID}]
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("sample %d processed before it was prefetched", s.ID)
	}
	return emit(s)
}

// TestPrefetcherSeesSamplesFirst: a stage that prefetches (a map that
// reads files) is handed every sample's chunk before it processes the
// sample, on one goroutine and on parallel workers.
func TestPrefetcherSeesSamplesFirst(t *testing.T) {
	for _, par := range []int{1, 2} {
		t.Run(fmt.Sprintf("parallelism=%d", par), func(t *testing.T) {
			reg := benchRegistry()
			pf := &prefetching{seen: map[[2]int64]bool{}, started: make(chan struct{})}
			reg.Register(&stages.Type{
				StageType: spec.StageType{Name: "pf", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &passConfig{} }},
				Build:     func(*stages.Env, any) (any, error) { return pf, nil },
			})
			src := fmt.Sprintf("version: 1\nname: pf\nepochs: 2\nstages:\n"+
				"  - {name: src, type: range, count: 300}\n  - {name: p, type: pf, parallelism: %d}\n  - {name: out, type: discard}\n", par)
			rep, err := runSpecWith(context.Background(), t, reg, t.TempDir(), src)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Sinks["out"].Samples; got != 600 {
				t.Errorf("sink got %d samples, want 600", got)
			}
			if len(pf.seen) != 600 {
				t.Errorf("%d distinct samples prefetched, want 600", len(pf.seen))
			}
			// A full queue drops work, and stop drops what is queued; the
			// first chunk's work always runs (Process waits for it).
			if pf.handed == 0 || pf.ran == 0 || pf.ran > pf.handed {
				t.Errorf("read-ahead work: %d handed, %d ran; want some run, and no more than handed", pf.handed, pf.ran)
			}
		})
	}
}

// panicking is a prefetching stage whose Prefetch, or the read-ahead work
// it returns, panics.
type panicking struct {
	inWork bool
	// started is closed when the work first runs, so that Process waits
	// for it: otherwise the run could end before the read-ahead goroutine
	// ran anything.
	started chan struct{}
	once    sync.Once
}

func (p *panicking) Prefetch([]*sample.Sample) func() {
	if !p.inWork {
		var m map[string]int
		//lint:ignore SA5000 the panic is what the test needs
		m["x"] = 1 // a nil-map write: a real runtime panic
	}
	return func() {
		p.once.Do(func() { close(p.started) })
		var m map[string]int
		//lint:ignore SA5000 the panic is what the test needs
		m["x"] = 1
	}
}

func (p *panicking) Process(ctx context.Context, s *sample.Sample, emit stages.Emit) error {
	if p.inWork {
		select {
		case <-p.started:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return emit(s)
}

// TestPrefetchPanicEndsTheRun: a panic in a stage's Prefetch (on the
// stage's goroutine, or a parallel stage's dispatcher) or in the work it
// returned (on the read-ahead goroutine) fails the run naming the stage,
// as one in Process does, instead of ending the process. Found in review:
// neither the dispatcher nor the read-ahead goroutine recovered.
func TestPrefetchPanicEndsTheRun(t *testing.T) {
	for _, inWork := range []bool{false, true} {
		for _, par := range []int{1, 2} {
			t.Run(fmt.Sprintf("in work %v, parallelism=%d", inWork, par), func(t *testing.T) {
				reg := benchRegistry()
				reg.Register(&stages.Type{
					StageType: spec.StageType{Name: "pf", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &passConfig{} }},
					Build: func(*stages.Env, any) (any, error) {
						return &panicking{inWork: inWork, started: make(chan struct{})}, nil
					},
				})
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				src := fmt.Sprintf("version: 1\nname: pf\nstages:\n"+
					"  - {name: src, type: range, count: 300}\n  - {name: p, type: pf, parallelism: %d}\n  - {name: out, type: discard}\n", par)
				_, err := runSpecWith(ctx, t, reg, t.TempDir(), src)
				var se *engine.StageError
				if !errors.As(err, &se) || se.Stage != "p" || !strings.Contains(err.Error(), "panic: assignment to entry in nil map") {
					t.Fatalf("err = %v, want stage p's panic (a deadline means the run hung)", err)
				}
			})
		}
	}
}
