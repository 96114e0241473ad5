package spec

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/piperun/piperun/internal/didyoumean"
)

// NodeUnmarshaler is implemented by config types that read themselves from a
// YAML node, such as "N|auto" values or byte sizes. The returned error is
// reported at the node's position.
type NodeUnmarshaler interface {
	UnmarshalNode(n *yaml.Node) error
}

// orderedMap is implemented by Map[T]; the decoder fills it key by key so
// that order and per-key positions survive.
type orderedMap interface {
	valueType() reflect.Type
	appendEntry(key string, pos Pos, v reflect.Value)
}

// decoder decodes YAML nodes into Go values by reflection. It exists because
// yaml.v3's KnownFields check is lost as soon as any custom unmarshaler is
// involved, and because every diagnostic must carry file:line:col.
type decoder struct {
	r   *reporter
	pos map[string]Pos
	// scalars, when set, receives the scalar nodes by path.
	scalars map[string]*yaml.Node
	// extra names are offered as suggestions for unknown keys at the top of
	// a stage, where common keys the type does not take may be meant.
	extra   []string
	extraAt string
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// joinPath appends a mapping key to a diagnostic path.
func joinPath(path, key string) string {
	if !identRe.MatchString(key) {
		return fmt.Sprintf("%s[%q]", path, key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// errorf reports that the value n at path could not be decoded. Keys that
// are unknown or repeated are reported with r.add instead: the value
// decoded is still whole.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	if path != "" && d.r.undecoded[path] {
		return // reported already (an unset environment variable in it)
	}
	d.r.add(SevError, n.Line, n.Column, path, format, args...)
	d.r.markUndecoded(path)
}

// NodeError is an error a NodeUnmarshaler returns to be reported at one of
// the node's parts (an unknown key inside a mapping) rather than at the
// node.
type NodeError struct {
	Node *yaml.Node
	Err  error
}

// Error implements error.
func (e *NodeError) Error() string { return e.Err.Error() }

// Unwrap returns the error e wraps, for errors.Is and errors.As.
func (e *NodeError) Unwrap() error { return e.Err }

// recordParts records the positions of a sequence's items and of a
// mapping's values below path.
func (d *decoder) recordParts(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.SequenceNode:
		for i, c := range n.Content {
			d.record(c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.record(n.Content[i+1], joinPath(path, n.Content[i].Value))
		}
	}
}

func (d *decoder) record(n *yaml.Node, path string) {
	if d.pos != nil {
		d.pos[path] = Pos{File: d.r.file, Line: n.Line, Col: n.Column}
	}
	if d.scalars != nil && n.Kind == yaml.ScalarNode {
		d.scalars[path] = n
	}
}

var (
	nodeUnmarshalerType = reflect.TypeOf((*NodeUnmarshaler)(nil)).Elem()
	orderedMapType      = reflect.TypeOf((*orderedMap)(nil)).Elem()
)

// decode fills v (addressable) from n, reporting problems under path.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	d.record(n, path)
	if v.CanAddr() && v.Addr().Type().Implements(nodeUnmarshalerType) {
		// The parts' places, for a later check's message on one of them
		// (inputs[2]: unknown input), which fell back to the whole
		// value's.
		d.recordParts(n, path)
		if err := v.Addr().Interface().(NodeUnmarshaler).UnmarshalNode(n); err != nil {
			at := n
			var ne *NodeError
			if errors.As(err, &ne) && ne.Node != nil {
				at = ne.Node
			}
			d.errorf(at, path, "%v", err)
		}
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(orderedMapType) {
		d.decodeOrderedMap(n, v.Addr().Interface().(orderedMap), path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(n) {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem(), path)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Interface:
		var x any
		if err := n.Decode(&x); err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		if x != nil {
			v.Set(reflect.ValueOf(x))
		}
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64, reflect.Uint64:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, path, "expected %s, got %s", kindWord(v.Kind()), describe(n))
			return
		}
		if v.Kind() == reflect.String {
			// Null is absent, as for every other key: the empty string,
			// which the stage then judges ("path: must not be empty").
			// `${DIR:-}` expanding to nothing is null too.
			if n.ShortTag() != "!!null" {
				v.SetString(n.Value)
			}
			return
		}
		// A null here is a list element or a map value (a key's null is
		// absent, decodeStruct): yaml.v3 would read it as 0 or false.
		if k := v.Kind(); (k == reflect.Int64 || k == reflect.Int) && isDigits(n) {
			// ParseInt, not yaml.v3's Decode, which read
			// -99999999999999999999 as a number and that as the least
			// int64.
			if _, err := strconv.ParseInt(n.Value, 10, 64); err != nil {
				// yaml.v3 reads digits past uint64 as a number, and some
				// as a string: an integer all the same.
				d.errorf(n, path, "integer %s is out of range (%d to %d)", shortDigits(n.Value), math.MinInt64, math.MaxInt64)
				return
			}
		}
		if !exactScalar(n, v.Kind()) || n.ShortTag() == "!!null" {
			d.errorf(n, path, "expected %s, got %s", kindWord(v.Kind()), describe(n))
			return
		}
		p := reflect.New(v.Type())
		if err := n.Decode(p.Interface()); err != nil {
			d.errorf(n, path, "expected %s, got %s", kindWord(v.Kind()), describe(n))
			return
		}
		if v.Kind() == reflect.Float64 && n.ShortTag() == "!!int" && !exactFloat(n.Value, p.Elem().Float()) {
			// A float64 holds integers exactly only up to 2^53; past
			// that the value would change without a word (a new-user
			// test: pad 9223372036854775807 became -9223372036854775808).
			d.errorf(n, path, "integer %s cannot be held exactly here: it is read as a number, exact up to 2^53 (9007199254740992), and would become %.0f", n.Value, p.Elem().Float())
			return
		}
		v.Set(p.Elem())
	default:
		d.errorf(n, path, "internal: cannot decode into %s", v.Type())
	}
}

// badKey reports, and says, a mapping key that is not a scalar: YAML
// allows a list or a mapping as a key ([q]: 1), whose Value is empty, and
// such a key was read as a field named "".
func (d *decoder) badKey(k *yaml.Node, path string) bool {
	if k.Kind == yaml.ScalarNode {
		return false
	}
	d.r.add(SevError, k.Line, k.Column, path, "a key must be a name or a quoted string, got %s", describe(k))
	return true
}

func (d *decoder) decodeOrderedMap(n *yaml.Node, m orderedMap, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if d.badKey(k, path) {
			continue
		}
		p := joinPath(path, k.Value)
		if k.Value == "" {
			// A field no expression could name.
			d.r.add(SevError, k.Line, k.Column, path, "a key must not be empty")
			continue
		}
		if seen[k.Value] {
			d.r.add(SevError, k.Line, k.Column, p, "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		x := reflect.New(m.valueType()).Elem()
		d.decode(val, x, p)
		m.appendEntry(k.Value, Pos{File: d.r.file, Line: val.Line, Col: val.Column}, x)
	}
}

// structFields maps YAML keys to field indexes, following inline structs.
func structFields(t reflect.Type) (map[string][]int, []string) {
	fields := map[string][]int{}
	var names []string
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			if tag == "-" || !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), prefix...), i)
			if strings.Contains(opts, "inline") {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			fields[name] = idx
			names = append(names, name)
		}
	}
	walk(t, nil)
	sort.Strings(names)
	return fields, names
}

func requiredFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			out = append(out, requiredFields(f.Type)...)
			continue
		}
		for _, o := range strings.Split(f.Tag.Get("jsonschema"), ",") {
			if o == "required" {
				out = append(out, name)
			}
		}
	}
	return out
}

// ExtensionPrefix starts the top-level keys piperun leaves to the user: a
// place to define YAML anchors that stages merge (`<<: *par`), as docker
// compose's x- fields are.
const ExtensionPrefix = "x-"

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	fields, names := structFields(v.Type())
	seen := map[string]bool{}
	nulls := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if d.badKey(k, path) {
			continue
		}
		p := joinPath(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok && path == "" && strings.HasPrefix(k.Value, ExtensionPrefix) {
			continue // a place for anchors (x-defaults: &par {…}), as in docker compose
		}
		if !ok {
			known := names
			if path == d.extraAt {
				known = append(slices.Clip(names), d.extra...)
			}
			d.r.add(SevError, k.Line, k.Column, p, "unknown field %q%s", k.Value, suggest(k.Value, known))
			continue
		}
		if seen[k.Value] {
			d.r.add(SevError, k.Line, k.Column, p, "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		if isNull(val) && v.FieldByIndex(idx).Kind() != reflect.String {
			// An empty value is an absent one; for a required number, the
			// problem is that (a count: with nothing after it was 0). An
			// empty string the stage judges ("path: must not be empty").
			nulls[k.Value] = val
		}
		f := v.FieldByIndex(idx)
		if isNull(val) && nullIsAbsent(f) {
			// A mapping whose entries are all commented out, or a key
			// left to be filled in later, reads as null: absent, so its
			// defaults hold, as for any other null value, and an ordered
			// map's stage says what it says of a missing one ("map needs
			// set, keep or drop"). Its place is kept for diagnostics.
			d.record(val, p)
			continue
		}
		d.decode(val, f, p)
	}
	for _, r := range requiredFields(v.Type()) {
		if nv, ok := nulls[r]; ok {
			d.r.add(SevError, nv.Line, nv.Column, joinPath(path, r), "required field %q has no value", r)
			d.r.markUndecoded(joinPath(path, r))
			continue
		}
		if !seen[r] {
			// Reported at the mapping, the field having no place of its
			// own; it is the field that is left undecoded.
			d.r.add(SevError, n.Line, n.Column, path, "missing required field %q", r)
			d.r.markUndecoded(joinPath(path, r))
		}
	}
}

// nullIsAbsent reports whether a null value leaves field f as it is,
// absent, rather than being of the wrong type: for every key but a list,
// whose absence means its default (a mapping's defaults, a count's
// default, auto, the default memory budget). Not for lists: an emptied
// keep: taken as absent would keep every field, the opposite of what it
// says; nor for a string-or-list (StringList), for the same reason.
// schema.json allows null exactly there (allowNulls).
func nullIsAbsent(f reflect.Value) bool {
	return f.Kind() != reflect.Slice // StringList too
}

// exactScalar reports whether scalar n is a value of kind as schema.json
// types it, where yaml.v3 would convert more: it truncates 2.5 into an
// int, and reads the strings yes, on and "true" into a bool.
func exactScalar(n *yaml.Node, kind reflect.Kind) bool {
	switch kind {
	case reflect.Bool:
		return n.ShortTag() == "!!bool"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		if n.ShortTag() == "!!float" {
			var f float64
			return n.Decode(&f) == nil && f == math.Trunc(f) && !math.IsInf(f, 0) // 1e3 is an integer; .inf is none
		}
	}
	return true
}

// isDigits reports whether n is a plain scalar of digits, with a sign or
// not: an integer, whatever yaml.v3 resolves it to past uint64.
func isDigits(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.Style != 0 {
		return false
	}
	digits := strings.TrimLeft(n.Value, "+-")
	return len(n.Value)-len(digits) <= 1 && digits != "" && strings.Trim(digits, "0123456789") == ""
}

// shortDigits writes a long integer by its ends and length: 5000 nines
// printed whole buried the message.
func shortDigits(s string) string {
	if len(s) <= 40 {
		return s
	}
	return fmt.Sprintf("%s…%s (%d digits)", s[:12], s[len(s)-4:], len(strings.TrimLeft(s, "+-")))
}

// isNull reports whether n, or the node an alias n names, is null.
func isNull(n *yaml.Node) bool {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Describe names a YAML value for a message: its kind, and a scalar's
// type and text ("a mapping", "string \"x\"", "number 2.5"), as a
// stage's own decoder says what it got.
func Describe(n *yaml.Node) string { return describe(n) }

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("string %q", n.Value)
		case "!!bool":
			return "boolean " + n.Value
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!timestamp":
			return "date " + n.Value
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "unexpected node"
}

func kindWord(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	}
	return "a string"
}

// suggest returns ` (did you mean "x"?)` for the closest known name, or the
// list of known names when none is close.
func suggest(got string, names []string) string {
	if best := didyoumean.Closest(got, names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(names) > 0 && len(names) <= 12 {
		return fmt.Sprintf(" (known: %s)", strings.Join(names, ", "))
	}
	return ""
}

// exactFloat reports whether the integer literal lit equals f, the
// float64 it decoded to. A literal big.Int cannot read is left to the
// decoder, which read it.
func exactFloat(lit string, f float64) bool {
	i, ok := new(big.Int).SetString(lit, 0)
	if !ok {
		return true
	}
	return new(big.Float).SetInt(i).Cmp(big.NewFloat(f)) == 0
}
