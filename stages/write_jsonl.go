package stages

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
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
	} else if cc.Environment {
		if err := checkWritable(cc.Resolve(c.Path)); err != nil {
			cc.Errorf("path", "%v", err)
		}
	}
	sharedOutput(cc, c.Path)
	return sample.Schema{}
}

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
	b, err := AppendJSON(j.buf[:0], s.Fields)
	if err != nil {
		return err
	}
	j.buf = append(b, '\n')
	_, err = j.f.Write(j.buf)
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
	b = append(b, '{')
	for i, k := range sample.SortedKeys(fields) {
		if i > 0 {
			b = append(b, ',')
		}
		// JSON's quoting, not Go's: strconv would write \x7f or \a, which
		// no JSON reader takes (found by FuzzParseJSONLine).
		var err error
		if b, err = appendString(b, k); err != nil {
			return nil, fmt.Errorf("field name %q: %w", k, err)
		}
		b = append(b, ':')
		if b, err = appendValue(b, fields[k]); err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%v cannot be written as JSON", f)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, bits)
	// A float keeps a point or an exponent (1.0, not 1), as serve writes
	// them: a reader, piperun's jsonl source among them, would take 1 for
	// an integer, and a batch of 1.0 and 2.5 read back would mix int64
	// and float64 (found by a new-user test).
	if !bytes.ContainsAny(b[n:], ".e") {
		b = append(b, ".0"...)
	}
	return b, nil
}

// appendString writes x as a JSON string. JSON strings are Unicode:
// json.Marshal would turn each invalid byte into U+FFFD, changing the data
// without a word.
func appendString(b []byte, x string) ([]byte, error) {
	if utf8.ValidString(x) {
		q, _ := json.Marshal(x)
		return append(b, q...), nil
	}
	i := invalidUTF8([]byte(x))
	return nil, fmt.Errorf("string of %d bytes is not valid UTF-8 (byte %d is 0x%02x), and a JSON string cannot hold it: read it as bytes (written as base64) or write it with write_tfrecord", len(x), i, x[i])
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case float64:
		return appendFloat(b, x, 64)
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return appendString(b, x)
	case []byte:
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, x)
		return append(b, '"'), nil
	case [][]byte:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return appendValue(b, l)
	case []string:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = e
		}
		return appendValue(b, l)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case *tensor.Tensor:
		return appendTensor(b, x, 0, 0)
	}
	return nil, fmt.Errorf("cannot write %T as JSON", v)
}

// appendTensor writes dimension d of t starting at flat element off.
func appendTensor(b []byte, t *tensor.Tensor, d, off int) ([]byte, error) {
	if d == len(t.Shape) {
		switch t.DType {
		case tensor.Float32:
			return appendFloat(b, t.At(off), 32)
		case tensor.Float64:
			return appendFloat(b, t.At(off), 64)
		}
		return strconv.AppendInt(b, t.IntAt(off), 10), nil
	}
	stride := 1
	for _, s := range t.Shape[d+1:] {
		stride *= s
	}
	b = append(b, '[')
	for i := 0; i < t.Shape[d]; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendTensor(b, t, d+1, off+i*stride); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}
