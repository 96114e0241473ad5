package stages

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.WholeWriter = (*WriteJSONLConfig)(nil)
	_ spec.Checker     = (*WriteJSONLConfig)(nil)
	_ spec.Outputter   = (*WriteJSONLConfig)(nil)
	_ Preparer         = (*jsonlSink)(nil)
	_ Sink             = (*jsonlSink)(nil)
)

// WriteJSONLConfig configures the write_jsonl sink.
type WriteJSONLConfig struct {
	Path string `yaml:"path" jsonschema:"required" jsonschema_description:"Output file, relative to the spec's directory; written aside and renamed when the run succeeds."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "write_jsonl", Role: spec.RoleSink, Doc: "Writes one JSON object per sample; bytes as base64, tensors as nested lists.",
			NewConfig: func() any { return &WriteJSONLConfig{} }},
		Build: func(env *Env, cfg any) (any, error) {
			f, err := createAtomic(env.Resolve(cfg.(*WriteJSONLConfig).Path))
			if err != nil {
				return nil, err
			}
			return &jsonlSink{f: f}, nil
		},
	})
}

// Check implements spec.Checker.
func (c *WriteJSONLConfig) Check(cc *spec.CheckContext) sample.Schema {
	// A {shard} here would be written literally into the name, as a
	// user who knows write_tfrecord's paths does not expect.
	if m := placeholder.FindString(c.Path); m != "" {
		cc.Errorf("path", "write_jsonl writes one file and fills in no placeholders: %s would be written as it stands", m)
	}
	if c.Path == "" {
		cc.Errorf("path", "must not be empty")
	} else if err := FileName(c.Path); err != nil {
		cc.Errorf("path", "%v", err)
	} else if cc.Environment {
		if err := checkWritable(cc.Resolve(c.Path)); err != nil {
			cc.Errorf("path", "%v", err)
		}
	}
	sharedOutput(cc, c.Path)
	return sample.Schema{}
}

// WritesWhole implements plan.WholeWriter: the file is renamed into place
// when the run ends.
func (c *WriteJSONLConfig) WritesWhole() {}

// OutputPaths implements spec.Outputter.
func (c *WriteJSONLConfig) OutputPaths(resolve func(string) string) []string {
	if c.Path == "" {
		return nil
	}
	return []string{resolve(c.Path)}
}

type jsonlSink struct {
	f   *atomicFile
	buf []byte
}

func (j *jsonlSink) Write(_ context.Context, s *sample.Sample) error {
	// An error half-way leaves part of a line in the temporary file:
	// a sink has no on_error, so the run fails and the file is removed.
	o := jsonOut{b: j.buf[:0], w: j.f}
	err := o.object(s.Fields)
	if err == nil {
		o.b = append(o.b, '\n')
		_, err = j.f.Write(o.b)
	}
	j.buf = o.b[:0]
	s.Recycle()
	return err
}

// Prepare implements Preparer.
func (j *jsonlSink) Prepare() error { return j.f.prepare() }
func (j *jsonlSink) Commit() error  { return j.f.commit() }
func (j *jsonlSink) Abort() error   { return j.f.abort() }

// AppendJSON appends fields as one JSON object with sorted keys: bytes as
// base64 strings, tensors as nested lists. Non-finite floats are an error,
// since JSON cannot hold them.
func AppendJSON(b []byte, fields map[string]any) ([]byte, error) {
	o := jsonOut{b: b}
	if err := o.object(fields); err != nil {
		return nil, err
	}
	return o.b, nil
}

// jsonChunk is how much of a line write_jsonl holds before writing it out.
// Float32 text takes about 2.8 times a tensor's bytes: built whole, a line
// of 128 float32 images (73.5 MiB) was 204 MiB, and the process held about
// 6 times the batch beyond its budget (a budget test).
const jsonChunk = 256 << 10

// jsonOut is a line of JSON being written: appended to b and, where w is
// set, handed to w whenever b passes jsonChunk bytes.
type jsonOut struct {
	b []byte
	w io.Writer
}

// spill writes b out once it has grown past jsonChunk. It is called only
// between values, where nothing written needs to be looked at again.
func (o *jsonOut) spill() error {
	if o.w == nil || len(o.b) < jsonChunk {
		return nil
	}
	_, err := o.w.Write(o.b)
	o.b = o.b[:0]
	return err
}

func (o *jsonOut) object(fields map[string]any) error {
	o.b = append(o.b, '{')
	for i, k := range sample.SortedKeys(fields) {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		// JSON's quoting, not Go's: strconv would write \x7f or \a, which
		// no JSON reader takes (found by FuzzParseJSONLine).
		if err := o.string(k); err != nil {
			return fmt.Errorf("field name %q: %w", k, err)
		}
		o.b = append(o.b, ':')
		if err := o.value(fields[k]); err != nil {
			return fmt.Errorf("field %q: %w", k, err)
		}
	}
	o.b = append(o.b, '}')
	return nil
}

func (o *jsonOut) float(f float64, bits int) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("%v cannot be written as JSON", f)
	}
	n := len(o.b)
	o.b = strconv.AppendFloat(o.b, f, 'g', -1, bits)
	// A float keeps a point or an exponent (1.0, not 1), as serve writes
	// them: a reader, piperun's jsonl source among them, would take 1 for
	// an integer, and a batch of 1.0 and 2.5 read back would mix int64
	// and float64.
	for _, c := range o.b[n:] {
		if c == '.' || c == 'e' {
			return nil
		}
	}
	o.b = append(o.b, ".0"...)
	return nil
}

// string writes x as a JSON string. JSON strings are Unicode: json.Marshal
// would turn each invalid byte into U+FFFD, changing the data without a
// word.
func (o *jsonOut) string(x string) error {
	if utf8.ValidString(x) {
		q, _ := json.Marshal(x)
		o.b = append(o.b, q...)
		return nil
	}
	i := invalidUTF8([]byte(x))
	return fmt.Errorf("string of %d bytes is not valid UTF-8 (byte %d is 0x%02x), and a JSON string cannot hold it: read it as bytes (written as base64) or write it with write_tfrecord", len(x), i, x[i])
}

// base64Step is how many bytes of a bytes field are encoded at a time: a
// multiple of 3, so that no padding falls mid-string.
const base64Step = 3 * jsonChunk / 4

func (o *jsonOut) value(v any) error {
	switch x := v.(type) {
	case nil:
		o.b = append(o.b, "null"...)
	case int64:
		o.b = strconv.AppendInt(o.b, x, 10)
	case int:
		o.b = strconv.AppendInt(o.b, int64(x), 10)
	case float64:
		return o.float(x, 64)
	case bool:
		o.b = strconv.AppendBool(o.b, x)
	case string:
		return o.string(x)
	case []byte:
		o.b = append(o.b, '"')
		for len(x) > 0 {
			n := min(len(x), base64Step)
			o.b = base64.StdEncoding.AppendEncode(o.b, x[:n])
			x = x[n:]
			if err := o.spill(); err != nil {
				return err
			}
		}
		o.b = append(o.b, '"')
	case [][]byte:
		return o.list(len(x), func(i int) error { return o.value(x[i]) })
	case []string:
		return o.list(len(x), func(i int) error { return o.string(x[i]) })
	case []any:
		return o.list(len(x), func(i int) error { return o.value(x[i]) })
	case *tensor.Tensor:
		return o.tensor(x, 0, 0)
	default:
		return fmt.Errorf("cannot write %T as JSON", v)
	}
	return nil
}

// list writes [e(0),...,e(n-1)].
func (o *jsonOut) list(n int, e func(int) error) error {
	o.b = append(o.b, '[')
	for i := range n {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		if err := e(i); err != nil {
			return err
		}
		if err := o.spill(); err != nil {
			return err
		}
	}
	o.b = append(o.b, ']')
	return nil
}

// tensor writes dimension d of t starting at flat element off.
func (o *jsonOut) tensor(t *tensor.Tensor, d, off int) error {
	if d == len(t.Shape) {
		switch t.DType {
		case tensor.Float32:
			return o.float(t.At(off), 32)
		case tensor.Float64:
			return o.float(t.At(off), 64)
		}
		o.b = strconv.AppendInt(o.b, t.IntAt(off), 10)
		return nil
	}
	if d == len(t.Shape)-1 {
		return o.row(t, off, t.Shape[d])
	}
	stride := 1
	for _, s := range t.Shape[d+1:] {
		stride *= s
	}
	return o.list(t.Shape[d], func(i int) error { return o.tensor(t, d+1, off+i*stride) })
}

// jsonRowStep is how many elements row writes between looks at the size
// of the line held: a 1-D tensor is one row, and a parse_example list of
// millions of floats was formatted whole.
const jsonRowStep = 4096

// row writes the n elements of t from flat element off, the innermost
// dimension: the bulk of an image's line, without a call per element
// through list and tensor.
func (o *jsonOut) row(t *tensor.Tensor, off, n int) error {
	o.b = append(o.b, '[')
	var f32 []float32
	if t.DType == tensor.Float32 {
		f32 = t.Float32()[off : off+n]
	}
	for i := range n {
		if i > 0 {
			o.b = append(o.b, ',')
			if i%jsonRowStep == 0 {
				if err := o.spill(); err != nil {
					return err
				}
			}
		}
		switch {
		case f32 != nil:
			if err := o.float(float64(f32[i]), 32); err != nil {
				return err
			}
		case t.DType == tensor.Float64:
			if err := o.float(t.At(off+i), 64); err != nil {
				return err
			}
		default:
			o.b = strconv.AppendInt(o.b, t.IntAt(off+i), 10)
		}
	}
	o.b = append(o.b, ']')
	return o.spill()
}
