package expression

// This file holds the patcher, which rewrites a checked AST before it is
// compiled: registered functions typed, fusions, bounded string operations.

import (
	"maps"
	"reflect"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
)

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
		_, field := n.Property.(*ast.StringNode) // x.name: the inferrer's to refuse
		if isString(n.Node.Type()) && !field && (isInt(n.Property.Type()) || isAny(n.Property.Type())) {
			// A string's index counts characters, as len does (expr's
			// gave a byte); x?.[i] too, as a known string is never nil.
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__strat"}, Arguments: []ast.Node{n.Node, n.Property}})
			(*node).SetType(stringType) // for the + above, in this same walk
			return
		}
		if n.Optional {
			if !field && isAny(n.Node.Type()) && (isInt(n.Property.Type()) || isAny(n.Property.Type())) {
				// Null of null, else as x[i] (a string's character).
				ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__atopt"}, Arguments: []ast.Node{n.Node, n.Property}})
			}
			return // x?.name: expr's own, which gives nil for a nil x
		}
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
	case *ast.SliceNode:
		// A string's slice counts characters, as len does (expr's cut
		// bytes, and a character in two).
		if t := n.Node.Type(); isString(t) || isAny(t) {
			from, to := n.From, n.To
			if from == nil {
				from = &ast.NilNode{}
			}
			if to == nil {
				to = &ast.NilNode{}
			}
			fn := "__slice"
			if isString(t) {
				fn = "__strslice"
			}
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: []ast.Node{n.Node, from, to}})
			if isString(t) {
				(*node).SetType(stringType) // for the + above, in this same walk
			}
		}
	case *ast.BinaryNode:
		if z, ok := n.Right.(*ast.IntegerNode); n.Operator == "%" && intish(n.Left.Type()) && intish(n.Right.Type()) && (!ok || z.Value != 0) {
			// A literal 0 divisor is left to expr, which refuses a
			// constant x % 0 at compile time and fails the same as
			// __mod otherwise.
			// Python's %, with the divisor's sign (registerPython).
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__mod"}, Arguments: []ast.Node{n.Left, n.Right}})
			return
		}
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
		if to, ok := boundedBuiltins[n.Name]; ok && (n.Name != "int" || len(n.Arguments) == 1 && floatish(n.Arguments[0].Type())) {
			// expr's own, whose results its VM does not count
			// (registerStrings).
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: to}, Arguments: n.Arguments})
			return
		}
		// expr's own len fails on a tensor at run time, so len goes to
		// __len both where the argument is a tensor and where its type is
		// known only at run time (say $env[key] with key a field).
		// expr's string prints bytes as Go does ("[104 105]"): __string
		// reads them as text, as Python's bytes.decode.
		if to, ok := pythonBuiltins[n.Name]; ok && len(n.Arguments) > 0 && (to == "__round" || stringish(n.Arguments[0].Type())) {
			// Where Python's gives another value (registerPython).
			arg := n.Arguments[0].Type()
			ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: to}, Arguments: n.Arguments})
			// Typed for the operators above, in this same walk.
			switch {
			case to == "__round":
				(*node).SetType(reflect.TypeOf(0.0))
			case to == "__indexOf" || to == "__lastIndexOf":
				(*node).SetType(reflect.TypeOf(0))
			case isString(arg):
				(*node).SetType(stringType) // first, last of a string
			}
			return
		}
		if n.Name == "string" && len(n.Arguments) == 1 {
			// A float, a bool and null as Python's str writes them.
			if t := n.Arguments[0].Type(); t == bytesType || t == tensorPtr || isAny(t) || floatish(t) || t.Kind() == reflect.Bool {
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

// pythonBuiltins are expr's builtins that give a Python user another
// value than Python's, and the functions that give Python's
// (registerPython): of a string or a value typed only at run time; round
// of anything.
var pythonBuiltins = map[string]string{"indexOf": "__indexOf", "lastIndexOf": "__lastIndexOf", "first": "__first", "last": "__last", "round": "__round"}

// boundedBuiltins are expr's builtins whose results its VM does not count
// against its limit, or that give a wrong value where they should fail
// (int of 1e30), and the registered functions that take their place.
var boundedBuiltins = map[string]string{"replace": "__replace", "toBase64": "__toBase64", "toJSON": "__toJSON", "int": "__int"}

// floatish reports whether a value of type t may be a float: a float, or
// a value typed only at run time.
func floatish(t reflect.Type) bool {
	return isAny(t) || t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32
}

// isAny reports whether t is an interface type: a value whose type is
// known only at run time.
func isAny(t reflect.Type) bool { return t == nil || t.Kind() == reflect.Interface }

var stringType = reflect.TypeOf("")

// isString reports whether t is known to be a string.
func isString(t reflect.Type) bool { return t != nil && t.Kind() == reflect.String }

// intish reports whether a value of type t may be an integer.
func intish(t reflect.Type) bool { return isAny(t) || isInt(t) }

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
