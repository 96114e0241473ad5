package stages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// JSONLConfig configures the jsonl reader.
type JSONLConfig struct {
	Field       string    `yaml:"field" jsonschema_description:"Input field holding the file path (default path)."`
	CycleLength spec.Auto `yaml:"cycle_length" jsonschema_description:"Files read at once, interleaved; auto = number of cores."`
	BlockLength int       `yaml:"block_length" jsonschema_description:"Consecutive lines taken from one file before moving on (default 1)."`
	MaxLine     int       `yaml:"max_line_bytes" jsonschema_description:"Longest accepted line (default 64 MiB)."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "jsonl", Role: spec.RoleTransform, Doc: "Reads JSON-lines files: one sample per line, its keys as fields.",
			NewConfig: func() any { return &JSONLConfig{Field: "path", BlockLength: 1, MaxLine: 64 << 20} }, OnError: true, Parallel: true},
		Build: func(env *Env, cfg any) (any, error) {
			c := cfg.(*JSONLConfig)
			return &jsonlStage{cfg: c, cycle: c.CycleLength.Resolve(env.Workers)}, nil
		},
	})
}

// Check implements spec.Checker. The fields of JSON lines are known only
// at run time, so the schema is open: expressions may name any field.
func (c *JSONLConfig) Check(cc *spec.CheckContext) sample.Schema {
	checkPathField(cc, c.Field)
	if c.BlockLength < 1 {
		cc.Errorf("block_length", "must be at least 1, got %d", c.BlockLength)
	}
	if c.MaxLine < 1 {
		cc.Errorf("max_line_bytes", "must be positive")
	}
	return sample.Schema{Open: true}
}

type jsonlStage struct {
	cfg   *JSONLConfig
	cycle int
}

func (j *jsonlStage) Interleave() (int, int) { return j.cycle, j.cfg.BlockLength }

func (j *jsonlStage) Open(_ context.Context, in *sample.Sample) (Stream, error) {
	path, ok := in.Fields[j.cfg.Field].(string)
	if !ok {
		return nil, fmt.Errorf("field %q is %T, not a path", j.cfg.Field, in.Fields[j.cfg.Field])
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(f)
	// The scanner's limit is the larger of its buffer and max, and a line
	// needs room for its newline: start small, so a limit under 64 KiB holds.
	limit := j.cfg.MaxLine + 1
	sc.Buffer(make([]byte, 0, min(64<<10, limit)), limit)
	return &jsonlStream{f: f, sc: sc, path: path, epoch: in.Epoch}, nil
}

type jsonlStream struct {
	f     *os.File
	sc    *bufio.Scanner
	path  string
	line  int
	epoch int
}

func (s *jsonlStream) Next() (*sample.Sample, error) {
	for s.sc.Scan() {
		s.line++
		b := bytes.TrimSpace(s.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		origin := fmt.Sprintf("%s:%d", s.path, s.line)
		fields, err := ParseJSONLine(b)
		if err != nil {
			return nil, &ItemError{Err: fmt.Errorf("%s: %w", origin, err)}
		}
		return &sample.Sample{Epoch: s.epoch, Origin: origin, Fields: fields}, nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", s.path, s.line+1, err)
	}
	return nil, io.EOF
}

func (s *jsonlStream) Close() error { return s.f.Close() }

// ParseJSONLine decodes one JSON object into sample fields: integral
// numbers become int64, other numbers float64, arrays lists. Nested
// objects are refused, since fields are flat.
func ParseJSONLine(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("line is not a JSON object")
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	for k, v := range m {
		c, err := jsonValue(v)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		m[k] = c
	}
	return m, nil
}

func jsonValue(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		if !strings.ContainsAny(string(x), ".eE") {
			// An integer that int64 cannot hold would come out as a
			// float64 that is not the number written.
			return nil, fmt.Errorf("integer %s does not fit in int64; write it as a string", x)
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return f, nil
	case []any:
		for i, e := range x {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	case map[string]any:
		return nil, fmt.Errorf("nested objects are not supported; flatten them into keys")
	}
	return v, nil
}
