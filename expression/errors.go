package expression

// This file holds how compile and run errors are worded: positions, the
// user's names for functions and types, expr's messages made plain.

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"

	"github.com/piperun/piperun/sample"
)

// partError is a check error of one call of a fused chain, fn: the
// inferrer places it at that call, where the user wrote it.
type partError struct {
	fn  string
	err error
}

func (e *partError) Error() string { return e.fn + ": " + e.err.Error() }

func (e *partError) Unwrap() error { return e.err }

// argError is a Check error about one argument (Index, from 0): the
// compile error then points at that argument, not at the call (a new-user
// test: every argument error pointed at the start of the expression).
type argError struct {
	Index int
	err   error
}

func (e *argError) Error() string { return e.err.Error() }

func (e *argError) Unwrap() error { return e.err }

// argErrorf is an argError for argument i, its message starting
// "argument i+1".
func argErrorf(i int, format string, args ...any) error {
	return &argError{Index: i, err: fmt.Errorf("argument %d "+format, append([]any{i + 1}, args...)...)}
}

// Error is a compile error with its place inside the expression.
type Error struct {
	Line, Column int // 1-based, within the expression source; 0 if unknown
	Msg          string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d, column %d of the expression)", e.Msg, e.Line, e.Column)
	}
	return e.Msg
}

// position turns an offset in src, in characters as expr's Location
// counts them, into a 1-based line and column, in characters.
func position(src string, from int) (line, col int) {
	line, col = 1, 1
	n := 0
	for _, r := range src {
		if n == from {
			break
		}
		n++
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// explain rewrites expr's "unknown name" into what the user got wrong: a
// field that does not reach this stage, or a function that does not exist.
func (r *Registry) explain(err error, src string, in sample.Schema) error {
	e, ok := err.(*Error)
	if !ok {
		return err
	}
	if !strings.HasPrefix(e.Msg, "unknown name ") {
		e.Msg = plainTypes(e.Msg)
		if m := noMethod.FindStringSubmatch(e.Msg); m != nil && builtinNames[m[1]] {
			e.Msg += ": write " + m[1] + "(x)" // Python's s.lower()
		}
		if e.Msg == "invalid operation: in (mismatched types string and string)" {
			e.Msg += ": to find a substring write contains(s, sub)" // Python's sub in s
		}
		return e
	}
	name := strings.TrimPrefix(e.Msg, "unknown name ")
	if w, ok := pythonWords[name]; ok {
		e.Msg = fmt.Sprintf("unknown name %s: write %s (expressions write true, false and nil where Python writes True, False and None)", name, w)
		return e
	}
	if e.Column > 0 && e.Line == 1 {
		// The column counts characters: find its byte, counting an
		// invalid byte as one, as position does (through []rune it
		// became three, past the end: a fuzzer's "`\xab`%A").
		at, n := len(src), 0
		for b := range src {
			if n == e.Column-1 {
				at = b
				break
			}
			n++
		}
		rest := strings.TrimLeft(src[min(len(src), at+len(name)):], " ")
		if strings.HasPrefix(src[at:], name) && strings.HasPrefix(rest, "(") {
			e.Msg = r.unknownFunction(name)
			return e
		}
	}
	names := in.Names()
	for _, f := range names {
		if strings.HasPrefix(f, name+"/") && strings.Contains(src, f) {
			e.Msg = fmt.Sprintf("unknown field %q: a name with a / is read as $env[%q] (written bare, / divides)", name, f)
			return e
		}
	}
	if len(names) == 0 {
		e.Msg = fmt.Sprintf("unknown field %q: no fields reach this stage", name)
	} else {
		e.Msg = fmt.Sprintf("unknown field %q (fields here: %s)", name, strings.Join(names, ", "))
	}
	return e
}

// pythonWords are Python's constants, and the expression's words for them.
var pythonWords = map[string]string{"True": "true", "False": "false", "None": "nil"}

// noMethod is expr's message for a method a value has not (s.lower()).
var noMethod = regexp.MustCompile(`^type \S+ has no method (\w+)$`)

// userName is the function a spec's author wrote for registered name n:
// the innermost call of a fused chain (decode_image, whose errors are the
// ones a chain can meet that the outer call does not name itself), the
// function a stand-in replaces (read_file for __read_file_pooled), or ""
// for what is written as no call (x[i], ==).
func (r *Registry) userName(n string) string {
	for _, f := range r.fusions {
		if f.Into == n {
			return r.userName(f.Inner)
		}
	}
	if !strings.HasPrefix(n, "__") {
		return n
	}
	sig := r.funcs[n].Signature
	if i := strings.IndexByte(sig, '('); i > 0 && IdentLike(sig[:i]) {
		return sig[:i]
	}
	return ""
}

// named makes impl's errors start with the name of the function the
// spec called, as a checker's do: expr's caret points at the call, but a
// log line shows the message alone. An error that names a function
// already keeps its name (a fused chain's "resize: ..."); one from
// imageops loses the package's name, which no spec mentions
// ("imageops: decode: x" from decode_image reads "decode_image: x").
func (r *Registry) named(n string, impl func(*Call, []any) (any, error)) func(*Call, []any) (any, error) {
	name := r.userName(n)
	if name == "" {
		return impl
	}
	return func(c *Call, a []any) (any, error) {
		v, err := impl(c, a)
		if err == nil {
			return v, nil
		}
		msg := strings.TrimPrefix(err.Error(), "imageops: ")
		if w, rest, ok := strings.Cut(msg, ": "); ok && IdentLike(w) {
			if f, ok := r.funcs[w]; ok && !strings.HasPrefix(f.Name, "__") {
				return v, namedError{msg, err} // names a function already
			}
			if strings.HasPrefix(name, w) {
				msg = rest // imageops' "decode" for decode_image
			}
		}
		return v, namedError{name + ": " + msg, err}
	}
}

// namedError is an error with the message named gives it.
type namedError struct {
	msg string
	err error
}

func (e namedError) Error() string { return e.msg }

func (e namedError) Unwrap() error { return e.err }

// goTypes are the Go type names expr's checker puts in its messages, and
// what a spec's author knows them as.
var goTypes = strings.NewReplacer(
	"*tensor.Tensor", "tensor", "tensor.Tensor", "tensor",
	"map[string]interface {}", "map", "[]interface {}", "list", "interface {}", "any", "<nil>", "null",
	"time.Time", "time", "time.Duration", "duration", "[]uint8", "bytes",
	// Go's panic text for x % 0 and x / 0 on integers.
	"runtime error: integer divide by zero", "integer division or modulo by zero",
)

// typeName names a run-time value's type as a spec does: an expr integer
// literal, a Go int, is an int64 like every integer a sample holds.
func typeName(v any) string {
	switch v.(type) {
	case int, int32, int64:
		return "int64"
	case float32, float64:
		return "float64"
	case []byte:
		return "bytes"
	case nil:
		return "null"
	}
	return goTypes.Replace(fmt.Sprintf("%T", v))
}

// exprInt is expr's own name for an integer where its checker's messages
// name a type; only there: int is also a function, and a field could be
// called so.
var exprInt = regexp.MustCompile(`(mismatched types |\(type |got | and |expected )int\b`)

// mismatched is expr's message for an operator on operands it cannot mix.
var mismatched = regexp.MustCompile(`^invalid operation: (\S+) \(mismatched types (.+) and (.+)\)$`)

// plainTypes rewrites a checker message in the words of a spec: no Go
// type names, and for an operator on a tensor what to use instead.
func plainTypes(msg string) string {
	msg = exprInt.ReplaceAllString(goTypes.Replace(msg), "${1}int64")
	if m := mismatched.FindStringSubmatch(msg); m != nil && (m[2] == "tensor" || m[3] == "tensor") {
		if operatorFuncs[m[1]] != "" {
			return tensorCompared(m[1], m[2], m[3]).Error()
		}
		return fmt.Sprintf("operator %s is not defined on tensors (got %s and %s); use tensor functions (to_float, normalize, cast)", m[1], m[2], m[3])
	}
	return msg
}

// unstorable says why a value of Go type t cannot be a sample's field, or
// returns "" when it can (or t is not known until run time).
func unstorable(t reflect.Type) string {
	switch {
	case t == nil:
		return ""
	case t == reflect.TypeOf(time.Time{}):
		return "a time (date()) cannot be a sample's value; store a number such as date(…).Unix() or a string such as date(…).Format(\"2006-01-02\")"
	case t == reflect.TypeOf(time.Duration(0)):
		return "a duration cannot be a sample's value; store a number such as duration(…).Seconds()"
	case t.Kind() == reflect.Map:
		return "a map ({…}) cannot be a sample's value; set its entries as fields of their own"
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Func, t.Kind() == reflect.Chan:
		return fmt.Sprintf("a %s cannot be a sample's value", goTypes.Replace(t.String()))
	}
	return ""
}

func toError(err error) error {
	var fe *file.Error
	if errors.As(err, &fe) {
		// Some of expr's messages end in a space ("to call upper ").
		msg := strings.TrimSpace(fe.Message)
		if msg == "integer divide by zero" {
			msg = "integer division or modulo by zero" // as at run time
		}
		if msg == `unexpected token Operator("=")` {
			msg += "; compare with == (an expression sets nothing)"
		}
		return &Error{Line: fe.Line, Column: fe.Column + 1, Msg: msg}
	}
	return &Error{Msg: err.Error()}
}

// plainError is a run-time error in the words of a spec: fields whose
// type is known only at run time (a jsonl value) fail in expr's VM, which
// names Go types ("[]interface {} + int").
// call is the function called where the error points, if any: expr's
// builtins panic with Go's conversion text, which names none.
type plainError struct {
	err  error
	call string
}

func (e plainError) Error() string {
	msg := runInt.ReplaceAllString(goTypes.Replace(e.err.Error()), "${1}int64$2")
	// expr's own limit, not the run's budget, which its words seemed to
	// name.
	msg = strings.Replace(msg, "memory budget exceeded", fmt.Sprintf("memory budget exceeded: an evaluation may make at most %d list elements, range numbers or characters of repeat, expr's own limit, which resources.memory does not change", conf.DefaultMemoryBudget), 1)
	return conversion.ReplaceAllStringFunc(msg, func(m string) string {
		g := conversion.FindStringSubmatch(m)
		if g[1] == "nil" {
			g[1] = "null"
		}
		what := "wrong argument type"
		if e.call != "" {
			what = e.call + ": " + what
		}
		return what + ": got " + g[1] + ", want " + g[2]
	})
}

// calledAt returns the name of the function whose call starts where a
// run-time error of src points (upper in `upper(x)`), or "".
func calledAt(src string, err error) string {
	var fe *file.Error
	if !errors.As(err, &fe) || fe.Line < 1 {
		return ""
	}
	lines := strings.Split(src, "\n")
	if fe.Line > len(lines) {
		return ""
	}
	line := []rune(lines[fe.Line-1])
	if fe.Column < 0 || fe.Column >= len(line) {
		return ""
	}
	end := fe.Column
	for end < len(line) && (line[end] == '_' || unicode.IsLetter(line[end]) || unicode.IsDigit(line[end])) {
		end++
	}
	if name := string(line[fe.Column:end]); IdentLike(name) && end < len(line) && line[end] == '(' {
		return name
	}
	return ""
}

func (e plainError) Unwrap() error { return e.err }
