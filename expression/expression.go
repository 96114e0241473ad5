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
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

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
	// skip are the names that are no fields.
	skip := func() map[string]bool {
		m := map[string]bool{CtxVar: true, "$env": true}
		for n := range cfg.Functions {
			m[n] = true
		}
		return m
	}
	p := &patcher{reg: r, parts: map[ast.Node]map[string]file.Location{}}
	cfg.Visitors = append(cfg.Visitors, p)
	cfg.Check()

	if at := lineCommentAt(src); at >= 0 {
		line, col := position(src, at)
		return nil, &Error{Line: line, Column: col, Msg: floorDivision}
	}
	tree, err := parser.ParseWithConfig(src, cfg)
	if err == nil {
		b := &builtinFields{in: in, lets: map[string]ast.Node{}}
		ast.Walk(&tree.Node, letsOf(b.lets))
		ast.Walk(&tree.Node, b)
		if b.unknown != "" {
			line, col := position(src, b.at)
			return nil, &Error{Line: line, Column: col, Msg: fmt.Sprintf("unknown field %q (fields here: %s; %s is also a function, called as %s(…))",
				b.unknown, strings.Join(in.Names(), ", "), b.unknown, b.unknown)}
		}
	}
	if err == nil {
		// With an open schema expr takes an unknown name for a field it
		// cannot see, even one that is called: find those calls here, or
		// `resiz(x)` below a stage with an error would pass validate.
		u := &unknownCalls{known: cfg.Functions, clock: -1}
		ast.Walk(&tree.Node, u)
		if u.name != "" {
			line, col := position(src, u.at)
			return nil, &Error{Line: line, Column: col, Msg: r.unknownFunction(u.name)}
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
	lits := &literalPaths{dir: r.dir, lets: map[string]ast.Node{}}
	if err == nil {
		ast.Walk(&tree.Node, letsOf(lits.lets))
		ast.Walk(&tree.Node, lits)
	}
	if err == nil && strip != nil && !strip(tree) {
		return nil, nil
	}
	if err == nil {
		_, err = new(checker.Checker).PatchAndCheck(tree, cfg)
	}
	if err == nil && in.Open {
		err = needFields(tree, in, skip())
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
		return nil, &Error{Line: 1, Column: 1, Msg: fmt.Sprintf("expression must give %s, but gives %s", want, t)} // at its start, as the others
	}
	if err := optimizer.Optimize(&tree.Node, cfg); err != nil {
		return nil, toError(err)
	}
	fr := &fieldsRead{skip: skip()}
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
// making the relative ones absolute, joined to dir, where dir is set. A
// path built of strings alone ("imgs/" + "a.txt", or a let bound to one)
// is written as text too: it is replaced by the string it makes, so that
// it resolves as one and the cache's fingerprint sees the file (a cache
// operator found such a file's change served stale from the cache).
type literalPaths struct {
	dir   string
	paths []string
	// lets holds what each name a let binds is bound to; nil for a name
	// bound more than once, whose binding at a use is not known here.
	lets map[string]ast.Node
}

func (l *literalPaths) Visit(node *ast.Node) {
	c, ok := callOf(*node, "read_file", 1)
	if !ok {
		return
	}
	v, ok := constString(c.Arguments[0], l.lets, 0)
	if !ok || v == "" {
		return
	}
	if l.dir != "" && !filepath.IsAbs(v) {
		v = filepath.Join(l.dir, v)
	}
	if p, ok := c.Arguments[0].(*ast.StringNode); ok {
		p.Value = v
	} else {
		p := &ast.StringNode{Value: v}
		p.SetLocation(c.Arguments[0].Location())
		c.Arguments[0] = p
	}
	if !slices.Contains(l.paths, v) {
		l.paths = append(l.paths, v)
	}
}

// letsOf records in m what each name a let binds is bound to.
type letsOf map[string]ast.Node

func (m letsOf) Visit(node *ast.Node) {
	d, ok := (*node).(*ast.VariableDeclaratorNode)
	if !ok {
		return
	}
	if _, twice := m[d.Name]; twice {
		m[d.Name] = nil
		return
	}
	m[d.Name] = d.Value
}

// constString returns the string n makes when it is made of strings
// alone: text, + of such, or a name a let binds to one.
func constString(n ast.Node, lets map[string]ast.Node, depth int) (string, bool) {
	if depth > 32 {
		return "", false
	}
	switch n := n.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.BinaryNode:
		if n.Operator != "+" {
			return "", false
		}
		a, ok := constString(n.Left, lets, depth+1)
		if !ok {
			return "", false
		}
		b, ok := constString(n.Right, lets, depth+1)
		return a + b, ok
	case *ast.IdentifierNode:
		if v := lets[n.Value]; v != nil {
			return constString(v, lets, depth+1)
		}
	}
	return "", false
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
	name, ok := neededField(c.Arguments[0]) // a field only the run knows
	if a, isName := c.Arguments[0].(*ast.IdentifierNode); isName {
		name, ok = a.Value, true
	}
	if ok && !slices.Contains(f.names, name) {
		f.names = append(f.names, name)
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
	case *ast.CallNode:
		if name, ok := neededField(n); ok {
			add(name)
		}
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
		var named missingField
		for _, f := range p.fields {
			if errors.As(err, &named) {
				break // __need's, which names it
			}
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

// runInt is an expr integer (a Go int: a literal) as an operand in the
// VM's messages ("string + int"); not int(x), the function.
var runInt = regexp.MustCompile(`(invalid operation: (?:\S+ \S+ )?)int\b([^(]|$)`)

// conversion is the VM's message for a builtin given the wrong type
// (upper(x) on an int64): Go's own interface-conversion panic text.
var conversion = regexp.MustCompile(`interface conversion: any is (\S+), not (\S+)`)

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

var (
	tensorPtr = reflect.TypeOf((*tensor.Tensor)(nil))
	bytesType = reflect.TypeOf([]byte(nil))
)

// operatorFuncs are the functions the patcher puts in place of operators;
// operators is the same set by function name.
var (
	operatorFuncs = map[string]string{"==": "__eq", "!=": "__ne", "in": "__in"}
	operators     = map[string]bool{"__eq": true, "__ne": true, "__in": true}
)

// envFuncs take $env itself as their first argument.
var envFuncs = map[string]bool{"__envget": true, "__envhas": true, "__need": true}

func (untypeCalls) Visit(node *ast.Node) {
	if c, ok := (*node).(*ast.CallNode); ok {
		c.SetType(nil)
	}
}
