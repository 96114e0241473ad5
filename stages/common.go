package stages

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"unicode/utf8"

	"github.com/invopop/jsonschema"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// register adds a built-in stage type to Default.
func register(t *Type) {
	builtins = append(builtins, func(r *Registry) { r.Register(t) })
}

// stageRand returns the generator a stage uses for one epoch, derived from
// the pipeline seed, the stage name and the epoch, so that runs with the
// same seed repeat exactly and every epoch draws differently.
func stageRand(seed uint64, stage string, epoch int) *rand.Rand {
	h := expression.StageHash(stage)
	return rand.New(rand.NewPCG(seed^h, uint64(epoch)*0x9e3779b97f4a7c15+h))
}

// compile compiles one expression field of a stage config, reporting a
// failure at the field's position.
func compile(c *spec.CheckContext, field, src string, in sample.Schema, want sample.Kind) *expression.Program {
	if src == "" {
		c.Errorf(field, "empty expression")
		return nil
	}
	p, err := expression.Default().PathsIn(c.Spec.Dir).Compile(src, in, want)
	if err != nil {
		exprError(c, field, err)
		return nil
	}
	checkLiteralFiles(c, field, p)
	return p
}

// checkLiteralFiles says, where validate may look at the machine, which
// file the expression names as text (read_file("classes.txt")) read_file
// would refuse: every sample would fail on it.
func checkLiteralFiles(c *spec.CheckContext, field string, p *expression.Program) {
	if !c.Environment {
		return
	}
	for _, f := range p.LiteralFiles() {
		if err := expression.CheckFile(f); err != nil {
			c.Errorf(field, "%v", err)
		}
	}
}

// exprError reports an expression's compile error at its place in the
// file where the value stands there as written, else at the value's
// start, with the place inside the expression in the message.
func exprError(c *spec.CheckContext, field string, err error) {
	var e *expression.Error
	if errors.As(err, &e) && e.Line > 0 {
		if pos, ok := c.ValuePos(field, e.Line, e.Column); ok {
			c.ErrorAt(pos, field, "%s", e.Msg)
			return
		}
	}
	c.Errorf(field, "%v", err)
}

// compileDeferred is compile for an expression whose trailing to_float (and
// normalize) the next batch may do instead (expression.CompileDeferred).
func compileDeferred(c *spec.CheckContext, field, src string, in sample.Schema) *expression.Program {
	if src == "" {
		return compile(c, field, src, in, sample.Any)
	}
	p, err := expression.Default().PathsIn(c.Spec.Dir).CompileDeferred(src, in)
	if err != nil {
		exprError(c, field, err)
		return nil
	}
	checkLiteralFiles(c, field, p)
	return p
}

// invalidUTF8 returns the index of the first byte of b that is not part of
// valid UTF-8, or -1 when b is valid.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

// exprSchema lets an expression field be written as a bare number or
// boolean (`where: true`, `set: {one: 1}`), as validate reads any scalar
// there as the expression's text.
func exprSchema(s *jsonschema.Schema) {
	s.Type = ""
	s.Extras = map[string]any{"type": []string{"string", "number", "boolean"}}
}

// atLeast is a schema keyword's lower bound.
func atLeast(n uint64) *uint64 { return &n }

// openFiles says what an interleave reserves: the buffers of its open
// files, and what bounds them.
func openFiles(cycle spec.Auto) string {
	n := cycle.Resolve(DefaultCycleLength)
	if n == 1 {
		return "the buffers of the file it reads"
	}
	return fmt.Sprintf("the buffers of the %d files it reads at once; lower cycle_length", n)
}

// pathOf is the path an interleave opens: sample in's string field.
func pathOf(in *sample.Sample, field string) (string, error) {
	path, ok := in.Fields[field].(string)
	if !ok {
		return "", fmt.Errorf("field %q is %s, not a path", field, expression.ValueWord(in.Fields[field]))
	}
	return path, nil
}

// checkCycle refuses a cycle_length past the files a process may hold
// open: each stream of the cycle is an open file and a read-ahead, and
// 9223372036854775807 panicked making the cycle, 1000000000 hung.
func checkCycle(cc *spec.CheckContext, a spec.Auto) {
	if a.N > spec.MaxParallelism {
		cc.Errorf("cycle_length", "must be at most %d, got %d: each is a file open at once", spec.MaxParallelism, a.N)
	}
}
