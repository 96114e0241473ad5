package expression

// This file holds the function registry expressions call, and fusions.

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/piperun/piperun/internal/didyoumean"
	"github.com/piperun/piperun/sample"
)

// Arg is one argument of a call as the type checker sees it.
type Arg struct {
	Type sample.Type
	// Const holds the argument's value when it is a literal (int, float64,
	// string, bool or []any of those); IsConst says whether it is.
	Const   any
	IsConst bool
}

// Call is passed to a function implementation.
type Call struct {
	// Rand is a generator unique to (seed, epoch, sample, stage, call site);
	// it is set only for functions marked Random.
	Rand *rand.Rand
}

// Func is a function callable from expressions.
type Func struct {
	Name string
	// Signature documents the arguments, e.g. "resize(img, h, w[, method])".
	Signature string
	Doc       string
	MinArgs   int
	MaxArgs   int // -1 for no limit
	Random    bool
	// Check returns the result type for the given arguments, or an error
	// that names the bad argument.
	Check func(args []Arg) (sample.Type, error)
	// Impl runs the function.
	Impl func(c *Call, args []any) (any, error)
	// Returns, when not nil, is the Go type of every value Impl returns, as
	// expr's type checker sees it. It types what is built on a call (an
	// index, arithmetic, a comparison): without it expr types the call as
	// any, and shape(x)[0] would reach validate and plan as a field of
	// unknown type and size. Leave it nil where the result's type depends
	// on the arguments (cast).
	Returns reflect.Type
	// fused marks a function that stands for a chain of calls (Fusion).
	fused bool
}

// Registry holds the functions expressions may call.
type Registry struct {
	funcs map[string]*Func
	// fusions rewrite call chains into cheaper single calls (e.g. a decode
	// followed by a crop into a decode of the crop window).
	fusions []Fusion
	// dir, when set, is where a path written as text in read_file("…")
	// resolves (PathsIn).
	dir string
}

// PathsIn returns a registry that compiles as r does, except that a
// relative path written as text in a read_file call resolves against dir,
// the spec's directory, as the paths in a spec's keys do (DESIGN.md: a
// spec runs the same from any working directory). A path computed at run
// time, from the data, still resolves against the working directory, as
// open() and tf.io.read_file do.
func (r *Registry) PathsIn(dir string) *Registry {
	c := *r
	c.dir = dir
	return &c
}

// Fusion rewrites outer(inner(args...), more...) into Into(args..., more...)
// when outer is named Outer and inner is named Inner.
type Fusion struct {
	Outer, Inner, Into string
	// InnerArgs, if not 0, is the only argument count of the inner call
	// that Into takes: an optional argument of the inner function that
	// Into has no place for (decode_image's max_pixels) leaves the chain
	// as written.
	InnerArgs int
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{funcs: map[string]*Func{}} }

// Register adds a function; it panics on a duplicate name, which is a
// programming error.
func (r *Registry) Register(f *Func) {
	if _, dup := r.funcs[f.Name]; dup {
		panic("expression: duplicate function " + f.Name)
	}
	r.funcs[f.Name] = f
}

// AddFusion registers a call-chain rewrite. Inner, Outer and Into must be
// registered; Into's Check is set to check the calls the user wrote, so
// that its errors name them and number their arguments as written. It
// panics on a fusion it cannot check, a programming error.
func (r *Registry) AddFusion(f Fusion) {
	into, inner, outer := r.funcs[f.Into], r.funcs[f.Inner], r.funcs[f.Outer]
	if into == nil || inner == nil || outer == nil || inner.Check == nil || outer.Check == nil ||
		f.InnerArgs == 0 && outer.MaxArgs != 1 {
		panic("expression: fusion " + f.Into + " of functions not registered, unchecked, or with arguments it cannot tell apart")
	}
	into.Check = fusedCheck(inner, outer, f.InnerArgs)
	into.fused = true
	r.fusions = append(r.fusions, f)
}

// fusedCheck checks a fused call as the calls the user wrote: the inner
// call's first n arguments (all of them if n is 0), then the outer call's
// with the inner's result first.
func fusedCheck(inner, outer *Func, n int) func([]Arg) (sample.Type, error) {
	return func(a []Arg) (sample.Type, error) {
		k := n // n is shared by every compile, concurrent ones too
		if k == 0 {
			k = len(a)
		}
		t, err := inner.Check(a[:k])
		if err != nil {
			var pe *partError
			if !errors.As(err, &pe) { // a fused inner call named its part
				err = &partError{fn: inner.Name, err: err}
			}
			return sample.TAny, err
		}
		if t, err = outer.Check(append([]Arg{{Type: t}}, a[k:]...)); err != nil {
			return sample.TAny, &partError{fn: outer.Name, err: err}
		}
		return t, nil
	}
}

// Lookup returns a function by name.
func (r *Registry) Lookup(name string) (*Func, bool) {
	f, ok := r.funcs[name]
	return f, ok
}

// Names lists the registered functions in order.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.funcs))
	for n := range r.funcs {
		if !strings.HasPrefix(n, "__") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// unknownFunction says that name is not a function: the one it was likely
// meant to be, or else the registry's functions and where expr's builtins
// are listed. expr's builtins are matched by case, or a letter more or
// less, or two letters swapped: there are sixty of them, and one letter
// changed from `sqrt` is `sort`.
func (r *Registry) unknownFunction(name string) string {
	if name == "str" { // Python's
		return "unknown function str: write string(x)"
	}
	names := r.Names()
	if best := didyoumean.Closest(name, names); best != "" {
		return fmt.Sprintf("unknown function %s (did you mean %s?)", name, best)
	}
	builtins := slices.Sorted(maps.Keys(builtinNames))
	for _, b := range builtins {
		if strings.EqualFold(b, name) {
			return fmt.Sprintf("unknown function %s (did you mean %s?)", name, b)
		}
	}
	for _, b := range builtins {
		if oneLetterOff(name, b) {
			return fmt.Sprintf("unknown function %s (did you mean %s?)", name, b)
		}
	}
	return fmt.Sprintf("unknown function %s (piperun's functions: %s; expr's builtins, such as len, upper, round and filter, are listed at %s)",
		name, strings.Join(names, ", "), builtinsDoc)
}

// builtinsDoc lists expr's builtins, which a name that is not piperun's
// function may be meant as: the list above read as all there is.
const builtinsDoc = "https://expr-lang.org/docs/language-definition"

// oneLetterOff reports whether a is b with one letter more, one less, or
// two neighbouring letters swapped.
func oneLetterOff(a, b string) bool {
	if len(a) < len(b) {
		a, b = b, a
	}
	switch len(a) - len(b) {
	case 1:
		for i := range len(a) {
			if a[:i]+a[i+1:] == b {
				return true
			}
		}
	case 0:
		for i := 0; i+1 < len(a); i++ {
			if a[i] != b[i] {
				return a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
			}
		}
	}
	return false
}

var defaultRegistry = NewRegistry()

// Default returns the registry with every built-in function.
func Default() *Registry { return defaultRegistry }

func arity(f *Func) string {
	switch {
	case f.MaxArgs < 0:
		return fmt.Sprintf("at least %d", f.MinArgs)
	case f.MinArgs == f.MaxArgs:
		return fmt.Sprint(f.MinArgs)
	}
	return fmt.Sprintf("%d to %d", f.MinArgs, f.MaxArgs)
}
