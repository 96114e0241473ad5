package stages

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.BufferSharer = (*ShuffleConfig)(nil)
	_ plan.Bufferer     = (*ShuffleConfig)(nil)
	_ plan.Counter      = (*ShuffleConfig)(nil)
	_ spec.Checker      = (*ShuffleConfig)(nil)
	_ spec.PassThrough  = (*ShuffleConfig)(nil)
	_ Dropper           = (*shuffleStage)(nil)
	_ EpochEnder        = (*shuffleStage)(nil)
	_ Holder            = (*shuffleStage)(nil)
	_ Processor         = (*shuffleStage)(nil)
	_ Retainer          = (*shuffleStage)(nil)
)

// ShuffleConfig configures the shuffle stage.
type ShuffleConfig struct {
	Buffer             int   `yaml:"buffer" jsonschema:"required,minimum=1" jsonschema_description:"Samples held and drawn from at random; the whole epoch for a perfect shuffle."`
	ReshuffleEachEpoch *bool `yaml:"reshuffle_each_epoch" jsonschema_description:"Draw a different order every epoch (default true)."`
}

// BufferSamples implements plan.Bufferer.
func (c *ShuffleConfig) BufferSamples(int) int { return c.Buffer }

// BufferShare implements plan.BufferSharer.
func (c *ShuffleConfig) BufferShare() int { return ShuffleShare }

// PassesThrough implements spec.PassThrough: the stage reads no field.
func (c *ShuffleConfig) PassesThrough(string) bool { return true }

// Check implements spec.Checker.
func (c *ShuffleConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Buffer < 1 {
		cc.Errorf("buffer", "must be at least 1, got %d", c.Buffer)
	}
	return cc.Input()
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "shuffle", Role: spec.RoleTransform, Doc: "Shuffles through a buffer of samples, seeded, reshuffled each epoch.",
			NewConfig: func() any { return &ShuffleConfig{} }},
		Build: func(env *Env, cfg any) (any, error) {
			c := cfg.(*ShuffleConfig)
			s := &shuffleStage{env: env, size: c.Buffer, reshuffle: c.ReshuffleEachEpoch == nil || *c.ReshuffleEachEpoch,
				buffers: env.buffers()}
			s.rng = s.rngFor(0)
			return s, nil
		},
	})
}

// shuffleStage is tf.data's shuffle: fill a buffer, then for every new
// sample emit a random one from the buffer and put the new one in its place.
type shuffleStage struct {
	env       *Env
	size      int
	reshuffle bool
	buf       []*sample.Sample
	rng       *rand.Rand
	// bytes is what the buffer holds, of the share all buffers fill.
	bytes   int64
	buffers *Buffers
	warned  bool
	// holding mirrors bytes for the engine's watchdog, which reads it
	// from another goroutine.
	holding atomic.Int64
}

// Holding implements Holder.
func (s *shuffleStage) Holding() int64 { return s.holding.Load() }

// ShuffleShare is the divisor of the memory budget that shuffle buffers
// and in-memory caches may fill together (Buffers): half the budget,
// leaving the rest for the stages around them.
const ShuffleShare = 2

func (s *shuffleStage) Retains() {}

func (s *shuffleStage) rngFor(epoch int) *rand.Rand {
	if !s.reshuffle {
		epoch = 0
	}
	return stageRand(s.env.Seed, s.env.Stage.Name, epoch)
}

// Process keeps the buffer full, by count or, when samples are larger than
// the spec expected, by bytes: a buffer that would outgrow its share of the
// memory budget shuffles over fewer samples instead of stalling the
// pipeline, and says so once.
func (s *shuffleStage) Process(_ context.Context, in *sample.Sample, emit Emit) error {
	if len(s.buf) < s.size && (s.buffers.fits(s.bytes, in.DataSize()) || len(s.buf) == 0) {
		s.buf = append(s.buf, in)
		s.hold(in.DataSize())
		return nil
	}
	if len(s.buf) < s.size && !s.warned {
		s.warned = true
		s.env.Log.Warn(fmt.Sprintf("shuffle buffer holds %d of %d samples: %d samples of about %s fill its share of the memory budget (%s of %s%s); shuffling over %d samples. Raise resources.memory to shuffle over more.",
			len(s.buf), s.size, len(s.buf), spec.ByteSize(s.bytes/int64(len(s.buf))), spec.ByteSize(s.buffers.Share()), spec.ByteSize(s.env.Memory), s.buffers.splitWords(), len(s.buf)))
	}
	j := s.rng.IntN(len(s.buf))
	out := s.buf[j]
	s.buf[j] = in
	s.hold(in.DataSize() - out.DataSize())
	if err := emit(out); err != nil {
		return err
	}
	// A swap that brings in a larger sample than it sends out grows the
	// buffer; left to grow past its part, it would hold the memory the
	// stages before it need to produce its next input, and the pipeline
	// would stop. So it gives samples back until it fits.
	for s.buffers.over(s.bytes) && len(s.buf) > 1 {
		if err := emit(s.takeRandom()); err != nil {
			return err
		}
	}
	return nil
}

// hold counts n more bytes in the buffer (negative: fewer).
func (s *shuffleStage) hold(n int64) {
	s.bytes += n
	s.holding.Store(s.bytes)
}

// takeRandom removes and returns a random sample of the buffer.
func (s *shuffleStage) takeRandom() *sample.Sample {
	j := s.rng.IntN(len(s.buf))
	out := s.buf[j]
	last := len(s.buf) - 1
	s.buf[j] = s.buf[last]
	s.buf[last] = nil
	s.buf = s.buf[:last]
	s.hold(-out.DataSize())
	return out
}

// Drop implements Dropper.
func (s *shuffleStage) Drop() {
	for _, in := range s.buf {
		s.env.Release(in)
	}
	clear(s.buf)
	s.buf = s.buf[:0]
	s.hold(-s.bytes)
}

func (s *shuffleStage) EndEpoch(_ context.Context, epoch int, emit Emit) error {
	for len(s.buf) > 0 {
		if err := emit(s.takeRandom()); err != nil {
			return err
		}
	}
	s.rng = s.rngFor(epoch + 1)
	return nil
}

// EpochSamples implements plan.Counter.
func (c *ShuffleConfig) EpochSamples(in int64) int64 { return in }
