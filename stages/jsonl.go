package stages

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/piperun/piperun/internal/fileguard"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ spec.Checker  = (*JSONLConfig)(nil)
	_ plan.Reserver = (*JSONLConfig)(nil)
	_ Expander      = (*jsonlStage)(nil)
	_ Closer        = (*jsonlStream)(nil)
	_ Stream        = (*jsonlStream)(nil)
)

// JSONLConfig configures the jsonl reader.
type JSONLConfig struct {
	Field       string    `yaml:"field" jsonschema_description:"Input field holding the file path (default path)."`
	CycleLength spec.Auto `yaml:"cycle_length" jsonschema_description:"Files read at once, interleaved; auto = 8 on every machine, so the order does not depend on the core count."`
	BlockLength int       `yaml:"block_length" jsonschema:"minimum=1" jsonschema_description:"Consecutive lines taken from one file before moving on (default 1)."`
	MaxLine     int       `yaml:"max_line_bytes" jsonschema:"minimum=1" jsonschema_description:"Longest accepted line (default 64 MiB)."`
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "jsonl", Role: spec.RoleTransform, Doc: "Reads JSON-lines files: one sample per line, its keys as fields.",
			NewConfig: func() any { return &JSONLConfig{Field: "path", BlockLength: 1, MaxLine: 64 << 20} }, OnError: true, Parallel: true},
		Build: func(env *Env, cfg any) (any, error) {
			c := cfg.(*JSONLConfig)
			j := &jsonlStage{cfg: c, cycle: c.CycleLength.Resolve(DefaultCycleLength), max: c.MaxLine, why: "max_line_bytes"}
			if room := env.Memory - c.ReservedBytes(env.Memory); env.Memory > 0 && room < int64(j.max) {
				// A sample from a longer line could never be held: refuse
				// the line as it is read, not once it is decoded (a 60 MiB
				// line took a 16 MiB run to 218 MB).
				j.max, j.why = int(max(room, 1)), "what the memory budget leaves samples"
			}
			return j, nil
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
	checkCycle(cc, c.CycleLength)
	if c.MaxLine < 1 {
		cc.Errorf("max_line_bytes", "must be positive")
	}
	return sample.Schema{Open: true}
}

// jsonlBuffer is the read buffer of each open file, and the most of a
// line's bytes a stream keeps between lines.
const jsonlBuffer = 64 << 10

// ReservedBytes implements plan.Reserver: each file the interleave holds
// open has a read buffer and keeps its line's bytes, which are no samples.
func (c *JSONLConfig) ReservedBytes(int64) int64 {
	return int64(c.CycleLength.Resolve(DefaultCycleLength)) * (2*jsonlBuffer + 2<<10)
}

// ReservedFor implements plan.Reserver.
func (c *JSONLConfig) ReservedFor() string { return openFiles(c.CycleLength) }

type jsonlStage struct {
	cfg   *JSONLConfig
	cycle int
	// max is the longest line read, and why names what sets it.
	max int
	why string
}

func (j *jsonlStage) Interleave() (int, int) { return j.cycle, j.cfg.BlockLength }

func (j *jsonlStage) Open(_ context.Context, in *sample.Sample) (Stream, error) {
	path, err := pathOf(in, j.cfg.Field)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &jsonlStream{f: f, r: bufio.NewReaderSize(fileguard.Reader(f), jsonlBuffer), max: j.max, why: j.why, path: path, epoch: in.Epoch}, nil
}

type jsonlStream struct {
	f     *os.File
	r     *bufio.Reader
	buf   []byte
	max   int
	why   string
	path  string
	line  int
	epoch int
}

// readLine reads the next line whole, without its newline; a line longer
// than max bytes is read past without being kept and reported as too long,
// so the lines after it are still read.
func (s *jsonlStream) readLine() ([]byte, error) {
	if s.line == 0 { // a UTF-8 byte order mark is no part of the first line
		if b, _ := s.r.Peek(3); bytes.Equal(b, []byte("\xef\xbb\xbf")) {
			s.r.Discard(3)
		}
	}
	s.buf = s.buf[:0]
	long := false
	for {
		part, err := s.r.ReadSlice('\n')
		if !long {
			if len(s.buf)+len(part) > s.max+1 { // +1: the newline
				long, s.buf = true, s.buf[:0]
			} else {
				s.buf = append(s.buf, part...)
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && (len(s.buf) > 0 || long):
			err = nil // a last line without a newline
		case err != nil:
			return nil, err
		}
		line := bytes.TrimSuffix(s.buf, []byte("\n"))
		if long || len(line) > s.max {
			return nil, errLineTooLong
		}
		return line, nil
	}
}

var errLineTooLong = errors.New("line too long")

func (s *jsonlStream) Next() (*sample.Sample, error) {
	// A long line's bytes are not kept once its sample is made: each
	// open file would hold its longest line, up to max_line_bytes,
	// outside the budget while the interleave reads the others.
	defer func() {
		if cap(s.buf) > jsonlBuffer {
			s.buf = nil
		}
	}()
	for {
		line, err := s.readLine()
		if err == io.EOF {
			return nil, io.EOF
		}
		s.line++
		origin := fmt.Sprintf("%s:%d", s.path, s.line)
		if err == errLineTooLong {
			return nil, &ItemError{Err: fmt.Errorf("%s: the line is longer than %s (%d bytes)", origin, s.why, s.max)}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", origin, err)
		}
		b := bytes.TrimSpace(line)
		if len(b) == 0 {
			continue
		}
		fields, err := ParseJSONLine(b)
		if err != nil {
			return nil, &ItemError{Err: fmt.Errorf("%s: %w", origin, err)}
		}
		return &sample.Sample{Epoch: s.epoch, Origin: origin, Fields: fields}, nil
	}
}

func (s *jsonlStream) Close() error { return s.f.Close() }

// ParseJSONLine decodes one JSON object into sample fields: integral
// numbers become int64, other numbers float64, arrays lists. Nested
// objects are refused, since fields are flat.
func ParseJSONLine(b []byte) (map[string]any, error) {
	// JSON text is UTF-8 (RFC 8259); encoding/json would read each invalid
	// byte of a string as U+FFFD, changing the data without a word.
	if i := invalidUTF8(b); i >= 0 {
		return nil, fmt.Errorf("line is not valid UTF-8 (byte %d is 0x%02x); JSON text must be UTF-8", i, b[i])
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		kind := map[bool]string{true: "null"}[v == nil]
		switch v.(type) {
		case []any:
			kind = "an array"
		case string:
			kind = "a string"
		case json.Number:
			kind = "a number"
		case bool:
			kind = "a boolean"
		}
		return nil, fmt.Errorf("line is %s, not a JSON object", kind)
	}
	// dec.More is false before a stray ']' or '}' too, so the rest of
	// the line is checked byte by byte.
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, fmt.Errorf("trailing data after the JSON object")
	}
	if at, esc := loneSurrogate(b); at >= 0 {
		return nil, fmt.Errorf("a string holds %s at byte %d, half of a UTF-16 surrogate pair, which UTF-8 text cannot hold; write the character itself or its pair", esc, at)
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

// loneSurrogate finds a \uD800–\uDFFF escape that is not half of a high
// then low pair, which encoding/json would read as U+FFFD, changing the
// data without a word; it returns its byte offset and text, or -1. b must
// have decoded as JSON, so every backslash is inside a string and begins a
// well-formed escape.
func loneSurrogate(b []byte) (int, string) {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // a two-byte escape such as \\ or \"
			continue
		}
		switch {
		case r >= 0xd800 && r < 0xdc00:
			if lo, ok := hex4(i + 6); ok && lo >= 0xdc00 && lo < 0xe000 {
				i += 11
				continue
			}
			return i, string(b[i : i+6])
		case r >= 0xdc00 && r < 0xe000:
			return i, string(b[i : i+6])
		}
		i += 5
	}
	return -1, ""
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
			return nil, fmt.Errorf("number %s is out of the range of a float64 (about ±1.8e308); write it as a string", x)
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
