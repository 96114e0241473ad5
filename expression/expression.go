// Package expression compiles the per-sample expressions of map, filter and
// other stages with expr-lang/expr, and holds the function registry they
// call.
//
// An expression is compiled once, at validate time, against the schema of
// the fields that reach its stage; the resulting Program is shared by every
// worker. Besides expr's own type checker, Compile infers the piperun type
// of the result (a tensor's dtype and shape included) by asking each
// registered function what it returns for its argument types, so that
// validate knows e.g. that `decode_image(x, 3) | resize(224, 224)` is a
// uint8[224 224 3] tensor.
package expression

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/checker"
	"github.com/expr-lang/expr/compiler"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/optimizer"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/piperun/piperun/imageops"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// CtxVar is the hidden variable through which random functions receive the
// identity of the sample they run on. Run sets it; specs cannot name it.
const CtxVar = "__piperun"

// RunCtx identifies one evaluation, so that random functions draw from a
// generator seeded by (seed, epoch, sample id, stage, call site).
type RunCtx struct {
	Seed  uint64
	Epoch int
	ID    int64
	Stage uint64
}

// StageHash turns a stage name into the stage component of RunCtx.
func StageHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

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

var defaultRegistry = NewRegistry()

// Default returns the registry with every built-in function.
func Default() *Registry { return defaultRegistry }

// Program is a compiled expression.
type Program struct {
	Source string
	// Type is the inferred type of the result.
	Type    sample.Type
	program *vm.Program
	// fields are the names of the fields the expression reads.
	fields []string
	// files are the fields it reads as paths of files: read_file(path).
	files []string
	// literals are the paths it reads written as text: read_file("x").
	literals []string
}

// LiteralFiles lists the paths of the files the expression reads that are
// written in it as text (read_file("classes.txt")), as it resolved them,
// so that a cache below can tell when one of them changes.
func (p *Program) LiteralFiles() []string { return p.literals }

// FilesRead lists the fields whose values the expression reads as the
// paths of files (read_file(path), with path a field), so that a stage can
// have those files read ahead (PrefetchFile).
func (p *Program) FilesRead() []string { return p.files }

// Disassemble lists the compiled program's instructions, showing which
// calls were fused (e.g. __decode_resize_float for a decode, resize and
// to_float chain).
func (p *Program) Disassemble() string { return p.program.Disassemble() }

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

// zeroValue returns a value whose Go type represents t to expr's checker.
func zeroValue(t sample.Type) any {
	switch t.Kind {
	case sample.Int:
		return int64(0)
	case sample.Float:
		return float64(0)
	case sample.Bool:
		return false
	case sample.String:
		return ""
	case sample.Bytes:
		return []byte(nil)
	case sample.Tensor:
		return (*tensor.Tensor)(nil)
	case sample.List:
		switch t.Elem {
		case sample.Int:
			return []int64(nil)
		case sample.Bytes:
			return [][]byte(nil)
		case sample.String:
			return []string(nil)
		}
		return []any(nil)
	}
	return nil
}

// Compile compiles src against the fields of in. want, when not Any,
// is the kind the result must have (Bool for filters).
func (r *Registry) Compile(src string, in sample.Schema, want sample.Kind) (*Program, error) {
	return r.compile(src, in, want, nil)
}

// CompileDeferred compiles src as Compile does, unless src ends in
// to_float(x), or normalize(to_float(x), mean, std) with constant mean and
// std, where x is a uint8 tensor: it then returns the program for x alone,
// its type carrying the conversion left to do (Type.Deferred). Whoever runs
// that program must convert the value before anything reads it, as batch
// does while stacking (spec.DeferrableField says where that holds).
func (r *Registry) CompileDeferred(src string, in sample.Schema) (*Program, error) {
	p, err := r.Compile(src, in, sample.Any)
	if err != nil || p.Type.Kind != sample.Tensor || p.Type.DType != tensor.Float32 {
		return p, err
	}
	var mean, std []float32
	strip := func(tree *parser.Tree) bool {
		n := tree.Node
		if c, ok := callOf(n, "normalize", 3); ok {
			m, ok1 := constOf(c.Arguments[1])
			s, ok2 := constOf(c.Arguments[2])
			if !ok1 || !ok2 {
				return false
			}
			if mean, ok1 = floatList(m); !ok1 {
				return false
			}
			if std, ok2 = floatList(s); !ok2 {
				return false
			}
			n = c.Arguments[0]
		}
		c, ok := callOf(n, "to_float", 1)
		if ok {
			tree.Node = c.Arguments[0]
		}
		return ok
	}
	q, err := r.compile(src, in, sample.Any, strip)
	if err != nil || q == nil || q.Type.Kind != sample.Tensor || q.Type.DType != tensor.Uint8 {
		return p, nil
	}
	channels := 0
	if n := len(q.Type.Shape); n > 0 && q.Type.Shape[n-1] > 0 {
		channels = q.Type.Shape[n-1]
	}
	lut, err := imageops.FloatTable(mean, std, channels)
	if err != nil {
		return p, nil // normalize over channels known only at run time: convert here
	}
	q.Type.Deferred = lut
	return q, nil
}

// callOf returns n as a call of the named function with n arguments.
func callOf(n ast.Node, name string, args int) (*ast.CallNode, bool) {
	c, ok := n.(*ast.CallNode)
	if !ok || len(c.Arguments) != args {
		return nil, false
	}
	id, ok := c.Callee.(*ast.IdentifierNode)
	return c, ok && id.Value == name
}

// Uses reports whether the expression src may read the field name: it
// names it, reads $env["name"] or $env.name, or reads $env other than by a
// constant key. An expression that does not parse may read anything.
func Uses(src, name string) bool {
	tree, err := parser.Parse(src)
	if err != nil {
		return true
	}
	u := &uses{name: name, keyed: map[*ast.IdentifierNode]bool{}}
	ast.Walk(&tree.Node, u)
	if u.found {
		return true
	}
	for _, e := range u.envs {
		if !u.keyed[e] {
			return true
		}
	}
	return false
}

type uses struct {
	name  string
	found bool
	// envs are the $env identifiers; keyed those read by a constant key.
	envs  []*ast.IdentifierNode
	keyed map[*ast.IdentifierNode]bool
}

func (u *uses) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		if n.Value == u.name {
			u.found = true
		}
		if n.Value == "$env" {
			u.envs = append(u.envs, n)
		}
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "$env" {
			if key, ok := n.Property.(*ast.StringNode); ok {
				u.keyed[id] = true
				if key.Value == u.name {
					u.found = true
				}
			}
		}
	}
}

// compile compiles src; strip, when not nil, rewrites the parsed tree
// before it is checked and returns false to abandon the compile (nil, nil).
func (r *Registry) compile(src string, in sample.Schema, want sample.Kind, strip func(*parser.Tree) bool) (*Program, error) {
	// The checker sees types, not values: a field whose type only the run
	// knows (a map's `c ? 1 : 2.5`, a field an error left untyped) is
	// any, which every operator takes, where a nil value would be null,
	// which `y > 1` refuses.
	env := types.Map{CtxVar: types.TypeOf((*RunCtx)(nil))}
	for _, f := range in.Fields {
		if v := zeroValue(f.Type); v != nil {
			env[f.Name] = types.TypeOf(v)
		} else {
			env[f.Name] = types.Any
		}
	}
	cfg := conf.CreateNew()
	cfg.WithEnv(env)
	cfg.Strict = !in.Open
	names := make([]string, 0, len(r.funcs))
	for n := range r.funcs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := r.funcs[n]
		impl := r.named(n, f.Impl)
		var fn func(args ...any) (any, error)
		if f.Random {
			fn = func(args ...any) (any, error) {
				k := len(args) - 2
				rc, _ := args[k].(*RunCtx)
				site, _ := args[k+1].(int)
				return impl(&Call{Rand: seeded(rc, site)}, args[:k])
			}
		} else {
			fn = func(args ...any) (any, error) { return impl(nil, args) }
		}
		bf := &builtin.Function{Name: n, Func: fn}
		if ret := f.Returns; ret != nil {
			// Validate types the result without expr checking the
			// arguments: Check does that, with piperun's messages.
			bf.Validate = func([]reflect.Type) (reflect.Type, error) { return ret, nil }
		}
		cfg.Functions[n] = bf
	}
	p := &patcher{reg: r, parts: map[ast.Node]map[string]file.Location{}}
	cfg.Visitors = append(cfg.Visitors, p)
	cfg.Check()

	tree, err := parser.ParseWithConfig(src, cfg)
	if err == nil {
		// With an open schema expr takes an unknown name for a field it
		// cannot see, even one that is called: find those calls here, or
		// `resiz(x)` below a stage with an error would pass validate.
		u := &unknownCalls{known: cfg.Functions, clock: -1}
		ast.Walk(&tree.Node, u)
		if u.name != "" {
			line, col := position(src, u.at)
			return nil, &Error{Line: line, Column: col, Msg: fmt.Sprintf("unknown function %s (functions: %s)", u.name, strings.Join(r.Names(), ", "))}
		}
		if u.clock >= 0 {
			line, col := position(src, u.clock)
			return nil, &Error{Line: line, Column: col, Msg: "now() reads the clock, so the samples would differ from run to run; piperun's runs are reproducible (draw with the random functions, or store a date(…) of a fixed time)"}
		}
		if at := reservedAt(tree.Node); at >= 0 {
			line, col := position(src, at)
			return nil, &Error{Line: line, Column: col, Msg: fmt.Sprintf("%s is piperun's own name (random functions read the sample's identity through it); no field may be called so", CtxVar)}
		}
	}
	lits := &literalPaths{dir: r.dir}
	if err == nil {
		ast.Walk(&tree.Node, lits)
	}
	if err == nil && strip != nil && !strip(tree) {
		return nil, nil
	}
	if err == nil {
		_, err = new(checker.Checker).PatchAndCheck(tree, cfg)
	}
	if err == nil {
		// The patch passes check the tree and drop what they find; a call
		// they typed (through Returns) then keeps its type and is not
		// visited again, so an unknown name among its arguments
		// (read_file(nope)) would pass. One more check, with the calls'
		// types cleared, visits every argument.
		ast.Walk(&tree.Node, untypeCalls{})
		_, err = checker.Check(tree, cfg)
	}
	if err != nil {
		return nil, r.explain(toError(err), src, in)
	}
	inf := &inferrer{reg: r, schema: in, src: src, parts: p.parts}
	t := inf.infer(tree.Node)
	// What is stored is the value, or the elements of a list written out;
	// lists inside (len([date(a)]), x in [1, 2]) are never stored.
	if why := unstorable(tree.Node.Type()); inf.err == nil && why != "" {
		inf.fail(tree.Node, "%s", why)
	}

	if arr, ok := tree.Node.(*ast.ArrayNode); ok && inf.err == nil {
		for _, a := range arr.Nodes {
			if isMap(a.Type()) {
				inf.fail(a, "a map ({…}) cannot be a sample's value, nor in a list of one; set its entries as fields of their own")
				break
			}
			if why := unstorable(a.Type()); why != "" {
				inf.fail(a, "%s, nor in a list", why)
				break
			}
		}
	}
	if inf.err != nil {
		return nil, inf.err
	}
	if want != sample.Any && t.Kind != want && t.Kind != sample.Any {
		return nil, &Error{Msg: fmt.Sprintf("expression must give %s, but gives %s", want, t)}
	}
	if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
		return nil, toError(err)
	}
	fr := &fieldsRead{skip: map[string]bool{CtxVar: true, "$env": true}}
	for n := range cfg.Functions {
		fr.skip[n] = true
	}
	ast.Walk(&tree.Node, fr)
	files := &filesRead{}
	ast.Walk(&tree.Node, files)
	// A name bound by let is no field (fieldsRead drops those).
	files.names = slices.DeleteFunc(files.names, func(n string) bool { return !slices.Contains(fr.names, n) })
	prog, err := compiler.Compile(tree, cfg)
	if err != nil {
		return nil, toError(err)
	}
	return &Program{Source: src, Type: t, program: prog, fields: fr.names, files: files.names, literals: lits.paths}, nil
}

// literalPaths collects the paths written as text in read_file calls,
// making the relative ones absolute, joined to dir, where dir is set.
type literalPaths struct {
	dir   string
	paths []string
}

func (l *literalPaths) Visit(node *ast.Node) {
	c, ok := callOf(*node, "read_file", 1)
	if !ok {
		return
	}
	p, ok := c.Arguments[0].(*ast.StringNode)
	if !ok || p.Value == "" {
		return
	}
	if l.dir != "" && !filepath.IsAbs(p.Value) {
		p.Value = filepath.Join(l.dir, p.Value)
	}
	if !slices.Contains(l.paths, p.Value) {
		l.paths = append(l.paths, p.Value)
	}
}

// filesRead collects the names passed straight to read_file (or the pooled
// read that a decoder's argument becomes).
type filesRead struct{ names []string }

func (f *filesRead) Visit(node *ast.Node) {
	c, ok := (*node).(*ast.CallNode)
	if !ok || len(c.Arguments) == 0 {
		return
	}
	id, ok := c.Callee.(*ast.IdentifierNode)
	if !ok || id.Value != "read_file" && id.Value != "__read_file_pooled" {
		return
	}
	if a, ok := c.Arguments[0].(*ast.IdentifierNode); ok && !slices.Contains(f.names, a.Value) {
		f.names = append(f.names, a.Value)
	}
}

// fieldsRead collects the names of the sample's fields an expression
// reads: its variables, less functions and names bound by let, and
// $env["key"] with a constant key.
type fieldsRead struct {
	skip  map[string]bool
	names []string
}

func (f *fieldsRead) Visit(node *ast.Node) {
	add := func(name string) {
		if !f.skip[name] && !slices.Contains(f.names, name) {
			f.names = append(f.names, name)
		}
	}
	switch n := (*node).(type) {
	case *ast.VariableDeclaratorNode:
		f.skip[n.Name] = true
		f.names = slices.DeleteFunc(f.names, func(s string) bool { return s == n.Name })
	case *ast.IdentifierNode:
		add(n.Value)
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "$env" {
			if key, ok := n.Property.(*ast.StringNode); ok {
				add(key.Value)
			}
		}
	}
}

// unknownCalls finds the first call of a name that is neither one of the
// registry's functions nor one of expr's builtins.
type unknownCalls struct {
	known map[string]*builtin.Function
	name  string
	at    int
	// clock is where the source first calls now(), or -1.
	clock int
}

func (u *unknownCalls) Visit(node *ast.Node) {
	var name string
	switch c := (*node).(type) {
	case *ast.CallNode:
		if id, ok := c.Callee.(*ast.IdentifierNode); ok {
			name = id.Value
		}
	case *ast.BuiltinNode:
		name = c.Name
	}
	switch {
	case name == "now" && u.known[name] == nil && u.clock < 0:
		u.clock = (*node).Location().From
	case name == "" || u.name != "" || u.known[name] != nil || builtinNames[name]:
	default:
		u.name, u.at = name, (*node).Location().From
	}
}

// reservedAt is where the source names CtxVar, or -1: a spec that reads
// it sees piperun's run context, and a field of that name is dropped.
func reservedAt(n ast.Node) int {
	r := &reserved{at: -1}
	ast.Walk(&n, r)
	return r.at
}

type reserved struct{ at int }

func (r *reserved) Visit(node *ast.Node) {
	if id, ok := (*node).(*ast.IdentifierNode); ok && id.Value == CtxVar && r.at < 0 {
		r.at = id.Location().From
	}
	if m, ok := (*node).(*ast.MemberNode); ok && r.at < 0 {
		if id, ok := m.Node.(*ast.IdentifierNode); ok && id.Value == "$env" {
			if s, ok := m.Property.(*ast.StringNode); ok && s.Value == CtxVar {
				r.at = m.Location().From
			}
		}
	}
}

// builtinNames are the functions expr itself provides (len, abs, upper, …).
var builtinNames = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range builtin.Builtins {
		m[f.Name] = true
	}
	return m
}()

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
		return e
	}
	name := strings.TrimPrefix(e.Msg, "unknown name ")
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
			e.Msg = fmt.Sprintf("unknown function %s (functions: %s)", name, strings.Join(r.Names(), ", "))
			return e
		}
	}
	names := in.Names()
	if len(names) == 0 {
		e.Msg = fmt.Sprintf("unknown field %q: no fields reach this stage", name)
	} else {
		e.Msg = fmt.Sprintf("unknown field %q (fields here: %s)", name, strings.Join(names, ", "))
	}
	return e
}

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

// IdentLike reports whether s can be written as a name in an expression:
// a letter or underscore, then letters, digits and underscores.
func IdentLike(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
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

// VM is per-worker evaluation state; it is not safe for concurrent use.
type VM struct{ vm vm.VM }

// Run evaluates the program on env, which holds the sample's fields and,
// for random functions, CtxVar. A nil vm allocates one per call.
func (p *Program) Run(m *VM, env map[string]any) (v any, err error) {
	if m == nil {
		v, err = vm.Run(p.program, env)
	} else {
		v, err = m.vm.Run(p.program, env)
	}
	if err != nil {
		err = plainError{err: err, call: calledAt(p.Source, err)}
		// A field missing from this sample (a jsonl line without the key)
		// reads as null, and expr's message is about null: say what is
		// missing.
		var missing []string
		for _, f := range p.fields {
			if _, ok := env[f]; !ok {
				missing = append(missing, strconv.Quote(f))
			}
		}
		if len(missing) > 0 {
			what := "field %s is"
			if len(missing) > 1 {
				what = "fields %s are"
			}
			err = fmt.Errorf(what+" missing from this sample: %w", strings.Join(missing, ", "), err)
		}
	}
	return v, err
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

// runInt is an expr integer (a Go int: a literal) as an operand in the
// VM's messages ("string + int"); not int(x), the function.
var runInt = regexp.MustCompile(`(invalid operation: (?:\S+ \S+ )?)int\b([^(]|$)`)

// conversion is the VM's message for a builtin given the wrong type
// (upper(x) on an int64): Go's own interface-conversion panic text.
var conversion = regexp.MustCompile(`interface conversion: any is (\S+), not (\S+)`)

func (e plainError) Unwrap() error { return e.err }

// seeded derives the generator of one call site from the run context.
func seeded(rc *RunCtx, site int) *rand.Rand {
	var s RunCtx
	if rc != nil {
		s = *rc
	}
	a := mix(s.Seed ^ mix(uint64(s.Epoch)+0x9e3779b97f4a7c15))
	a = mix(a ^ uint64(s.ID))
	b := mix(s.Stage ^ mix(uint64(site)+0x632be59bd9b4e019))
	return rand.New(rand.NewPCG(a, b))
}

// mix is SplitMix64's finalizer: a cheap bijection that spreads bits.
func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// patcher rewrites the checked tree: fuses call chains, routes tensor
// indexing and len to tensor-aware functions, and appends the run context
// and a call-site number to every random call.
type patcher struct {
	reg   *Registry
	sites int
	// parts holds, for each fused call, where the user wrote each call
	// of its chain, by name, for the inferrer's errors (partError).
	parts map[ast.Node]map[string]file.Location
}

var (
	tensorPtr = reflect.TypeOf((*tensor.Tensor)(nil))
	bytesType = reflect.TypeOf([]byte(nil))
)

// arityFits reports whether n arguments suit function name (true for a
// name the registry does not know: the check reports it).
func (p *patcher) arityFits(name string, n int) bool {
	f, ok := p.reg.funcs[name]
	return !ok || n >= f.MinArgs && (f.MaxArgs < 0 || n <= f.MaxArgs)
}

func (p *patcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok {
			return
		}
		for _, fu := range p.reg.fusions {
			if id.Value != fu.Outer || len(n.Arguments) == 0 {
				continue
			}
			inner, ok := n.Arguments[0].(*ast.CallNode)
			if !ok {
				continue
			}
			iid, ok := inner.Callee.(*ast.IdentifierNode)
			if !ok || iid.Value != fu.Inner {
				continue
			}
			if f, ok := p.reg.funcs[fu.Inner]; ok && f.Random {
				continue // already patched: fusing would misplace its context
			}
			if !p.arityFits(fu.Outer, len(n.Arguments)) || !p.arityFits(fu.Inner, len(inner.Arguments)) ||
				fu.InnerArgs != 0 && len(inner.Arguments) != fu.InnerArgs {
				// Left as written, so that the check names the call the
				// user wrote and its count, not the fused one's.
				continue
			}
			parts := map[string]file.Location{fu.Outer: n.Location()}
			if ip, ok := p.parts[inner]; ok {
				maps.Copy(parts, ip)
			} else {
				parts[fu.Inner] = inner.Location()
			}
			p.parts[n] = parts
			args := append(append([]ast.Node{}, inner.Arguments...), n.Arguments[1:]...)
			id.Value = fu.Into
			n.Arguments = args
			// A run-time error of the fused call is nearly always the
			// inner one's (a decode of damaged bytes), so its caret goes
			// where the user wrote that call; the message names the part
			// that failed either way.
			n.SetLocation(inner.Location())
			break
		}
		if decoders[id.Value] && len(n.Arguments) > 0 {
			if in, ok := n.Arguments[0].(*ast.CallNode); ok {
				if iid, ok := in.Callee.(*ast.IdentifierNode); ok && iid.Value == "read_file" {
					iid.Value = "__read_file_pooled"
				}
			}
		}
		f, ok := p.reg.funcs[id.Value]
		if !ok || !f.Random {
			return
		}
		if len(n.Arguments) > 0 {
			if last, ok := n.Arguments[len(n.Arguments)-1].(*ast.IdentifierNode); ok && last.Value == CtxVar {
				return
			}
			if len(n.Arguments) > 1 {
				if prev, ok := n.Arguments[len(n.Arguments)-2].(*ast.IdentifierNode); ok && prev.Value == CtxVar {
					return
				}
			}
		}
		p.sites++
		n.Arguments = append(n.Arguments, &ast.IdentifierNode{Value: CtxVar}, &ast.IntegerNode{Value: p.sites})
	case *ast.MemberNode:
		// x[i][j]: the inner index was patched just before (the walk
		// visits children first) and is typed any, as its result is a
		// tensor or a number depending on the rank; __at takes both, and
		// any other value typed only at run time (cast's result, $env[k]),
		// which may be a tensor too.
		// An index typed only at run time (a jsonl field) may be an int
		// too: __at refuses any other.
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "$env" {
			if _, lit := constOf(n.Property); !lit {
				// $env[k], k known as the sample runs: __envget keeps the
				// run context out of reach (a re-test read it through a
				// jsonl value "__piperun").
				ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__envget"}, Arguments: []ast.Node{n.Node, n.Property}})
			}
			return
		}
		if n.Optional {
			return // x?.[i]: expr's own, which gives nil for a nil x
		}
		_, field := n.Property.(*ast.StringNode) // x.name: the inferrer's to refuse
		tensorLike := n.Node.Type() == tensorPtr || isAt(n.Node)
		if field && isAny(n.Node.Type()) {
			// $env[k].Data: a tensor known only at run time is refused
			// then, as a known one is at validate time.
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__field"}, Arguments: []ast.Node{n.Node, n.Property}})
			return
		}
		if tensorLike && !field || isAny(n.Node.Type()) && (isInt(n.Property.Type()) || isAny(n.Property.Type())) {
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__at"}, Arguments: []ast.Node{n.Node, n.Property}})
		}
	case *ast.BinaryNode:
		_, lnil := n.Left.(*ast.NilNode)
		_, rnil := n.Right.(*ast.NilNode)
		if n.Operator == "+" && !lnil && !rnil && stringish(n.Left.Type()) && stringish(n.Right.Type()) {
			// A + that may join strings, which expr's VM does not count
			// against its limit (registerStrings).
			fn := "__add"
			if !isAny(n.Left.Type()) && !isAny(n.Right.Type()) {
				fn = "__concat"
			}
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: []ast.Node{n.Left, n.Right}})
			return
		}
		// expr's == is false, not an error, for a tensor against anything;
		// where an operand's type is known only at run time, __eq and __ne
		// (registerEquality) compare instead and refuse a tensor.
		fn := operatorFuncs[n.Operator]
		if id, ok := n.Right.(*ast.IdentifierNode); ok && id.Value == "$env" && n.Operator == "in" {
			// "name" in $env: whether the sample has the field, and never
			// the run context's name.
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__envhas"}, Arguments: []ast.Node{n.Right, n.Left}})
			return
		}
		if n.Operator == "in" && (n.Left.Type() == tensorPtr || n.Right.Type() == tensorPtr) {
			// expr's checker refuses these in its own words ("cannot use
			// tensor as type int in array"): __in's Check says why.
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: []ast.Node{n.Left, n.Right}})
			return
		}
		if fn != "" && (isAny(n.Left.Type()) || isAny(n.Right.Type())) {
			if _, ok := p.reg.funcs[fn]; ok {
				ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: []ast.Node{n.Left, n.Right}})
			}
		}
	case *ast.BuiltinNode:
		if n.Name == "replace" {
			// expr's replace, whose result its VM does not count
			// (registerStrings).
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__replace"}, Arguments: n.Arguments})
			return
		}
		// expr's own len fails on a tensor at run time, so len goes to
		// __len both where the argument is a tensor and where its type is
		// known only at run time (say $env[key] with key a field).
		// expr's string prints bytes as Go does ("[104 105]"): __string
		// reads them as text, as Python's bytes.decode.
		if n.Name == "string" && len(n.Arguments) == 1 {
			if t := n.Arguments[0].Type(); t == bytesType || t == tensorPtr || isAny(t) {
				ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__string"}, Arguments: n.Arguments})
				return
			}
		}
		// expr's builtins take a tensor typed only at run time for
		// something else: first(x) gave null, sum(x) failed in reflect's
		// words. Known tensors are refused by the checker.
		if n.Name != "len" && n.Name != "string" && n.Name != "type" && len(n.Arguments) > 0 && isAny(n.Arguments[0].Type()) && !isCallOf(n.Arguments[0], "__notensor") {
			n.Arguments[0] = &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__notensor"}, Arguments: []ast.Node{n.Arguments[0], &ast.StringNode{Value: n.Name}}}
		}
		if n.Name == "len" && len(n.Arguments) == 1 {
			if t := n.Arguments[0].Type(); t == tensorPtr || t == nil || t.Kind() == reflect.Interface {
				ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__len"}, Arguments: n.Arguments})
			}
		}
	}
}

// operatorFuncs are the functions the patcher puts in place of operators;
// operators is the same set by function name.
var (
	operatorFuncs = map[string]string{"==": "__eq", "!=": "__ne", "in": "__in"}
	operators     = map[string]bool{"__eq": true, "__ne": true, "__in": true}
)

// envFuncs take $env itself as their first argument.
var envFuncs = map[string]bool{"__envget": true, "__envhas": true}

// isAny reports whether t is an interface type: a value whose type is
// known only at run time.
func isAny(t reflect.Type) bool { return t == nil || t.Kind() == reflect.Interface }

func isMap(t reflect.Type) bool { return t != nil && t.Kind() == reflect.Map }

// isAt reports whether n is a call of __at, a tensor index.
func isAt(n ast.Node) bool { return isCallOf(n, "__at") }

// isCallOf reports whether n is a call of the function name.
func isCallOf(n ast.Node, name string) bool {
	c, ok := n.(*ast.CallNode)
	if !ok {
		return false
	}
	id, ok := c.Callee.(*ast.IdentifierNode)
	return ok && id.Value == name
}

// untypeCalls clears the types of call nodes, so that the checker visits
// their arguments again.
type untypeCalls struct{}

func (untypeCalls) Visit(node *ast.Node) {
	if c, ok := (*node).(*ast.CallNode); ok {
		c.SetType(nil)
	}
}

// isInt reports whether t is an integer type that can index a tensor.
func isInt(t reflect.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return true
	}
	return false
}

// inferrer computes piperun types over a checked tree.
type inferrer struct {
	reg    *Registry
	schema sample.Schema
	src    string
	err    error
	// lets are the let variables in scope, innermost last.
	lets []sample.Field
	// parts are the patcher's: where each call of a fused chain stands.
	parts map[ast.Node]map[string]file.Location
}

func (in *inferrer) fail(n ast.Node, format string, args ...any) sample.Type {
	return in.failAt(n.Location(), format, args...)
}

func (in *inferrer) failAt(loc file.Location, format string, args ...any) sample.Type {
	if in.err == nil {
		e := &Error{Msg: fmt.Sprintf(format, args...)}
		if loc.From >= 0 {
			e.Line, e.Column = position(in.src, loc.From)
		}
		in.err = e
	}
	return sample.TAny
}

func constOf(n ast.Node) (any, bool) {
	switch x := n.(type) {
	case *ast.IntegerNode:
		return x.Value, true
	case *ast.FloatNode:
		return x.Value, true
	case *ast.StringNode:
		return x.Value, true
	case *ast.BoolNode:
		return x.Value, true
	case *ast.UnaryNode:
		if x.Operator == "-" {
			switch v := x.Node.(type) {
			case *ast.IntegerNode:
				return -v.Value, true
			case *ast.FloatNode:
				return -v.Value, true
			}
		}
	case *ast.ArrayNode:
		out := make([]any, len(x.Nodes))
		for i, e := range x.Nodes {
			c, ok := constOf(e)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	case *ast.ConstantNode:
		return x.Value, true
	}
	return nil, false
}

func (in *inferrer) infer(n ast.Node) sample.Type {
	switch x := n.(type) {
	case *ast.IdentifierNode:
		if x.Value == "$env" {
			// Every field at once, with the run context among them:
			// keys($env) listed it, in an order that changed from run to
			// run.
			return in.fail(n, `$env is only for $env["name"] and "name" in $env`)
		}
		for i := len(in.lets) - 1; i >= 0; i-- {
			if in.lets[i].Name == x.Value {
				return in.lets[i].Type
			}
		}
		if t, ok := in.schema.Lookup(x.Value); ok {
			return t
		}
	case *ast.VariableDeclaratorNode:
		// let img = decode_image(b, 3); resize(img, …): the calls on
		// either side are checked, and img has the decode's type.
		t := in.infer(x.Value)
		in.lets = append(in.lets, sample.Field{Name: x.Name, Type: t})
		t = in.infer(x.Expr)
		in.lets = in.lets[:len(in.lets)-1]
		return t
	case *ast.SequenceNode:
		var t sample.Type
		for _, e := range x.Nodes {
			t = in.infer(e)
		}
		return t
	case *ast.ChainNode:
		return in.infer(x.Node)
	case *ast.SliceNode:
		for _, e := range []ast.Node{x.Node, x.From, x.To} {
			if e != nil {
				in.infer(e)
			}
		}
	case *ast.PredicateNode:
		in.infer(x.Node)
	case *ast.MapNode:
		for _, e := range x.Pairs {
			in.infer(e)
		}
	case *ast.PairNode:
		in.infer(x.Key)
		in.infer(x.Value)
	case *ast.MemberNode:
		if id, ok := x.Node.(*ast.IdentifierNode); ok && id.Value == "$env" {
			if s, ok := x.Property.(*ast.StringNode); ok {
				if t, ok := in.schema.Lookup(s.Value); ok {
					return t
				}
				return in.fail(n, "unknown field %q (fields here: %s)", s.Value, strings.Join(in.schema.Names(), ", "))
			}
			// $env[k] with k a string field names a field only the run
			// knows; $env[1] failed every sample with reflect's words.
			k := in.infer(x.Property)
			if c, ok := constOf(x.Property); ok {
				k = sample.TypeOf(c) // the checker leaves a literal here untyped
			}
			if k.Kind != sample.String && k.Kind != sample.Any {
				return in.fail(x.Property, "$env[…] takes a field's name, a string; got %s", k)
			}
			return fromReflect(n.Type())
		}
		// A tensor is no struct to expr's checker here: .Data handed out
		// the pooled buffer, .Uint8() failed every sample.
		if p, ok := x.Property.(*ast.StringNode); ok && (x.Node.Type() == tensorPtr || in.infer(x.Node).Kind == sample.Tensor) {
			return in.fail(n, "a tensor has no fields or methods (.%s): use the expression functions (shape, cast, x[i], …)", p.Value)
		}
		in.infer(x.Node)
	case *ast.CallNode:
		id, ok := x.Callee.(*ast.IdentifierNode)
		if !ok {
			in.infer(x.Callee) // x.method(): a tensor's is refused there
			break
		}
		f, ok := in.reg.funcs[id.Value]
		if !ok {
			break
		}
		argNodes := x.Arguments
		if f.Random && len(argNodes) >= 2 {
			argNodes = argNodes[:len(argNodes)-2]
		}
		name := f.Name
		if strings.HasPrefix(name, "__") {
			name = f.Signature // what the user wrote: x[i], len(x)
		}
		if len(argNodes) < f.MinArgs || (f.MaxArgs >= 0 && len(argNodes) > f.MaxArgs) {
			return in.fail(n, "%s: wrong number of arguments: got %d, want %s", f.Signature, len(argNodes), arity(f))
		}
		args := make([]Arg, len(argNodes))
		for i, a := range argNodes {
			if id, ok := a.(*ast.IdentifierNode); ok && id.Value == "$env" && envFuncs[f.Name] {
				args[i].Type = sample.TAny
				continue
			}
			args[i].Type = in.infer(a)
			args[i].Const, args[i].IsConst = constOf(a)
		}
		if in.err != nil {
			return sample.TAny
		}
		if f.Check == nil {
			return sample.TAny
		}
		t, err := f.Check(args)
		var pe *partError
		if errors.As(err, &pe) {
			if loc, ok := in.parts[x][pe.fn]; ok {
				return in.failAt(loc, "%v", err) // at the call of the chain that is wrong
			}
		}
		if err != nil && (operators[f.Name] || f.fused) {
			return in.fail(n, "%v", err) // the error names the operator, or the call in a chain
		}
		// An argument piped in (x | f(…)) is written before the call: the
		// call is then the place to point at.
		var ae *argError
		if errors.As(err, &ae) && ae.Index < len(argNodes) && argNodes[ae.Index].Location().From > n.Location().From {
			return in.failAt(argNodes[ae.Index].Location(), "%s: %v", name, err)
		}
		if err != nil {
			return in.fail(n, "%s: %v", name, err)
		}
		if t.Kind == sample.Tensor {
			// one_hot(0, 4611686018427387904): a size no run can hold,
			// whose bytes would wrap the memory estimates around.
			if err := sizeUnder(DefaultMaxValueBytes, t.DType, t.Shape...); err != nil {
				return in.fail(n, "%s: %v", name, err)
			}
		}
		return t
	case *ast.BinaryNode:
		l, r := in.infer(x.Left), in.infer(x.Right)
		if l.Kind == sample.Tensor || r.Kind == sample.Tensor {
			if operatorFuncs[x.Operator] != "" {
				return in.fail(n, "%v", tensorCompared(x.Operator, l.String(), r.String()))
			}
			return in.fail(n, "operator %s is not defined on tensors (got %s and %s); use tensor functions", x.Operator, l, r)
		}
		if l.Kind == sample.Bytes || r.Kind == sample.Bytes {
			if x.Operator != "==" && x.Operator != "!=" {
				return in.fail(n, "operator %s is not defined on bytes", x.Operator)
			}
		}
	case *ast.UnaryNode:
		in.infer(x.Node)
	case *ast.ConditionalNode:
		in.infer(x.Cond)
		a, b := in.infer(x.Exp1), in.infer(x.Exp2)
		if a.Kind == b.Kind && a.Kind == sample.Tensor && a.DType == b.DType {
			return sample.TensorOf(a.DType, mergeShapes(a.Shape, b.Shape)...)
		}
		// c ? nil : index is null or an int: expr types it int, so
		// y + 1 below passed validate and failed on the first null.
		if _, ok := x.Exp1.(*ast.NilNode); ok {
			return sample.TAny
		}
		if _, ok := x.Exp2.(*ast.NilNode); ok {
			return sample.TAny
		}
	case *ast.BuiltinNode:
		for _, a := range x.Arguments {
			in.infer(a)
		}
		// map(x, float(#)) is a list of what the predicate gives, so
		// that a sink knows the list it will write (the advice of
		// write_tfrecord's warning of a key of two kinds).
		if len(x.Arguments) != 2 || x.Name != "map" {
			break
		}
		if p, ok := x.Arguments[1].(*ast.PredicateNode); ok {
			switch k := fromReflect(p.Node.Type()).Kind; k {
			case sample.Int, sample.Float, sample.Bool, sample.String:
				return sample.ListOf(k)
			}
		}
	case *ast.ArrayNode:
		// A list literal of one kind of scalar is typed so ([1, 2] is a
		// list<int64>), so that a sink can tell it will write it; ints and
		// floats together are numbers, a list<float64>.
		var elem sample.Kind
		for i, a := range x.Nodes {
			k := in.infer(a).Kind
			switch {
			case i == 0 || k == elem:
				elem = k
			case k == sample.Float && elem == sample.Int, k == sample.Int && elem == sample.Float:
				elem = sample.Float
			default:
				elem = sample.Any
			}
		}
		switch elem {
		case sample.Int, sample.Float, sample.Bool, sample.String, sample.Bytes:
			return sample.ListOf(elem)
		}
	}
	return fromReflect(n.Type())
}

func mergeShapes(a, b []int) []int {
	if len(a) != len(b) {
		return nil
	}
	out := make([]int, len(a))
	for i := range a {
		out[i] = a[i]
		if a[i] != b[i] {
			out[i] = -1
		}
	}
	return out
}

func arity(f *Func) string {
	switch {
	case f.MaxArgs < 0:
		return fmt.Sprintf("at least %d", f.MinArgs)
	case f.MinArgs == f.MaxArgs:
		return fmt.Sprint(f.MinArgs)
	}
	return fmt.Sprintf("%d to %d", f.MinArgs, f.MaxArgs)
}

// fromReflect maps expr's Go types to piperun types.
func fromReflect(t reflect.Type) sample.Type {
	if t == nil {
		return sample.TAny
	}
	if t == tensorPtr {
		return sample.Type{Kind: sample.Tensor}
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return sample.TInt
	case reflect.Float32, reflect.Float64:
		return sample.TFloat
	case reflect.Bool:
		return sample.TBool
	case reflect.String:
		return sample.TString
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.Uint8:
			return sample.TBytes
		case reflect.String:
			return sample.ListOf(sample.String)
		case reflect.Int64:
			return sample.ListOf(sample.Int)
		case reflect.Slice:
			if t.Elem().Elem().Kind() == reflect.Uint8 {
				return sample.ListOf(sample.Bytes)
			}
		}
		return sample.ListOf(sample.Any)
	}
	return sample.TAny
}
