package expression

// This file holds where piperun's expressions part from expr's own to do
// what a Python user (the author of a tf.data or torchvision transform)
// means: Python's %, strings indexed by character, a refused //, and a
// field a sample lacks named rather than read as null.

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm/runtime"

	"github.com/piperun/piperun/sample"
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
		Name: "__slice", Signature: "x[i:j]", MinArgs: 3, MaxArgs: 3,
		Check: func(a []Arg) (sample.Type, error) {
			if a[0].Type.Kind == sample.String {
				return sample.TString, nil
			}
			return a[0].Type, nil
		},
		Impl: func(_ *Call, a []any) (v any, err error) {
			if s, ok := a[0].(string); ok {
				rs := []rune(s)
				from, to := sliceBounds(len(rs), a[1], a[2])
				return string(rs[from:to]), nil
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

// charAt is s[i], counted in characters as len(s) counts them, negative
// from the end, as Python's.
func charAt(s string, i int64) (string, error) {
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

// missingError is the error of the fields the sample lacks that the
// expression reads without saying they may be missing, at the first place
// the first is read.
func missingError(src string, names []string, at int) error {
	read := names[0]
	if !IdentLike(read) {
		read = "$env[" + strconv.Quote(read) + "]"
	}
	what, it := fmt.Sprintf("field %q is", names[0]), "it"
	if len(names) > 1 {
		q := make([]string, len(names))
		for i, n := range names {
			q[i] = strconv.Quote(n)
		}
		what, it = "fields "+strings.Join(q, ", ")+" are", "one"
	}
	e := &file.Error{Location: file.Location{From: at}, Message: fmt.Sprintf(
		"%s missing from this sample; where only some samples have %s, write %s ?? DEFAULT or %q in $env ? … : …", what, it, read, names[0])}
	return e.Bind(file.NewSource(src))
}

// required finds the fields an expression reads that the sample must
// have: each read of a name that is no let's, unless the expression also
// says the field may be missing (x ?? d, "x" in $env, x == nil or
// x != nil, $env?.x). where holds the first read of each, in characters.
type required struct {
	skip    map[string]bool
	names   []string
	where   map[string]int
	guarded map[string]bool
}

func (q *required) Visit(node *ast.Node) {
	read := func(name string, at int) {
		if q.skip[name] {
			return
		}
		if _, ok := q.where[name]; !ok {
			q.names = append(q.names, name)
			q.where[name] = at
		} else if at < q.where[name] {
			q.where[name] = at
		}
	}
	switch n := (*node).(type) {
	case *ast.VariableDeclaratorNode:
		// Visited after its body, which reads the name it binds.
		q.skip[n.Name] = true
		q.names = slices.DeleteFunc(q.names, func(s string) bool { return s == n.Name })
		delete(q.where, n.Name)
	case *ast.IdentifierNode:
		read(n.Value, n.Location().From)
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "$env" {
			if key, ok := n.Property.(*ast.StringNode); ok {
				if n.Optional {
					q.guarded[key.Value] = true
				}
				read(key.Value, id.Location().From)
			}
		}
	case *ast.BinaryNode:
		switch n.Operator {
		case "??":
			q.guard(n.Left)
		case "==", "!=":
			if isNil(n.Left) {
				q.guard(n.Right)
			} else if isNil(n.Right) {
				q.guard(n.Left)
			}
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok || len(n.Arguments) != 2 {
			return
		}
		switch id.Value {
		case "__envhas":
			if key, ok := n.Arguments[1].(*ast.StringNode); ok {
				q.guarded[key.Value] = true
			}
		case operatorFuncs["=="], operatorFuncs["!="]:
			if isNil(n.Arguments[0]) {
				q.guard(n.Arguments[1])
			} else if isNil(n.Arguments[1]) {
				q.guard(n.Arguments[0])
			}
		}
	}
}

// guard marks the field n reads, if it is one, as one that may be missing.
func (q *required) guard(n ast.Node) {
	switch x := n.(type) {
	case *ast.IdentifierNode:
		q.guarded[x.Value] = true
	case *ast.MemberNode:
		if id, ok := x.Node.(*ast.IdentifierNode); ok && id.Value == "$env" {
			if key, ok := x.Property.(*ast.StringNode); ok {
				q.guarded[key.Value] = true
			}
		}
	}
}

func isNil(n ast.Node) bool {
	_, ok := n.(*ast.NilNode)
	return ok
}
