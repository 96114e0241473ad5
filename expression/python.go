package expression

// This file holds where piperun's expressions part from expr's own to do
// what a Python user (the author of a tf.data or torchvision transform)
// means: Python's %, strings indexed by character, a refused //, and a
// field a sample lacks named rather than read as null.

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm/runtime"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/tensor"
)

// floorDivision is the message for a // in an expression.
const floorDivision = "// starts a comment in an expression, not Python's floor division, and the rest of the line would be dropped: write int(floor(a / b)) (int(a / b) rounds towards zero), and a comment as /* … */"

// lineCommentAt returns where src has a // outside its strings and
// /* … */ comments, in characters, or -1. expr reads one as a comment to
// the end of the line, so `label // 2` gave label and no error.
func lineCommentAt(src string) int {
	var quote rune // the open string's quote, or 0
	block := false
	prev := rune(0)
	n := -1
	for _, r := range src {
		n++
		switch {
		case block:
			if prev == '*' && r == '/' {
				block, r = false, 0
			}
		case quote != 0:
			switch {
			case r == '\\' && quote != '`' && prev != '\\':
			case r == quote && (prev != '\\' || quote == '`'):
				quote = 0
			case prev == '\\':
				r = 0 // an escaped backslash escapes nothing after it
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case prev == '/' && r == '/':
			return n - 1
		case prev == '/' && r == '*':
			block, r = true, 0 // the * closes nothing
		}
		prev = r
	}
	return -1
}

// registerPython registers the functions the patcher puts in place of
// expr's own where Python means something else.
func registerPython(r *Registry) {
	r.Register(&Func{
		Name: "__mod", Signature: "x % y", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			for _, x := range a {
				if k := x.Type.Kind; k != sample.Int && k != sample.Any {
					return sample.Type{}, fmt.Errorf("operator %% takes integers, got %s", x.Type)
				}
			}
			return sample.TInt, nil
		},
		Returns: reflect.TypeOf(0),
		Impl: func(_ *Call, a []any) (v any, err error) {
			defer recovered(&err)
			m := runtime.Modulo(a[0], a[1])
			// Go's remainder has the dividend's sign; Python's modulo
			// the divisor's: -1 % 15 is 14.
			if d, _ := toInt(a[1]); m != 0 && (m < 0) != (d < 0) {
				m += int(d)
			}
			return m, nil
		},
	})
	r.Register(&Func{
		Name: "__need", Signature: "a field", MinArgs: 2, MaxArgs: 2,
		Check: func([]Arg) (sample.Type, error) { return sample.TAny, nil },
		Impl: func(_ *Call, a []any) (any, error) {
			m, _ := a[0].(map[string]any)
			k, _ := a[1].(string)
			v, ok := m[k]
			if !ok {
				read := k
				if !IdentLike(k) {
					read = "$env[" + strconv.Quote(k) + "]"
				}
				return nil, missingField(fmt.Sprintf("field %q is missing from this sample; where only some samples have it, write %s ?? DEFAULT or %q in $env ? … : …", k, read, k))
			}
			return v, nil
		},
	})
	// indexOf and lastIndexOf count characters, as a string's x[i:j]
	// does (expr's counted bytes).
	for _, last := range []bool{false, true} {
		name, find := "__indexOf", strings.Index
		if last {
			name, find = "__lastIndexOf", strings.LastIndex
		}
		r.Register(&Func{
			Name: name, Signature: strings.TrimPrefix(name, "__") + "(s, sub)", MinArgs: 2, MaxArgs: 2,
			Check: func(a []Arg) (sample.Type, error) {
				for _, x := range a {
					if k := x.Type.Kind; k != sample.String && k != sample.Any {
						return sample.Type{}, fmt.Errorf("wants two strings, got %s and %s", a[0].Type, a[1].Type)
					}
				}
				return sample.TInt, nil
			},
			Returns: reflect.TypeOf(0), // int, as expr's own
			Impl: func(_ *Call, a []any) (any, error) {
				s, ok1 := a[0].(string)
				sub, ok2 := a[1].(string)
				if !ok1 || !ok2 {
					return nil, fmt.Errorf("wrong argument type: got %s and %s, want two strings", typeName(a[0]), typeName(a[1]))
				}
				i := find(s, sub)
				if i < 0 {
					return -1, nil
				}
				return utf8.RuneCountInString(s[:i]), nil
			},
		})
	}
	// first and last of a string are its first and last characters
	// (expr's gave a byte); of a list, its first and last elements, as
	// expr's own; null where there is none.
	for _, last := range []bool{false, true} {
		name := "__first"
		if last {
			name = "__last"
		}
		r.Register(&Func{
			Name: name, Signature: strings.TrimPrefix(name, "__") + "(x)", MinArgs: 1, MaxArgs: 1,
			Check: func(a []Arg) (sample.Type, error) {
				switch a[0].Type.Kind {
				case sample.String:
					return sample.TString, nil
				case sample.Tensor:
					return sample.Type{}, fmt.Errorf("not defined on tensors (got %s); index it (x[0]) or use the tensor functions", a[0].Type)
				}
				return sample.TAny, nil
			},
			Impl: func(_ *Call, a []any) (any, error) {
				switch x := a[0].(type) {
				case nil:
					return nil, nil
				case string:
					if x == "" {
						return nil, nil
					}
					r, _ := utf8.DecodeRuneInString(x)
					if last {
						r, _ = utf8.DecodeLastRuneInString(x)
					}
					return string(r), nil
				case *tensor.Tensor:
					return nil, fmt.Errorf("not defined on tensors (got %s); index it (x[0]) or use the tensor functions", valueWord(x))
				}
				v := reflect.ValueOf(a[0])
				if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
					return nil, fmt.Errorf("cannot get an element from %s", typeName(a[0]))
				}
				if v.Len() == 0 {
					return nil, nil
				}
				if last {
					return v.Index(v.Len() - 1).Interface(), nil
				}
				return v.Index(0).Interface(), nil
			},
		})
	}
	// x?.[i] of a value typed only at run time: null of null, else x[i]
	// (expr's own gave a string's byte).
	at := r.funcs["__at"]
	r.Register(&Func{
		Name: "__atopt", Signature: "x?.[i]", MinArgs: 2, MaxArgs: 2,
		Check: at.Check,
		Impl: func(c *Call, a []any) (any, error) {
			if a[0] == nil {
				return nil, nil
			}
			return at.Impl(c, a)
		},
	})
	// round rounds a half to even, as Python's, NumPy's, torch's and
	// TensorFlow's do (expr's, Go's math.Round, rounded it away from
	// zero: round(2.5) was 3).
	r.Register(&Func{
		Name: "__round", Signature: "round(x)", MinArgs: 1, MaxArgs: 1,
		Check: func(a []Arg) (sample.Type, error) {
			if k := a[0].Type.Kind; k != sample.Int && k != sample.Float && k != sample.Any {
				return sample.Type{}, fmt.Errorf("wants a number, got %s", a[0].Type)
			}
			return sample.TFloat, nil
		},
		Returns: reflect.TypeOf(0.0),
		Impl: func(_ *Call, a []any) (any, error) {
			switch x := a[0].(type) {
			case bool, nil:
				return nil, fmt.Errorf("wrong argument type: got %s, want a number", typeName(a[0]))
			case *tensor.Tensor:
				return nil, fmt.Errorf("not defined on tensors (got %s); index it (x[0]) or use the tensor functions", valueWord(x))
			}
			f, ok := toFloat(a[0])
			if !ok {
				return nil, fmt.Errorf("wrong argument type: got %s, want a number", typeName(a[0]))
			}
			return math.RoundToEven(f), nil
		},
	})
	// __strslice and __strat are a string's x[i:j] and x[i], typed as
	// strings for the checker; __slice is x[i:j] of a value known only as
	// it runs (__at, x[i], is core's).
	sliceCheck := func(a []Arg) (sample.Type, error) {
		for _, b := range a[1:] {
			if k := b.Type.Kind; k != sample.Int && k != sample.Any {
				return sample.Type{}, fmt.Errorf("a slice's bounds must be integers, got %s", b.Type)
			}
		}
		return a[0].Type, nil
	}
	r.Register(&Func{
		Name: "__strslice", Signature: "x[i:j]", MinArgs: 3, MaxArgs: 3,
		Check: sliceCheck, Returns: reflect.TypeOf(""),
		Impl: func(_ *Call, a []any) (any, error) {
			s, _ := a[0].(string)
			return sliceString(s, a[1], a[2]), nil
		},
	})
	r.Register(&Func{
		Name: "__strat", Signature: "x[i]", MinArgs: 2, MaxArgs: 2,
		Check: func(a []Arg) (sample.Type, error) {
			if k := a[1].Type.Kind; k != sample.Int && k != sample.Any {
				return sample.Type{}, fmt.Errorf("a string's index must be an integer, got %s", a[1].Type)
			}
			return sample.TString, nil
		},
		Returns: reflect.TypeOf(""),
		Impl: func(_ *Call, a []any) (any, error) {
			s, _ := a[0].(string)
			return charAt(s, a[1])
		},
	})
	r.Register(&Func{
		Name: "__slice", Signature: "x[i:j]", MinArgs: 3, MaxArgs: 3,
		Check: sliceCheck,
		Impl: func(_ *Call, a []any) (v any, err error) {
			if s, ok := a[0].(string); ok {
				return sliceString(s, a[1], a[2]), nil
			}
			if a[0] == nil {
				return nil, fmt.Errorf("cannot slice null")
			}
			defer recovered(&err)
			from, to := a[1], a[2]
			if from == nil {
				from = 0
			}
			if to == nil {
				to = reflect.ValueOf(a[0]).Len()
			}
			return runtime.Slice(a[0], from, to), nil
		},
	})
}

// sliceBounds turns a slice's bounds (nil where not written) into indices of a
// sequence of n, as Python does: negative ones count from the end, and
// both are clamped to it.
func sliceBounds(n int, from, to any) (int, int) {
	a, b := 0, n
	if from != nil {
		a = runtime.ToInt(from)
	}
	if to != nil {
		b = runtime.ToInt(to)
	}
	if a < 0 {
		a += n
	}
	if b < 0 {
		b += n
	}
	a, b = min(max(a, 0), n), min(max(b, 0), n)
	return a, max(a, b)
}

// sliceString is s[from:to], counted in characters as len(s) counts
// them (sliceBounds).
func sliceString(s string, from, to any) string {
	rs := []rune(s)
	a, b := sliceBounds(len(rs), from, to)
	return string(rs[a:b])
}

// charAt is s[i], counted in characters as len(s) counts them, negative
// from the end, as Python's.
func charAt(s string, index any) (string, error) {
	i, ok := toInt(index)
	if !ok {
		return "", fmt.Errorf("a string's index must be an integer, got %s", valueWord(index))
	}
	rs := []rune(s)
	j := i
	if j < 0 {
		j += int64(len(rs))
	}
	if j < 0 || j >= int64(len(rs)) {
		return "", fmt.Errorf("index %d out of range of a string of %d characters", i, len(rs))
	}
	return string(rs[j]), nil
}

// needFields rewrites, in the checked tree of an expression over an open
// schema, each read of a field the schema does not name into
// __need($env, "name"), which fails naming the field where the sample
// lacks it, as Python's NameError does; expr read it as null, so that
// `lable == 0` was false for every sample. A read that says the field
// may be missing is left to read null: the left of ??, (and the right
// too where the ?? is itself the left of one), an operand of == nil or
// != nil, the base of ?. ; and a read that is not evaluated (the other
// branch of ?:, the right of && or ||) fails nothing. skip holds the
// names that are no fields (functions, $env, the run context); names a
// let binds are skipped too, anywhere in the expression.
func needFields(tree *parser.Tree, in sample.Schema, skip map[string]bool) error {
	g := &guards{optional: map[ast.Node]bool{}}
	ast.Walk(&tree.Node, g)
	for changed := true; changed; {
		changed = false
		mark := func(n ast.Node) {
			if n != nil && !g.optional[n] {
				g.optional[n], changed = true, true
			}
		}
		for _, n := range g.coalesce {
			if g.optional[n] {
				mark(n.Right)
			}
		}
		for _, n := range g.branches {
			if g.optional[n] {
				mark(n.Exp1)
				mark(n.Exp2)
			}
		}
		for _, n := range g.chains {
			if g.optional[n] {
				mark(n.Node)
			}
		}
	}
	for name := range g.lets {
		skip[name] = true
	}
	for _, f := range in.Fields {
		skip[f.Name] = true // known fields are in every sample
	}
	v := &needs{skip: skip, optional: g.optional}
	ast.Walk(&tree.Node, v)
	if v.err != nil {
		return v.err.Bind(tree.Source)
	}
	return nil
}

// guards finds the reads an expression says may be missing (needFields).
type guards struct {
	optional map[ast.Node]bool
	coalesce []*ast.BinaryNode
	branches []*ast.ConditionalNode
	chains   []*ast.ChainNode
	lets     map[string]bool
}

func (g *guards) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.VariableDeclaratorNode:
		if g.lets == nil {
			g.lets = map[string]bool{}
		}
		g.lets[n.Name] = true
	case *ast.BinaryNode:
		switch {
		case n.Operator == "??":
			g.optional[n.Left] = true
			g.coalesce = append(g.coalesce, n)
		case (n.Operator == "==" || n.Operator == "!=") && isNil(n.Left):
			g.optional[n.Right] = true
		case (n.Operator == "==" || n.Operator == "!=") && isNil(n.Right):
			g.optional[n.Left] = true
		}
	case *ast.CallNode: // == and != and x?.[i] the patcher made calls
		if isCallOf(n, "__atopt") {
			g.optional[n.Arguments[0]] = true
		}
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && len(n.Arguments) == 2 &&
			(id.Value == operatorFuncs["=="] || id.Value == operatorFuncs["!="]) {
			if isNil(n.Arguments[0]) {
				g.optional[n.Arguments[1]] = true
			} else if isNil(n.Arguments[1]) {
				g.optional[n.Arguments[0]] = true
			}
		}
	case *ast.MemberNode:
		if n.Optional {
			g.optional[n.Node] = true
		}
	case *ast.ConditionalNode:
		g.branches = append(g.branches, n)
	case *ast.ChainNode:
		g.chains = append(g.chains, n)
	}
}

// needs rewrites the reads needFields checks.
type needs struct {
	skip     map[string]bool
	optional map[ast.Node]bool
	err      *file.Error
}

func (v *needs) Visit(node *ast.Node) {
	var name string
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		name = n.Value
		if v.skip[name] || v.optional[n] {
			return
		}
		if _, ok := pythonWords[name]; ok && v.err == nil {
			// Python's True, as on a closed schema (explain says what
			// to write).
			v.err = &file.Error{Location: n.Location(), Message: "unknown name " + name}
			return
		}
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		key, lit := n.Property.(*ast.StringNode)
		if !ok || id.Value != "$env" || !lit || n.Optional || v.optional[n] || v.skip[key.Value] {
			return
		}
		name = key.Value
	default:
		return
	}
	at := (*node).Location()
	if m, ok := (*node).(*ast.MemberNode); ok {
		at = m.Node.Location() // the $ of $env["k"], not its [
	}
	ast.Patch(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: "__need"},
		Arguments: []ast.Node{&ast.IdentifierNode{Value: "$env"}, &ast.StringNode{Value: name}}})
	(*node).SetLocation(at)
}

// missingField is __need's error, which Program.Run passes on as it is.
type missingField string

func (e missingField) Error() string { return string(e) }

// neededField returns the field n reads, if it is a __need call.
func neededField(n ast.Node) (string, bool) {
	c, ok := n.(*ast.CallNode)
	if !ok || len(c.Arguments) != 2 || !isCallOf(c, "__need") {
		return "", false
	}
	k, ok := c.Arguments[1].(*ast.StringNode)
	if !ok {
		return "", false
	}
	return k.Value, true
}

// isNil reports whether n is the literal nil.
func isNil(n ast.Node) bool {
	_, ok := n.(*ast.NilNode)
	return ok
}

// pyString is string(x) as Python's str(x) writes a float, a bool and
// None; other values as expr writes them.
func pyString(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "None", true
	case bool:
		if x {
			return "True", true
		}
		return "False", true
	case float64:
		return pyFloat(x, 64), true
	case float32:
		return pyFloat(float64(x), 32), true
	}
	return "", false
}

// pyFloat writes f as Python's repr does: the shortest digits that read
// back as f, in fixed notation with at least one decimal (1.0) where the
// exponent is from -4 to 15, else as 1e+16 and 1e-05.
func pyFloat(f float64, bits int) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, bits) // -d.ddde±xx
	sign := ""
	if strings.HasPrefix(e, "-") {
		sign, e = "-", e[1:]
	}
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	if x < -4 || x >= 16 {
		return sign + e
	}
	digits := strings.Replace(mant, ".", "", 1)
	point := x + 1 // digits before the point
	switch {
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
	}
	return sign + digits[:point] + "." + digits[point:]
}

// builtinFields rewrites a name that is one of expr's builtins but not
// called (split, type, count: keys of many exported datasets) into
// $env["name"], the field, where the sample may have it: expr read the
// function, and `split == "train"` was refused in words of func types.
// Where the schema is closed and has no such field, unknown is the
// first such name, and at where it is, in characters: expr's own
// message spoke of func types.
// A let's name is the checker's to refuse.
type builtinFields struct {
	in      sample.Schema
	lets    map[string]ast.Node
	unknown string
	at      int
}

func (b *builtinFields) Visit(node *ast.Node) {
	id, ok := (*node).(*ast.IdentifierNode)
	if !ok || !builtinNames[id.Value] {
		return
	}
	if _, isLet := b.lets[id.Value]; isLet {
		return
	}
	if _, known := b.in.Lookup(id.Value); !known && !b.in.Open {
		if b.unknown == "" {
			b.unknown, b.at = id.Value, id.Location().From
		}
		return
	}
	at := id.Location()
	ast.Patch(node, &ast.MemberNode{Node: &ast.IdentifierNode{Value: "$env"}, Property: &ast.StringNode{Value: id.Value}})
	(*node).SetLocation(at)
}
