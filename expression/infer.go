package expression

// This file holds type inference: the piperun type of each node, a
// tensor's dtype and shape included, from what each function says it returns.

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"

	"github.com/piperun/piperun/sample"
)

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
