package stages

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
	"github.com/piperun/piperun/tfrecord"
)

// WriteTFRecordConfig configures the write_tfrecord sink.
type WriteTFRecordConfig struct {
	Path        string `yaml:"path" jsonschema:"required" jsonschema_description:"Output path; {shard} and {shards} become 5-digit numbers, e.g. out/train-{shard}-of-{shards}.tfrecord."`
	Shards      int    `yaml:"shards" jsonschema:"minimum=1" jsonschema_description:"Number of files; sample i goes to shard i mod shards (default 1)."`
	Compression string `yaml:"compression" jsonschema:"enum=none,enum=gzip,enum=zlib,enum=NONE,enum=GZIP,enum=ZLIB" jsonschema_description:"none (default), gzip or zlib."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "write_tfrecord", Role: spec.RoleSink, Doc: "Writes samples as tf.train.Example records into sharded TFRecord files, renamed into place when the run succeeds.",
			NewConfig: func() any { return &WriteTFRecordConfig{Shards: 1, Compression: "none"} }},
		Build: buildWriteTFRecord,
	})
}

// placeholder matches what looks like a {name} in an output path.
var placeholder = regexp.MustCompile(`\{[A-Za-z_]+\}`)

// ShardPath returns the path of shard i of n.
func ShardPath(pattern string, i, n int) string {
	r := strings.NewReplacer("{shard}", fmt.Sprintf("%05d", i), "{shards}", fmt.Sprintf("%05d", n))
	return r.Replace(pattern)
}

// Check implements spec.Checker.
func (c *WriteTFRecordConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Path == "" {
		cc.Errorf("path", "must not be empty")
	}
	if c.Shards < 1 {
		cc.Errorf("shards", "must be at least 1, got %d", c.Shards)
	}
	if c.Shards > 1 && !strings.Contains(c.Path, "{shard}") {
		cc.Errorf("path", "with %d shards the path must contain {shard}", c.Shards)
	}
	// A mistyped placeholder would be written literally into the name.
	for _, m := range placeholder.FindAllString(c.Path, -1) {
		if m != "{shard}" && m != "{shards}" {
			cc.Errorf("path", "unknown placeholder %s (known: {shard}, {shards})", m)
		}
	}
	comp, auto, err := tfrecord.ParseCompression(c.Compression)
	if err != nil || auto {
		cc.Errorf("compression", "must be none, gzip or zlib, got %q", c.Compression)
	}
	_ = comp
	for _, f := range cc.Input().Fields {
		switch f.Type.Kind {
		case sample.Tensor, sample.Int, sample.Float, sample.Bool, sample.String, sample.Bytes, sample.Any:
		case sample.List:
			if f.Type.Elem == sample.Any {
				cc.Warnf("", "field %q is %s; it can be written only if its elements are all numbers or all strings", f.Name, f.Type)
			}
		}
	}
	if cc.Environment && c.Path != "" {
		err := checkWritable(cc.Resolve(ShardPath(c.Path, 0, max(c.Shards, 1))))
		for i := 1; err == nil && i < c.Shards; i++ {
			err = replaceable(cc.Resolve(ShardPath(c.Path, i, c.Shards)))
		}
		if err != nil {
			cc.Errorf("path", "%v", err)
		}
	}
	return sample.Schema{}
}

// OutputPaths implements spec.Outputter: every shard.
func (c *WriteTFRecordConfig) OutputPaths(resolve func(string) string) []string {
	if c.Path == "" {
		return nil
	}
	var out []string
	for i := range max(c.Shards, 1) {
		out = append(out, resolve(ShardPath(c.Path, i, max(c.Shards, 1))))
	}
	return out
}

type tfrecordSink struct {
	files   []*atomicFile
	writers []*tfrecord.Writer
	n       int64
}

func buildWriteTFRecord(env *Env, cfg any) (any, error) {
	c := cfg.(*WriteTFRecordConfig)
	comp, _, err := tfrecord.ParseCompression(c.Compression)
	if err != nil {
		return nil, err
	}
	s := &tfrecordSink{}
	for i := 0; i < c.Shards; i++ {
		f, err := createAtomic(env.Resolve(ShardPath(c.Path, i, c.Shards)))
		if err != nil {
			s.Abort()
			return nil, err
		}
		s.files = append(s.files, f)
		s.writers = append(s.writers, tfrecord.NewWriter(f, comp))
	}
	return s, nil
}

func (s *tfrecordSink) Write(_ context.Context, smp *sample.Sample) error {
	ex, err := ToExample(smp.Fields)
	if err != nil {
		return err
	}
	i := int(s.n % int64(len(s.writers)))
	s.n++
	err = s.writers[i].Write(example.Marshal(ex))
	smp.Recycle() // the Example was marshalled into a copy
	return err
}

// Prepare implements Preparer: every shard is written whole before any
// is renamed into place.
func (s *tfrecordSink) Prepare() error {
	for i, w := range s.writers {
		if w == nil {
			continue
		}
		s.writers[i] = nil
		if err := w.Close(); err != nil {
			return err
		}
		if err := s.files[i].prepare(); err != nil {
			return err
		}
	}
	return nil
}

func (s *tfrecordSink) Commit() error {
	if err := s.Prepare(); err != nil {
		return err
	}
	var errs []error
	for _, f := range s.files {
		if err := f.commit(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *tfrecordSink) Abort() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.abort())
	}
	return errors.Join(errs...)
}

// ToExample converts sample fields to a tf.train.Example: integers and
// bools to int64 lists, floats to float lists, strings and bytes to bytes
// lists. Tensors are flattened (row-major); uint8 tensors are written as one
// bytes value holding the raw buffer, the compact form images take.
func ToExample(fields map[string]any) (*example.Example, error) {
	ex := &example.Example{Features: make(map[string]*example.Feature, len(fields))}
	for k, v := range fields {
		f, err := toFeature(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		ex.Features[k] = f
	}
	return ex, nil
}

func toFeature(v any) (*example.Feature, error) {
	switch x := v.(type) {
	case int64:
		return &example.Feature{Kind: example.KindInt64, Ints: []int64{x}}, nil
	case bool:
		b := int64(0)
		if x {
			b = 1
		}
		return &example.Feature{Kind: example.KindInt64, Ints: []int64{b}}, nil
	case float64:
		return &example.Feature{Kind: example.KindFloat, Floats: []float32{float32(x)}}, nil
	case string:
		return &example.Feature{Kind: example.KindBytes, Bytes: [][]byte{[]byte(x)}}, nil
	case []byte:
		return &example.Feature{Kind: example.KindBytes, Bytes: [][]byte{x}}, nil
	case [][]byte:
		return &example.Feature{Kind: example.KindBytes, Bytes: x}, nil
	case []string:
		b := make([][]byte, len(x))
		for i, s := range x {
			b[i] = []byte(s)
		}
		return &example.Feature{Kind: example.KindBytes, Bytes: b}, nil
	case *tensor.Tensor:
		switch x.DType {
		case tensor.Uint8:
			return &example.Feature{Kind: example.KindBytes, Bytes: [][]byte{x.Data}}, nil
		case tensor.Int32, tensor.Int64:
			out := make([]int64, x.Len())
			for i := range out {
				out[i] = x.IntAt(i)
			}
			return &example.Feature{Kind: example.KindInt64, Ints: out}, nil
		case tensor.Float32:
			return &example.Feature{Kind: example.KindFloat, Floats: append([]float32(nil), x.Float32()...)}, nil
		case tensor.Float64:
			out := make([]float32, x.Len())
			for i, f := range x.Float64() {
				out[i] = float32(f)
			}
			return &example.Feature{Kind: example.KindFloat, Floats: out}, nil
		}
	case []any:
		f := &example.Feature{}
		for _, e := range x {
			switch y := e.(type) {
			case int64:
				f.Ints = append(f.Ints, y)
			case float64:
				f.Floats = append(f.Floats, float32(y))
			case string:
				f.Bytes = append(f.Bytes, []byte(y))
			case []byte:
				f.Bytes = append(f.Bytes, y)
			default:
				return nil, fmt.Errorf("%s in a list cannot be written as a feature: a feature is one flat list of int64s, floats or bytes", featureWord(e))
			}
		}
		switch {
		case len(f.Ints) == len(x):
			f.Kind = example.KindInt64
		case len(f.Floats) == len(x):
			f.Kind = example.KindFloat
		case len(f.Bytes) == len(x):
			f.Kind = example.KindBytes
		default:
			return nil, fmt.Errorf("list mixes element types")
		}
		return f, nil
	}
	return nil, fmt.Errorf("%s cannot be written as a feature: a feature is one flat list of int64s, floats or bytes", featureWord(v))
}

// featureWord names what a feature cannot hold as a spec's author knows it.
func featureWord(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("a value of Go type %T", v)
}
