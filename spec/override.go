package spec

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

func reflect_(p any) reflect.Value { return reflect.ValueOf(p).Elem() }

func sortedStrings(s []string) []string {
	sort.Strings(s)
	return s
}

// interpolate replaces ${VAR} and ${VAR:-default} in string values (never
// in keys). "$${" stands for a literal "${". Plain scalars, and quoted ones
// inside flow collections that hold one variable alone, are re-resolved
// afterwards, so `parallelism: ${PAR:-4}` and `{parallelism: "${PAR:-4}"}`
// are integers. flow is set inside a flow collection.
func interpolate(n *yaml.Node, path string, lookup func(string) (string, bool), r *reporter, flow bool) {
	flow = flow || n.Style&yaml.FlowStyle != 0
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			interpolate(c, fmt.Sprintf("%s[%d]", path, i), lookup, r, flow)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			interpolate(n.Content[i+1], joinPath(path, n.Content[i].Value), lookup, r, flow)
		}
	case yaml.ScalarNode:
		if n.Line < 0 || !strings.Contains(n.Value, "${") {
			return // from --set (markSet), or nothing to expand
		}
		var read []string
		out, err := Expand(n.Value, func(k string) (string, bool) {
			v, ok := lookup(k)
			if ok && v != "" { // ${K:-d} reads the default of an empty K
				read = append(read, k)
			}
			return v, ok
		})
		if err != nil {
			r.add(SevError, n.Line, n.Column, path, "%v", err)
			// No later check speaks of the value again ("expected an
			// integer, got ${N}", "pattern ${D}/x matches no file").
			r.markUndecoded(path)
			return
		}
		whole := wholeVar(n.Value)
		if out != strings.ReplaceAll(n.Value, "$${", "${") {
			if r.expanded == nil {
				r.expanded = map[*yaml.Node][]string{}
			}
			r.expanded[n] = read
		}
		n.Value = out
		// A plain value is resolved again, so ${N:-5} is a number and one
		// that expands to nothing is null: absent, like an unset key. So
		// is a quoted value that is one variable and nothing else inside
		// a flow collection (`{index: "${RANK:-0}"}`), where the quotes
		// are what YAML asks for around `{`, not a wish for a string
		// ("shard.index: expected an integer,
		// got 0"). In block style the plain form parses, so quotes there
		// do ask for a string (`default: "${D:-}"` is the empty string,
		// "${ID}" with ID=007 stays "007").
		if n.Style == 0 || (whole && flow) {
			n.Style, n.Tag = 0, ""
		}
	}
}

// wholeVar reports whether s is one ${...} reference and nothing else.
func wholeVar(s string) bool {
	return strings.HasPrefix(s, "${") && strings.Index(s, "}") == len(s)-1
}

// shellVarRe finds a shell variable written without braces ($HOME).
var shellVarRe = regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)

// varNameRe is what a variable's name may be, as in POSIX shells.
var varNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Expand substitutes ${VAR} and ${VAR:-default} in s; ${VAR:?message}
// fails with the message where VAR is unset or empty, as in a shell.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	var b strings.Builder
	var unset []string // every one, not only the first
	// empty are the variables set to nothing and written without a
	// default: a value they leave empty would be null, absent, so that
	// MEM= would drop `memory: ${MEM}` to the default budget unseen.
	var empty []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			switch len(unset) {
			case 0:
				if b.Len() == 0 && len(empty) > 0 {
					return "", fmt.Errorf("environment variable %s is set but empty, which leaves the value empty (write ${%s:-} to leave the key at its default, or ${%s:-VALUE})", empty[0], empty[0], empty[0])
				}
				return b.String(), nil
			case 1:
				return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} to give a default)", unset[0], unset[0])
			}
			return "", fmt.Errorf("environment variables %s are not set (write ${%s:-default} to give a default)", strings.Join(unset, ", "), unset[0])
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		ref := s[i+2 : i+end]
		name, must, hasMust := strings.Cut(ref, ":?")
		def, hasDef := "", false
		if !hasMust {
			name, def, hasDef = strings.Cut(ref, ":-")
		}
		if name == "" {
			return "", fmt.Errorf("empty variable name in ${%s}", ref)
		}
		if !varNameRe.MatchString(name) {
			// ${X:+a}, ${X-d}, ${1X}: shell forms piperun does not
			// expand, which read as a variable called "X:+a".
			return "", fmt.Errorf("${%s} is not a form piperun expands: write ${VAR}, ${VAR:-default} or ${VAR:?message}, VAR being letters, digits and _ (not starting with a digit)", ref)
		}
		if strings.Contains(def, "${") {
			// The default ends at the first }, and the rest came out as
			// written: a literal ${ in the value.
			return "", fmt.Errorf("${%s}: a default cannot hold another variable (piperun does not nest them)", ref+"}")
		}
		v, ok := lookup(name)
		if hasMust && (!ok || v == "") {
			if must == "" {
				must = "it must be set"
			}
			return "", fmt.Errorf("environment variable %s is not set or empty: %s", name, must)
		}
		if hasDef && (!ok || v == "") {
			// ${OUT:-$PWD/o.jsonl} made a folder named "$PWD". Only a default
			// in use, and not $env, which an
			// expression's default may read.
			for _, m := range shellVarRe.FindAllString(def, -1) {
				if m != "$env" {
					return "", fmt.Errorf("${%s}: the default holds %s, which piperun does not expand (it expands ${VAR} forms, and none inside a default): write the value out", ref, m)
				}
			}
		}
		switch {
		case ok && (v != "" || !hasDef):
			if v == "" {
				empty = append(empty, name)
			}
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			if !slices.Contains(unset, name) {
				unset = append(unset, name)
			}
		}
		s = s[i+end+1:]
	}
}

// ApplySet applies one override, "a.b=v", to a document's mapping node. The
// path names keys separated by dots; under "stages" a segment is a stage
// name or an index ("stages.decode.parallelism=4", "stages.3.parallelism=4");
// a dot in a key is written \. ("stages.m.set.a\.b=1"), a backslash \\.
// The value is read as YAML, so "4" is an integer and "[a, b]" a list; an
// empty value is an error ("null" removes a key).
func ApplySet(doc *yaml.Node, set string) error {
	key, val, ok := strings.Cut(set, "=")
	if !ok || key == "" {
		return errors.New("expected path=value")
	}
	if strings.HasPrefix(key, ExtensionPrefix) {
		// The merges have copied the anchor already: the override would
		// change nothing, and said nothing.
		return fmt.Errorf("%s holds anchors that stages merge, and the merges are made before overrides: set the stage's own key (stages.NAME.KEY)", strings.SplitN(key, ".", 2)[0])
	}
	var v yaml.Node
	err := yaml.Unmarshal([]byte(val), &v)
	if blank := strings.TrimSpace(val) == ""; !blank && err != nil {
		return fmt.Errorf("value: %w", err) // a tab alone is no token to YAML, but no value here
	} else if blank || len(v.Content) == 0 || v.Content[0].Tag == "!!null" && v.Content[0].Value == "" {
		// Nothing, only a comment, a bare "---": read as null it would
		// remove the key, and a pinned seed turned random when a CI
		// matrix left its variable unset. An explicit null is "null" or
		// "~".
		return fmt.Errorf(`no value after "=": write %s=null to remove the setting, or %s='""' for an empty string`, key, key)
	}
	value := v.Content[0]
	// Positions in the value are positions in the override, not in the
	// file: mark them, so Parse reports them as the override's (markSet).
	walk(value, func(n *yaml.Node) { n.Line, n.Column = fromSet, fromSet })
	segs := splitKey(key)
	n := doc
	for i, seg := range segs {
		last := i == len(segs)-1
		switch n.Kind {
		case yaml.MappingNode:
			found := false
			for j := 0; j+1 < len(n.Content); j += 2 {
				if n.Content[j].Value == seg {
					if last {
						n.Content[j+1] = value
					}
					n = n.Content[j+1]
					found = true
					break
				}
			}
			if !found {
				if last {
					n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: seg, Line: fromSet, Column: fromSet}, value)
					return nil
				}
				child := &yaml.Node{Kind: yaml.MappingNode, Line: fromSet, Column: fromSet}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: seg, Line: fromSet, Column: fromSet}, child)
				n = child
			}
		case yaml.SequenceNode:
			// A name wins over an index: a stage may be named "3".
			idx := -1
			for j, c := range n.Content {
				if c.Kind == yaml.MappingNode && mappingValue(c, "name") == seg {
					idx = j
					break
				}
			}
			if k, err := strconv.Atoi(seg); err == nil && idx < 0 {
				idx = k
			}
			if idx < 0 || idx >= len(n.Content) {
				var names []string
				for _, c := range n.Content {
					if c.Kind == yaml.MappingNode && mappingValue(c, "name") != "" {
						names = append(names, mappingValue(c, "name"))
					}
				}
				if seg == "" {
					return fmt.Errorf("empty name after %s. (two dots?)", joinKey(segs[:i]))
				}
				if _, err := strconv.Atoi(seg); err == nil {
					which := fmt.Sprintf("0 to %d", len(n.Content)-1)
					if len(n.Content) == 1 {
						which = "0"
					}
					if len(names) == 1 {
						which += ", or its name: " + names[0]
					} else if len(names) > 0 {
						which += ", or their names: " + strings.Join(names, ", ")
					}
					if len(n.Content) == 0 {
						which = "none"
					}
					return fmt.Errorf("no element %s in %s, which has %d (%s)", seg, joinKey(segs[:i]), len(n.Content), which)
				}
				return fmt.Errorf("no element %q in %s%s", seg, joinKey(segs[:i]), suggest(seg, names))
			}
			if last {
				n.Content[idx] = value
				return nil
			}
			n = n.Content[idx]
		default:
			return fmt.Errorf("%s is not a mapping or list", joinKey(segs[:i]))
		}
	}
	return nil
}

// splitKey splits an override's path at its dots, except those written
// \. (a key holding a dot: a feature named "a.b"); \\ is a backslash.
func splitKey(key string) []string {
	var segs []string
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		switch {
		case key[i] == '\\' && i+1 < len(key) && (key[i+1] == '.' || key[i+1] == '\\'):
			b.WriteByte(key[i+1])
			i++
		case key[i] == '.':
			segs = append(segs, b.String())
			b.Reset()
		default:
			b.WriteByte(key[i])
		}
	}
	return append(segs, b.String())
}

// joinKey writes segments as an override's path, splitKey's inverse.
func joinKey(segs []string) string {
	esc := strings.NewReplacer(`\`, `\\`, ".", `\.`)
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = esc.Replace(s)
	}
	return strings.Join(out, ".")
}

// fromSet is the line ApplySet gives the nodes it makes; Parse renumbers
// them for the override they came from.
const fromSet = -1 << 30

// markSet gives the nodes the k-th override made (k from 1) line -k.
func markSet(doc *yaml.Node, k int) {
	walk(doc, func(n *yaml.Node) {
		if n.Line == fromSet {
			n.Line, n.Column = -k, 0
		}
	})
}

func walk(n *yaml.Node, f func(*yaml.Node)) {
	f(n)
	for _, c := range n.Content {
		walk(c, f)
	}
}

func mappingValue(n *yaml.Node, key string) string {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == key {
			return n.Content[j+1].Value
		}
	}
	return ""
}
