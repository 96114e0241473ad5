package stages

import (
	"context"
	"fmt"
	"strconv"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
)

// FeatureSpec describes one feature to parse.
type FeatureSpec struct {
	DType   string `yaml:"dtype" jsonschema:"required,enum=int64,enum=float32,enum=bytes,enum=string" jsonschema_description:"int64, float32, bytes or string."`
	Shape   []int  `yaml:"shape" jsonschema_description:"[] scalar (default), [N] fixed length, [-1] variable length, [A, B] fixed matrix."`
	Default any    `yaml:"default" jsonschema_description:"Value used when the feature is absent; without it a missing fixed-size feature is an error."`
}

// ParseExampleConfig configures parse_example.
type ParseExampleConfig struct {
	Field    string                `yaml:"field" jsonschema_description:"Input field holding serialized tf.train.Example bytes (default record)."`
	Features spec.Map[FeatureSpec] `yaml:"features" jsonschema:"required" jsonschema_description:"feature key: {dtype, shape, default}. Each becomes a field of the same name."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "parse_example", Role: spec.RoleTransform, Doc: "Parses tf.train.Example records into the listed features.",
			NewConfig: func() any { return &ParseExampleConfig{Field: "record"} }, OnError: true, Parallel: true},
		Build: buildParseExample,
	})
}

func (f FeatureSpec) variable() bool { return len(f.Shape) == 1 && f.Shape[0] == -1 }

// fieldType is the type a parsed feature gets.
func (f FeatureSpec) fieldType() sample.Type {
	scalar := len(f.Shape) == 0
	switch f.DType {
	case "int64":
		if scalar {
			return sample.TInt
		}
		return sample.TensorOf(tensor.Int64, f.Shape...)
	case "float32":
		if scalar {
			// A float64 value, marked float32 so that batch stacks it so.
			return sample.Type{Kind: sample.Float, DType: tensor.Float32}
		}
		return sample.TensorOf(tensor.Float32, f.Shape...)
	case "bytes":
		if scalar {
			return sample.TBytes
		}
		return sample.ListOf(sample.Bytes)
	case "string":
		if scalar {
			return sample.TString
		}
		return sample.ListOf(sample.String)
	}
	return sample.TAny
}

// Check implements spec.Checker.
func (c *ParseExampleConfig) Check(cc *spec.CheckContext) sample.Schema {
	t, ok := cc.Input().Lookup(c.Field)
	switch {
	case !ok:
		cc.Errorf("field", "input has no field %q (fields here: %v)", c.Field, cc.Input().Names())
	case t.Kind != sample.Bytes && t.Kind != sample.Any:
		cc.Errorf("field", "field %q is %s; parse_example needs serialized bytes", c.Field, t)
	}
	if c.Features.Len() == 0 {
		cc.Errorf("features", "list at least one feature")
	}
	out := sample.Schema{}
	for _, e := range c.Features.Entries {
		p := "features." + e.Key
		if !identLike(e.Key) {
			p = fmt.Sprintf("features[%q]", e.Key)
		}
		f := e.Value
		switch f.DType {
		case "int64", "float32", "bytes", "string":
		default:
			cc.Errorf(p+".dtype", "unknown dtype %q (want int64, float32, bytes or string)", f.DType)
			continue
		}
		for i, d := range f.Shape {
			if d < -1 || d == 0 || (d == -1 && len(f.Shape) > 1) {
				cc.Errorf(fmt.Sprintf("%s.shape[%d]", p, i), "dimension must be positive, or a single -1 for variable length; got %v", f.Shape)
			}
		}
		if (f.DType == "bytes" || f.DType == "string") && len(f.Shape) > 1 {
			cc.Errorf(p+".shape", "%s features are scalars or lists; shape %v has too many dimensions", f.DType, f.Shape)
		}
		if f.Default != nil {
			if _, err := f.defaultValue(); err != nil {
				cc.Errorf(p+".default", "%v", err)
			}
		}
		out.Fields = append(out.Fields, sample.Field{Name: e.Key, Type: f.fieldType()})
	}
	return out
}

// defaultValues spreads the spec's default over the n elements of a
// fixed shape: a scalar fills them all; a list gives each its own, in
// row-major order, as TensorFlow's default_value does (a list of exactly
// n values). A variable-length feature's default is a scalar, unused.
func (f FeatureSpec) defaultValues(n int) ([]any, error) {
	list, ok := f.Default.([]any)
	if !ok {
		out := make([]any, n)
		for i := range out {
			out[i] = f.Default
		}
		return out, nil
	}
	if len(f.Shape) == 0 || f.variable() {
		return nil, fmt.Errorf("default for a feature of shape %v must be a scalar, got a list", f.Shape)
	}
	if len(list) != n {
		return nil, fmt.Errorf("default for shape %v must be a scalar or a list of %d values, got %d", f.Shape, n, len(list))
	}
	return list, nil
}

// defaultValue converts the spec's default to the feature's field value.
func (f FeatureSpec) defaultValue() (any, error) {
	n := tensor.NumElements(f.Shape)
	if f.variable() {
		n = 0
	}
	vals, err := f.defaultValues(n)
	if err != nil {
		return nil, err
	}
	if len(f.Shape) == 0 || f.variable() {
		// Checked for its type all the same; a variable-length feature's
		// default is not used (a missing one is empty).
		vals = []any{f.Default}
	}
	switch f.DType {
	case "int64":
		ints := make([]int64, len(vals))
		for i, x := range vals {
			v, ok := x.(int)
			if !ok {
				return nil, fmt.Errorf("default for an int64 feature must be an integer, got %v", x)
			}
			ints[i] = int64(v)
		}
		if len(f.Shape) == 0 {
			return ints[0], nil
		}
		if f.variable() {
			return tensor.New(tensor.Int64, 0), nil
		}
		t := tensor.New(tensor.Int64, f.Shape...)
		copy(t.Int64(), ints)
		return t, nil
	case "float32":
		fs := make([]float32, len(vals))
		for i, x := range vals {
			switch v := x.(type) {
			case int:
				fs[i] = float32(v)
			case float64:
				fs[i] = float32(v)
			default:
				return nil, fmt.Errorf("default for a float32 feature must be a number, got %v", x)
			}
		}
		if len(f.Shape) == 0 {
			return float64(fs[0]), nil
		}
		if f.variable() {
			return tensor.New(tensor.Float32, 0), nil
		}
		t := tensor.New(tensor.Float32, f.Shape...)
		copy(t.Float32(), fs)
		return t, nil
	case "bytes", "string":
		ss := make([]string, len(vals))
		for i, x := range vals {
			v, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("default for a %s feature must be a string, got %v", f.DType, x)
			}
			ss[i] = v
		}
		if len(f.Shape) == 0 {
			if f.DType == "bytes" {
				return []byte(ss[0]), nil
			}
			return ss[0], nil
		}
		if f.variable() {
			ss = ss[:0]
		}
		if f.DType == "bytes" {
			out := make([][]byte, len(ss))
			for i, v := range ss {
				out[i] = []byte(v)
			}
			return out, nil
		}
		return ss, nil
	}
	return nil, fmt.Errorf("unknown dtype %q", f.DType)
}

type parseExample struct {
	skip     func(*sample.Sample) bool
	field    string
	keys     []string
	specs    []FeatureSpec
	defaults []any
	want     map[string]int
}

func buildParseExample(env *Env, cfg any) (any, error) {
	c := cfg.(*ParseExampleConfig)
	p := &parseExample{field: c.Field, want: map[string]int{}, skip: env.Skip}
	for i, e := range c.Features.Entries {
		p.keys = append(p.keys, e.Key)
		p.specs = append(p.specs, e.Value)
		var d any
		if e.Value.Default != nil || e.Value.variable() {
			if e.Value.Default == nil {
				e.Value.Default = defaultZero(e.Value.DType)
			}
			v, err := e.Value.defaultValue()
			if err != nil {
				return nil, fmt.Errorf("feature %q: %w", e.Key, err)
			}
			d = v
		}
		p.defaults = append(p.defaults, d)
		p.want[e.Key] = i
	}
	return p, nil
}

func defaultZero(dtype string) any {
	switch dtype {
	case "int64":
		return 0
	case "float32":
		return 0.0
	}
	return ""
}

func (p *parseExample) Process(_ context.Context, s *sample.Sample, emit Emit) error {
	if p.skip != nil && p.skip(s) {
		return emit(s)
	}
	rec, ok := s.Fields[p.field].([]byte)
	if !ok {
		return fmt.Errorf("field %q is %T, not serialized bytes", p.field, s.Fields[p.field])
	}
	vals := make([]any, len(p.keys))
	err := example.ParseInto(rec, p.want, func(i int, f *example.Feature) error {
		if f.Kind == example.KindNone {
			vals[i] = nil // a feature with no kind set counts as absent
			return nil
		}
		v, err := convertFeature(p.specs[i], f)
		if err != nil {
			return fmt.Errorf("feature %q: %w", p.keys[i], err)
		}
		vals[i] = v
		return nil
	})
	if err != nil {
		return err
	}
	out := &sample.Sample{ID: s.ID, Epoch: s.Epoch, Origin: s.Origin, Fields: make(map[string]any, len(p.keys))}
	for i, v := range vals {
		if v == nil {
			if p.defaults[i] == nil {
				return fmt.Errorf("feature %q is missing and has no default", p.keys[i])
			}
			v = p.defaults[i]
		}
		out.Fields[p.keys[i]] = v
	}
	return emit(out)
}

var kindOf = map[string]example.Kind{"int64": example.KindInt64, "float32": example.KindFloat, "bytes": example.KindBytes, "string": example.KindBytes}

func convertFeature(fs FeatureSpec, f *example.Feature) (any, error) {
	if want := kindOf[fs.DType]; f.Kind != want {
		return nil, fmt.Errorf("holds %s values, but the spec says %s", f.Kind, fs.DType)
	}
	n := f.Len()
	switch {
	case len(fs.Shape) == 0:
		if n != 1 {
			return nil, fmt.Errorf("holds %d values, but shape [] wants exactly 1", n)
		}
	case !fs.variable():
		if want := tensor.NumElements(fs.Shape); n != want {
			return nil, fmt.Errorf("holds %d values, but shape %v wants %d", n, fs.Shape, want)
		}
	}
	shape := fs.Shape
	if fs.variable() {
		shape = []int{n}
	}
	switch fs.DType {
	case "int64":
		if len(fs.Shape) == 0 {
			return f.Ints[0], nil
		}
		t := tensor.New(tensor.Int64, shape...)
		copy(t.Int64(), f.Ints)
		return t, nil
	case "float32":
		if len(fs.Shape) == 0 {
			return float32Value(f.Floats[0]), nil
		}
		t := tensor.New(tensor.Float32, shape...)
		copy(t.Float32(), f.Floats)
		return t, nil
	case "bytes":
		if len(fs.Shape) == 0 {
			return f.Bytes[0], nil
		}
		return f.Bytes, nil
	default:
		if len(fs.Shape) == 0 {
			return string(f.Bytes[0]), nil
		}
		out := make([]string, n)
		for i, b := range f.Bytes {
			out[i] = string(b)
		}
		return out, nil
	}
}

// float32Value widens a float32 feature to the float64 a sample holds:
// the shortest decimal that reads back as the same float32, so 17.65
// stays 17.65 in expressions and output, not 17.649999618530273, and
// narrowing it again (batch, write_tfrecord) gives the very float32.
func float32Value(f float32) float64 {
	v, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil { // NaN and the infinities format as words that parse back
		return float64(f)
	}
	return v
}
