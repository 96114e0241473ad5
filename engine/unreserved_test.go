package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
	"github.com/piperun/piperun/tensor"
)

// bigOutputs makes a 4 MiB tensor of each sample, as a decode and resize
// to 1024×1024 would, and counts the outputs made and not yet taken by
// emit: they are outside the budget until emit reserves them.
type bigOutputs struct{ out, most *atomic.Int64 }

func (b bigOutputs) Process(_ context.Context, s *sample.Sample, emit stages.Emit) error {
	img := tensor.New(tensor.Uint8, 4<<20)
	n := b.out.Add(1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	time.Sleep(2 * time.Millisecond) // the work of making it
	s.Fields["image"] = img
	err := emit(s)
	b.out.Add(-1)
	return err
}

// bigConfig declares the field bigOutputs adds: its shape, or with
// Unknown a tensor of unknown shape, as decode_image's without a resize.
type bigConfig struct {
	Unknown bool `yaml:"unknown"`
}

func (c *bigConfig) Check(cc *spec.CheckContext) sample.Schema {
	t := sample.Type{Kind: sample.Tensor, DType: tensor.Uint8, Shape: []int{4 << 20}}
	if c.Unknown {
		t.Shape = nil
	}
	return sample.Schema{Fields: append(cc.Input().Fields, sample.Field{Name: "image", Type: t})}
}

// TestParallelOutputsStayInsideTheBudget: a parallel stage's workers make
// their outputs before the budget is asked for them, so the samples in
// flight through its workers are bounded by the window's quarter of the
// budget, not by the parallelism. With 16 workers making 4 MiB each under
// a 64 MiB budget, 16 outputs (64 MiB) were held outside the budget at
// once; a memory audit measured 968 MiB of RSS under 128 MiB with 48 MiB
// samples. A quarter of 64 MiB is 4 of them.
func TestParallelOutputsStayInsideTheBudget(t *testing.T) {
	for _, tc := range []struct{ det, unknown bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		det := tc.det
		t.Run(fmt.Sprintf("deterministic=%v/unknown_size=%v", det, tc.unknown), func(t *testing.T) {
			reg := benchRegistry()
			var out, most atomic.Int64
			reg.Register(&stages.Type{
				StageType: spec.StageType{Name: "big", Role: spec.RoleTransform, Parallel: true, NewConfig: func() any { return &bigConfig{} }},
				Build:     func(*stages.Env, any) (any, error) { return bigOutputs{&out, &most}, nil },
			})
			src := fmt.Sprintf("version: 1\nname: big\ndeterministic: %v\nresources: {memory: 64MiB}\nstages:\n"+
				"  - {name: src, type: range, count: 200}\n  - {name: b, type: big, parallelism: 16, unknown: %v}\n  - {name: out, type: discard}\n", det, tc.unknown)
			rep, err := runSpecWith(context.Background(), t, reg, t.TempDir(), src)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Sinks["out"].Samples; got != 200 {
				t.Fatalf("sink got %d samples, want 200", got)
			}
			if m := most.Load(); m > 4 {
				t.Errorf("%d outputs of 4 MiB were made and not yet reserved at once, want at most 4: a quarter of the 64 MiB budget", m)
			}
			if peak := rep.PeakMemoryBytes; peak > 64<<20 {
				t.Errorf("peak %d bytes, over the budget", peak)
			}
		})
	}
}
