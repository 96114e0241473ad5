package stages

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.BufferKeyer   = (*BatchConfig)(nil)
	_ plan.Bufferer      = (*BatchConfig)(nil)
	_ plan.Counter       = (*BatchConfig)(nil)
	_ plan.ExactCounter  = (*BatchConfig)(nil)
	_ plan.OutputSizer   = (*BatchConfig)(nil)
	_ spec.Checker       = (*BatchConfig)(nil)
	_ spec.DeferFinisher = (*BatchConfig)(nil)
	_ Dropper            = (*batchStage)(nil)
	_ EpochEnder         = (*batchStage)(nil)
	_ Holder             = (*batchStage)(nil)
	_ Processor          = (*batchStage)(nil)
	_ Retainer           = (*batchStage)(nil)
)

// BatchConfig configures the batch stage.
type BatchConfig struct {
	Size          int               `yaml:"size" jsonschema:"required,minimum=1" jsonschema_description:"Samples per batch."`
	DropRemainder bool              `yaml:"drop_remainder" jsonschema_description:"Drop the last, smaller batch of each epoch."`
	Pad           spec.Map[float64] `yaml:"pad" jsonschema_description:"field: value; pads variable-length tensors of the field to the longest in the batch."`

	// full is the output schema of a full batch, for plan's estimates.
	full sample.Schema
	// float32s are the float fields declared float32 upstream (a
	// parse_example feature): stacked as float32, as tf.data batches them.
	float32s map[string]bool
}

// OutputBytes implements plan.OutputSizer: a batch is at most size samples,
// so a full one bounds the estimate even when the last may be shorter.
func (c *BatchConfig) OutputBytes() int64 { return c.full.EstimateBytes() }

// MinOutputBytes implements plan.OutputSizer: a full batch's lower bound.
func (c *BatchConfig) MinOutputBytes() int64 { return c.full.MinBytes() }

// BufferSamples implements plan.Bufferer.
func (c *BatchConfig) BufferSamples(int) int { return c.Size }

// EpochSamples implements plan.Counter: the full batches. A last smaller
// one (without drop_remainder) is left out, since the fit counts each
// batch as a full one, and must not refuse what would run.
func (c *BatchConfig) EpochSamples(in int64) int64 {
	if in < 0 || c.Size < 1 {
		return -1
	}
	return in / int64(c.Size)
}

// EpochSamplesExact implements plan.ExactCounter: with the last smaller
// batch, unless drop_remainder drops it.
func (c *BatchConfig) EpochSamplesExact(in int64) int64 {
	if in < 0 || c.Size < 1 {
		return -1
	}
	if c.DropRemainder {
		return in / int64(c.Size)
	}
	return (in + int64(c.Size) - 1) / int64(c.Size)
}

// BufferKey implements plan.BufferKeyer: a batch's buffer is its size.
func (c *BatchConfig) BufferKey() string { return "size" }

// FinishesDeferred implements spec.DeferFinisher: batch converts a
// deferred field as it stacks it, unless the field is padded (padding is
// applied in the field's final dtype).
func (c *BatchConfig) FinishesDeferred(field string) bool {
	_, padded := c.Pad.Get(field)
	return !padded
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "batch", Role: spec.RoleTransform, Doc: "Stacks size samples into one, each field gaining a leading batch dimension.",
			NewConfig: func() any { return &BatchConfig{} }},
		Build: func(env *Env, cfg any) (any, error) {
			c := cfg.(*BatchConfig)
			b := &batchStage{env: env, cfg: c, pad: map[string]float64{}, deferred: map[string]*tensor.FloatLUT{}}
			for _, e := range c.Pad.Entries {
				b.pad[e.Key] = e.Value
			}
			if env.Stage != nil && len(env.Stage.InSchemas) > 0 {
				for _, f := range env.Stage.InSchemas[0].Fields {
					if f.Type.Deferred != nil {
						b.deferred[f.Name] = f.Type.Deferred
					}
				}
			}
			return b, nil
		},
	})
}

// Check implements spec.Checker.
func (c *BatchConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Size < 1 {
		cc.Errorf("size", "must be at least 1, got %d", c.Size)
	}
	in := cc.Input()
	b := -1
	if c.DropRemainder {
		b = c.Size
	}
	for _, e := range c.Pad.Entries {
		t, ok := in.Lookup(e.Key)
		switch {
		case !ok:
			cc.Errorf("pad."+e.Key, "unknown field %q (fields here: %s)", e.Key, strings.Join(in.Names(), ", "))
		case t.Kind != sample.Tensor && t.Kind != sample.Any:
			cc.Errorf("pad."+e.Key, "pad applies to tensor fields; %q is %s", e.Key, t)
		case t.Kind == sample.Tensor && t.DType != tensor.Invalid:
			if err := padFits(e.Value, t.DType); err != nil {
				cc.Errorf("pad."+e.Key, "%v (field %q is %s)", err, e.Key, t)
			}
		}
	}
	out := sample.Schema{Open: in.Open}
	c.full = sample.Schema{Open: in.Open}
	c.float32s = map[string]bool{}
	for _, f := range in.Fields {
		var t sample.Type
		switch f.Type.Kind {
		case sample.Int:
			t = sample.TensorOf(tensor.Int64, b)
		case sample.Float:
			t = sample.TensorOf(tensor.Float64, b)
			if f.Type.DType == tensor.Float32 {
				t = sample.TensorOf(tensor.Float32, b)
				c.float32s[f.Name] = true
			}
		case sample.Bool:
			t = sample.TensorOf(tensor.Uint8, b)
			t.Elem = sample.Bool // booleans, for a sink that writes them as such
		case sample.String:
			t = sample.ListOf(sample.String)
		case sample.Bytes:
			t = sample.ListOf(sample.Bytes)
		case sample.Tensor:
			dt := f.Type.DType
			if f.Type.Deferred != nil {
				dt = tensor.Float32
			}
			if f.Type.Shape == nil {
				t = sample.Type{Kind: sample.Tensor, DType: dt}
			} else {
				t = sample.TensorOf(dt, append([]int{b}, f.Type.Shape...)...)
			}
			if _, padded := c.Pad.Get(f.Name); !padded && !f.Type.KnownShape() {
				switch sh := f.Type.Shape; {
				case f.Type.DType == tensor.Uint8 && len(sh) == 3 && sh[0] >= 0 && sh[1] >= 0 && sh[2] < 0:
					cc.Warnf("", "field %q is %s: its last dimension is known only at run time, and batching fails if it varies between samples; for images, %s; for other data, add pad: {%s: 0}", f.Name, f.Type, fixChannels, f.Name)
				case f.Type.DType == tensor.Uint8 && len(sh) == 3 && sh[2] < 0:
					cc.Warnf("", "field %q is %s; if its shape varies between samples, batching fails: for images, resize to one size and decode with a fixed channel count, e.g. decode_image(b, 3) | resize(224, 224); for other data, add pad: {%s: 0}", f.Name, f.Type, f.Name)
				case len(sh) == 3:
					cc.Warnf("", "field %q is %s; if its shape varies between samples, batching fails: add pad: {%s: 0} or resize first", f.Name, f.Type, f.Name)
				default:
					// resize takes images alone (a newcomer test was told
					// to resize a list of ints).
					cc.Warnf("", "field %q is %s; if its shape varies between samples, batching fails: add pad: {%s: 0}", f.Name, f.Type, f.Name)
				}
			}
		case sample.Any:
			t = sample.TAny
		case sample.List:
			t = sample.ListOf(sample.List) // a list of the samples' lists
		default:
			t = sample.ListOf(sample.Any)
		}
		out.Fields = append(out.Fields, sample.Field{Name: f.Name, Type: t})
		if t.Kind == sample.Tensor && len(t.Shape) > 0 && t.Shape[0] == b {
			t.Shape = append([]int{c.Size}, t.Shape[1:]...)
		}
		c.full.Fields = append(c.full.Fields, sample.Field{Name: f.Name, Type: t})
	}
	return out
}

type batchStage struct {
	env *Env
	cfg *BatchConfig
	pad map[string]float64
	// deferred holds the conversions left to this stage by a map upstream
	// (sample.Type.Deferred), by field.
	deferred map[string]*tensor.FloatLUT
	buf      []*sample.Sample
	index    int64
	// dtypes are the dtypes of the tensors of the first batch that had
	// each field, to warn once of a field whose dtype changes (a jsonl
	// key holding integers in one batch, other numbers in the next).
	dtypes map[string]tensor.DType
	warned map[string]bool
	// rows holds, by deferred field, the batch being converted as its
	// samples arrive (convertAhead).
	rows map[string]*rowsSoFar
	// flushed is set once the stage has made a batch.
	flushed bool
	// bytes is what the buffered samples and the batches being filled
	// hold of the budget; holding mirrors it for the engine's watchdog,
	// which reads it from another goroutine.
	bytes   int64
	holding atomic.Int64
}

// Holding implements Holder: a stuck run names what a batch holds.
func (b *batchStage) Holding() int64 { return b.holding.Load() }

// rowsSoFar is a float32 batch filled as its samples arrive: its first
// done rows hold a field of the first done buffered samples, converted,
// each of shape shape. hold holds its buffer's bytes of the budget.
type rowsSoFar struct {
	t     *tensor.Tensor
	shape []int
	done  int
	hold  *sample.Sample
}

func (b *batchStage) Retains() {}

func (b *batchStage) Process(_ context.Context, in *sample.Sample, emit Emit) error {
	b.buf = append(b.buf, in)
	b.bytes += in.Retained()
	for k, lut := range b.deferred {
		b.convertAhead(k, lut)
	}
	if len(b.buf) < b.cfg.Size {
		b.holding.Store(b.bytes)
		return nil
	}
	return b.flush(emit)
}

// convertAhead converts field k of the buffered samples into the batch as
// they arrive and recycles each image at once: the stage then holds a
// batch of floats and not, until the last sample arrives, a batch of
// images as well (W1's peak RSS 2-3 MiB lower, at batch 256 11 MB;
// bench/RESULTS.md, run AP). It takes only an idle full batch's buffer,
// except for the stage's first batch: while the previous batch is still
// downstream, the samples wait for flush, as before, since a buffer of
// their own would be fresh memory, which costs more than the images. The
// buffer's bytes are reserved as it is taken, and each image's given back
// as it is recycled. A sample it cannot convert (another shape, not a
// tensor) stops it: flush names the error.
func (b *batchStage) convertAhead(k string, lut *tensor.FloatLUT) {
	r := b.rows[k]
	if r == nil {
		t0, ok := b.buf[0].Fields[k].(*tensor.Tensor)
		if !ok || lut.Check(t0) != nil {
			return
		}
		shape := append([]int{b.cfg.Size}, t0.Shape...)
		t := tensor.AllocIdle(tensor.Float32, shape...)
		if t == nil && !b.flushed {
			t = tensor.Alloc(tensor.Float32, shape...)
		}
		if t == nil {
			return
		}
		hold := &sample.Sample{Held: int64(t.HeldBytes())}
		if !b.env.TryReserve(hold.Held) {
			t.Recycle()
			return
		}
		b.bytes += hold.Held
		r = &rowsSoFar{t: t, shape: t0.Shape, hold: hold}
		if b.rows == nil {
			b.rows = map[string]*rowsSoFar{}
		}
		b.rows[k] = r
	}
	dst := r.t.Float32()
	n := len(dst) / b.cfg.Size
	for ; r.done < len(b.buf); r.done++ {
		s := b.buf[r.done]
		t, ok := s.Fields[k].(*tensor.Tensor)
		if !ok || lut.Check(t) != nil || !slices.Equal(t.Shape, r.shape) {
			return
		}
		lut.Into(dst[r.done*n:(r.done+1)*n:(r.done+1)*n], t)
		// A fan-out's copies share their tensors (and Shrink leaves a
		// shared reservation alone): only a sample of its own gives its
		// image back here.
		if s.Shared == nil && t.Recyclable() {
			held, was := int64(t.HeldBytes()), s.Retained()
			t.Recycle()
			b.env.Shrink(s, held)
			b.bytes -= was - s.Retained()
		}
	}
}

// Drop implements Dropper.
func (b *batchStage) Drop() {
	for _, s := range b.buf {
		// nil where a flush's hand-off stopped part-way (a panic): the
		// engine then reports that panic, not one here.
		if s != nil {
			b.env.Release(s)
		}
	}
	clear(b.buf)
	b.buf = b.buf[:0]
	b.dropRows()
	b.bytes = 0
	b.holding.Store(0)
}

// dropRows gives back the batches convertAhead was filling.
func (b *batchStage) dropRows() {
	for k, r := range b.rows {
		r.t.Recycle()
		b.env.Release(r.hold)
		delete(b.rows, k)
	}
}

func (b *batchStage) EndEpoch(_ context.Context, _ int, emit Emit) error {
	if len(b.buf) > 0 && b.cfg.DropRemainder {
		b.Drop()
	}
	var err error
	if len(b.buf) > 0 {
		err = b.flush(emit)
	}
	b.index = 0
	return err
}

func (b *batchStage) flush(emit Emit) error {
	b.flushed = true
	first := b.buf[0]
	out := &sample.Sample{ID: b.index, Epoch: first.Epoch, BatchSize: len(b.buf), Fields: make(map[string]any, len(first.Fields))}
	if len(b.buf) == 1 {
		out.Origin = first.Describe()
	} else {
		out.Origin = fmt.Sprintf("batch %d (epoch %d) of %s … %s", b.index, first.Epoch, first.Describe(), b.buf[len(b.buf)-1].Describe())
	}
	b.index++
	// Stack finds a field missing from a later sample; one that only later
	// samples have would be dropped without a word (an open jsonl schema).
	for _, s := range b.buf[1:] {
		for k := range s.Fields {
			if _, ok := first.Fields[k]; !ok {
				b.Drop()
				return fmt.Errorf("%s: field %q is missing from %s", out.Origin, k, first.Describe())
			}
		}
	}
	// A pad of a key no sample has (validate refuses it where the schema
	// is known) would be ignored without a word.
	for k := range b.pad {
		if _, ok := first.Fields[k]; !ok {
			b.Drop()
			return fmt.Errorf("%s: pad names field %q, which %s does not have", out.Origin, k, first.Describe())
		}
	}
	var holds []*sample.Sample // of the batches convertAhead began
	for k := range first.Fields {
		var v any
		var err error
		if lut := b.deferred[k]; lut != nil {
			r := b.rows[k]
			delete(b.rows, k)
			v, err = stackConverted(b.buf, k, lut, b.cfg.Size, r)
			if r != nil {
				holds = append(holds, r.hold)
				if err != nil {
					r.t.Recycle()
				}
			}
		} else {
			v, err = stack(b.buf, k, b.pad, b.cfg.Size)
			if t, ok := v.(*tensor.Tensor); ok && b.cfg.float32s[k] && t.DType == tensor.Float64 {
				v = t.Cast(tensor.Float32) // exact: the values came from float32s
			}
		}
		if err != nil {
			b.Drop()
			for _, h := range holds {
				b.env.Release(h)
			}
			for _, v := range out.Fields {
				if t, ok := v.(*tensor.Tensor); ok {
					t.Recycle()
				}
			}
			return fmt.Errorf("%s: %w", out.Origin, err)
		}
		out.Fields[k] = v
		if t, ok := v.(*tensor.Tensor); ok {
			b.checkDType(k, t.DType, out.Origin)
		}
	}
	// The inputs' memory goes to the batch, which then reserves only what
	// it needs beyond it. Released, it could be taken upstream before the
	// batch reserved its own, with this stage's queue already full of its
	// next inputs: nothing would free memory again (a new-user test saw
	// such runs stuck, cache → shuffle → batch at a tight budget). Their
	// tensors were copied into the batch, and this stage is their last
	// holder, so the buffers go back to the pool for the next samples.
	for _, h := range holds {
		b.env.Hand(out, h)
	}
	for i, s := range b.buf {
		b.env.Hand(out, s)
		s.Recycle()
		b.buf[i] = nil
	}
	b.buf = b.buf[:0]
	b.bytes = 0
	b.holding.Store(0)
	return emit(out)
}

// checkDType warns, once per field, when field k's batches change dtype:
// a sink then writes the field as two types (int64_list and float_list,
// which TensorFlow's parser takes for a mismatch), and a trainer gets two.
func (b *batchStage) checkDType(k string, dt tensor.DType, origin string) {
	if b.dtypes == nil {
		b.dtypes, b.warned = map[string]tensor.DType{}, map[string]bool{}
	}
	first, ok := b.dtypes[k]
	if !ok {
		b.dtypes[k] = dt
		return
	}
	if first != dt && !b.warned[k] && b.env.Log != nil {
		b.warned[k] = true
		fix := fmt.Sprintf("give it one dtype with cast(x, %q) in a map", first.String())
		if ints := map[tensor.DType]bool{tensor.Int64: true, tensor.Float64: true}; ints[first] && ints[dt] {
			// The usual case: JSON has one kind of number.
			fix = "its values are integers in some samples and other numbers in others (a jsonl key, say); for one dtype, set it with float(x) in a map"
		}
		b.env.Log.Warn(fmt.Sprintf("field %q was batched as %s before, and as %s in %s, so the sink gets it as both: %s", k, first, dt, origin, fix))
	}
}

// Stack combines field k of every sample into one value with a leading
// batch dimension. Fields named in pad are padded to the largest shape.
func Stack(ss []*sample.Sample, k string, pad map[string]float64) (any, error) {
	return stack(ss, k, pad, len(ss))
}

// stack is Stack for a stage whose full batches have rows samples: a
// shorter batch of tensors may take an idle full batch's buffer
// (tensor.AllocShort).
func stack(ss []*sample.Sample, k string, pad map[string]float64, rows int) (any, error) {
	n := len(ss)
	get := func(i int) (any, error) {
		v, ok := ss[i].Fields[k]
		if !ok {
			return nil, fmt.Errorf("field %q is missing from %s", k, ss[i].Describe())
		}
		return v, nil
	}
	v0, err := get(0)
	if err != nil {
		return nil, err
	}
	if _, padded := pad[k]; padded {
		// Refused by validate where the type is known; a jsonl key's is
		// known only here, and its lists were stacked unpadded, without a
		// word.
		if _, ok := v0.(*tensor.Tensor); !ok {
			hint := ""
			if _, ok := v0.([]any); ok {
				hint = fmt.Sprintf(" (cast it to a tensor in a map first: cast(%s, \"int64\"))", k)
			}
			return nil, fmt.Errorf("pad applies to tensor fields; %q is %s in %s%s", k, expression.ValueWord(v0), ss[0].Describe(), hint)
		}
	}
	switch v0.(type) {
	case int64, float64, bool:
		dt := map[string]tensor.DType{"int64": tensor.Int64, "float64": tensor.Float64, "bool": tensor.Uint8}[fmt.Sprintf("%T", v0)]
		if dt == tensor.Int64 && anyFloat(ss, k) {
			// JSON has one kind of number: a jsonl key written 1 in one
			// line and 2.5 in the next is a float64 column, as NumPy and
			// pandas read it. (Fields typed by expressions never mix.)
			dt = tensor.Float64
		}
		t := tensor.New(dt, n)
		for i := range ss {
			v, err := get(i)
			if err != nil {
				return nil, err
			}
			switch x := v.(type) {
			case int64:
				switch dt {
				case tensor.Int64:
					t.Int64()[i] = x
				case tensor.Float64:
					t.Float64()[i] = float64(x)
				default:
					return nil, mixed(k, ss, i, v0, v)
				}
			case float64:
				if dt != tensor.Float64 {
					return nil, mixed(k, ss, i, v0, v)
				}
				t.Float64()[i] = x
			case bool:
				if dt != tensor.Uint8 {
					return nil, mixed(k, ss, i, v0, v)
				}
				t.Booleans = true
				if x {
					t.Data[i] = 1
				}
			default:
				return nil, mixed(k, ss, i, v0, v)
			}
		}
		return t, nil
	case string:
		out := make([]string, n)
		for i := range ss {
			v, err := get(i)
			if err != nil {
				return nil, err
			}
			s, ok := v.(string)
			if !ok {
				return nil, mixed(k, ss, i, v0, v)
			}
			out[i] = s
		}
		return out, nil
	case []byte:
		out := make([][]byte, n)
		for i := range ss {
			v, err := get(i)
			if err != nil {
				return nil, err
			}
			b, ok := v.([]byte)
			if !ok {
				return nil, mixed(k, ss, i, v0, v)
			}
			out[i] = b
		}
		return out, nil
	case *tensor.Tensor:
		ts := make([]*tensor.Tensor, n)
		for i := range ss {
			v, err := get(i)
			if err != nil {
				return nil, err
			}
			t, ok := v.(*tensor.Tensor)
			if !ok {
				return nil, mixed(k, ss, i, v0, v)
			}
			ts[i] = t
		}
		pv, padded := pad[k]
		return stackTensors(k, ts, padded, pv, ss, rows)
	}
	out := make([]any, n)
	for i := range ss {
		v, err := get(i)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// anyFloat reports whether field k holds a float64 in any of ss.
func anyFloat(ss []*sample.Sample, k string) bool {
	for _, s := range ss {
		if _, ok := s.Fields[k].(float64); ok {
			return true
		}
	}
	return false
}

// mixed is the error for field k of sample ss[i], of another type than
// in the batch's first sample.
func mixed(k string, ss []*sample.Sample, i int, a, b any) error {
	return fmt.Errorf("field %q is %s in %s but %s in %s, within one batch", k, expression.ValueWord(a), ss[0].Describe(), expression.ValueWord(b), ss[i].Describe())
}

// fixChannels is what to do about images whose channel counts differ:
// padding the channel axis would put a gray image's alpha in the green
// channel, and no resize changes channels (both
// were suggested).
const fixChannels = "decode with a fixed channel count, e.g. decode_image(b, 3) or decode_image(b, 4), rather than 0 (as stored)"

// channelsDiffer reports whether two shapes look like images [H, W, C]
// that differ in their channel count C (1 to 4) alone; other data whose
// last dimension varies is padded (decode_raw rows of 5
// and 7 bytes were told to decode with fixed channels).
func channelsDiffer(a, b []int) bool {
	return len(a) == 3 && len(b) == 3 && a[0] == b[0] && a[1] == b[1] && a[2] != b[2] &&
		a[2] >= 1 && a[2] <= 4 && b[2] >= 1 && b[2] <= 4
}

// padFits says why pad value v cannot be stored in dtype dt unchanged, or
// returns nil: a pad the dtype would change (-1 in uint8 saturating to 0,
// 0.5 in int64 truncating to 0) looks like data, or stops marking the
// padding.
func padFits(v float64, dt tensor.DType) error {
	var in bool
	switch dt {
	case tensor.Uint8:
		in = v >= 0 && v <= 255
	case tensor.Int32:
		in = v >= math.MinInt32 && v <= math.MaxInt32
	case tensor.Int64:
		in = v >= -(1<<63) && v < 1<<63
	case tensor.Float32:
		if !math.IsInf(v, 0) && !math.IsNaN(v) && math.Abs(v) > math.MaxFloat32 {
			return fmt.Errorf("pad %v is beyond float32's range (±%g)", v, float32(math.MaxFloat32))
		}
		return nil
	default:
		return nil
	}
	if !in || v != math.Trunc(v) {
		return fmt.Errorf("pad %v does not fit %s (an integer in its range)", v, dt)
	}
	return nil
}

func stackTensors(k string, ts []*tensor.Tensor, padded bool, padValue float64, ss []*sample.Sample, rows int) (*tensor.Tensor, error) {
	t0 := ts[0]
	if padded {
		if err := padFits(padValue, t0.DType); err != nil {
			return nil, fmt.Errorf("field %q of %s: %w", k, ss[0].Describe(), err)
		}
	}
	shape := append([]int(nil), t0.Shape...)
	same := true
	for i, t := range ts[1:] {
		if t.DType != t0.DType {
			return nil, fmt.Errorf("field %q: %s is %s but %s is %s", k, ss[0].Describe(), t0, ss[i+1].Describe(), t)
		}
		if len(t.Shape) != len(shape) {
			return nil, fmt.Errorf("field %q: rank differs within a batch: %s is %s, %s is %s", k, ss[0].Describe(), t0, ss[i+1].Describe(), t)
		}
		for d := range shape {
			if t.Shape[d] != t0.Shape[d] {
				same = false
			}
			shape[d] = max(shape[d], t.Shape[d])
		}
	}
	if !same && !padded {
		for i, t := range ts[1:] {
			if !tensor.Equal(&tensor.Tensor{DType: t.DType, Shape: t.Shape}, &tensor.Tensor{DType: t0.DType, Shape: t0.Shape}) {
				if channelsDiffer(t0.Shape, t.Shape) {
					return nil, fmt.Errorf("field %q: channel counts differ within a batch (%s is %s, %s is %s); %s",
						k, ss[0].Describe(), t0, ss[i+1].Describe(), t, fixChannels)
				}
				return nil, fmt.Errorf("field %q: shapes differ within a batch (%s is %s, %s is %s); resize first or add pad: {%s: 0}",
					k, ss[0].Describe(), t0, ss[i+1].Describe(), t, k)
			}
		}
	}
	var out *tensor.Tensor
	if same {
		out = tensor.AllocShort(t0.DType, rows, append([]int{len(ts)}, shape...)...) // every row is copied over
	} else {
		out = tensor.New(t0.DType, append([]int{len(ts)}, shape...)...) // padding relies on zeros
	}
	rowBytes := len(out.Data) / len(ts)
	for i, t := range ts {
		dst := out.Data[i*rowBytes : (i+1)*rowBytes]
		if same {
			copy(dst, t.Data)
			continue
		}
		row := &tensor.Tensor{DType: t0.DType, Shape: shape, Data: dst}
		if padValue != 0 {
			for j := 0; j < row.Len(); j++ {
				row.Set(j, padValue)
			}
		}
		copyPadded(row, t)
	}
	// Stacked booleans stay booleans, unless padding put other values in.
	out.Booleans = t0.Booleans && (same || padValue == 0 || padValue == 1)
	for _, t := range ts[1:] {
		out.Booleans = out.Booleans && t.Booleans
	}
	return out, nil
}

// stackConverted stacks field k, a tensor of the same shape in every
// sample, into a float32 batch, converting each row through lut as it is
// copied: the to_float a map upstream left to this stage. r, if not nil,
// is the batch convertAhead began, its first r.done rows converted (their
// images recycled: only their shapes remain); otherwise a batch shorter
// than rows may take an idle full batch's buffer (tensor.AllocShort).
func stackConverted(ss []*sample.Sample, k string, lut *tensor.FloatLUT, rows int, r *rowsSoFar) (*tensor.Tensor, error) {
	from := 0
	if r != nil {
		from = r.done
	}
	var t0 *tensor.Tensor
	for i, s := range ss {
		v, ok := s.Fields[k]
		if !ok {
			return nil, fmt.Errorf("field %q is missing from %s", k, s.Describe())
		}
		t, ok := v.(*tensor.Tensor)
		if !ok {
			return nil, fmt.Errorf("field %q of %s is %T, want a tensor", k, s.Describe(), v)
		}
		if i < from {
			t0 = cmp.Or(t0, t) // checked as it was converted
			continue
		}
		if err := lut.Check(t); err != nil {
			return nil, fmt.Errorf("field %q of %s: %w", k, s.Describe(), err)
		}
		if i == 0 {
			t0 = t
		} else if !slices.Equal(t.Shape, t0.Shape) {
			if channelsDiffer(t0.Shape, t.Shape) {
				return nil, fmt.Errorf("field %q: channel counts differ within a batch (%s is %s, %s is %s); %s",
					k, ss[0].Describe(), t0, s.Describe(), t, fixChannels)
			}
			return nil, fmt.Errorf("field %q: shapes differ within a batch (%s is %s, %s is %s); resize first",
				k, ss[0].Describe(), t0, s.Describe(), t)
		}
	}
	var out *tensor.Tensor
	if r != nil {
		out = r.t
		out.Shape[0] = len(ss)
		out.Data = out.Data[:len(out.Data)/rows*len(ss)]
	} else {
		out = tensor.AllocShort(tensor.Float32, rows, append([]int{len(ss)}, t0.Shape...)...) // every row is written
	}
	dst := out.Float32()
	row := t0.Len()
	for i := from; i < len(ss); i++ {
		lut.Into(dst[i*row:(i+1)*row:(i+1)*row], ss[i].Fields[k].(*tensor.Tensor))
	}
	return out, nil
}

// copyPadded copies src into the leading corner of dst (same rank, each
// dimension of dst at least as large).
func copyPadded(dst, src *tensor.Tensor) {
	es := src.DType.Size()
	if len(src.Shape) == 0 {
		copy(dst.Data, src.Data)
		return
	}
	// Copy the innermost rows one at a time.
	inner := src.Shape[len(src.Shape)-1] * es
	rows := src.Len() / max(1, src.Shape[len(src.Shape)-1])
	idx := make([]int, len(src.Shape)-1)
	for r := 0; r < rows; r++ {
		so, do := 0, 0
		sstride, dstride := inner, dst.Shape[len(dst.Shape)-1]*es
		for d := len(idx) - 1; d >= 0; d-- {
			so += idx[d] * sstride
			do += idx[d] * dstride
			sstride *= src.Shape[d]
			dstride *= dst.Shape[d]
		}
		copy(dst.Data[do:do+inner], src.Data[so:so+inner])
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < src.Shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}
