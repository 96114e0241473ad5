package spec

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// ValuePos returns where in the file a place inside the scalar value at
// path stands: its line-th line and col-th character, both from 1, as an
// expression's error gives them. It places only values whose text stands
// in the file as it is: plain and quoted scalars on one line without
// escapes, literal blocks (|) and folded ones (>) whose lines are all
// indented alike. For the rest (escapes, a ${VAR} expanded, an
// override's value) ok is false, and a diagnostic stays at the value's
// start, naming the place in its message.
func (sp *Spec) ValuePos(path string, line, col int) (pos Pos, ok bool) {
	n := sp.scalars[path]
	if n == nil || line < 1 || col < 1 || n.Line < 1 || n.Line > len(sp.lines) {
		return Pos{}, false
	}
	vlines := strings.Split(n.Value, "\n")
	if line > len(vlines) {
		return Pos{}, false
	}
	v := []rune(vlines[line-1])
	if col > len(v)+1 {
		return Pos{}, false
	}
	switch n.Style {
	case 0, yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
		if len(vlines) != 1 {
			return Pos{}, false // a flow scalar over lines is folded
		}
		start := n.Column // of the first character, or of the quote
		if n.Style != 0 {
			start++
		}
		if !runesAt([]rune(sp.lines[n.Line-1]), start-1, v) {
			return Pos{}, false
		}
		return Pos{File: sp.File, Line: n.Line, Col: start + col - 1}, true
	case yaml.LiteralStyle:
		// The text starts on the line after the indicator, each line
		// behind the block's indentation.
		at := n.Line + line
		if at > len(sp.lines) {
			return Pos{}, false
		}
		raw := []rune(sp.lines[at-1])
		indent := len(raw) - len(v)
		if indent < 0 || strings.Trim(string(raw[:indent]), " ") != "" || !runesAt(raw, indent, v) {
			return Pos{}, false
		}
		return Pos{File: sp.File, Line: at, Col: indent + col}, true
	case yaml.FoldedStyle:
		return sp.foldedPos(n, line, col)
	}
	return Pos{}, false
}

// foldedPos is ValuePos for a folded block (>), where YAML joins the
// lines of a paragraph with spaces: a long expression written over
// several lines is one line of the value (an
// error in its third line was placed at the block's start). It walks the
// block's lines against the value, and gives up (ok false) at anything
// it does not follow: more-indented lines, whose breaks YAML keeps, or
// text that does not match.
func (sp *Spec) foldedPos(n *yaml.Node, line, col int) (Pos, bool) {
	vlines := strings.Split(n.Value, "\n")
	at := n.Line + 1 // the text starts on the line after the indicator
	indent := -1
	for k := 0; k < line; k++ {
		v := []rune(vlines[k])
		// A break kept in the value stands for one blank line.
		if k > 0 && len(v) > 0 && at <= len(sp.lines) && strings.TrimSpace(sp.lines[at-1]) == "" {
			at++
		}
		pos := 0 // in v, where the next block line's text goes
		for first := true; first || pos < len(v); first = false {
			if at > len(sp.lines) {
				return Pos{}, false
			}
			raw := []rune(sp.lines[at-1])
			ind := 0
			for ind < len(raw) && raw[ind] == ' ' {
				ind++
			}
			if indent < 0 {
				indent = ind
			}
			if ind != indent {
				return Pos{}, false
			}
			text := raw[ind:]
			if !first {
				if pos >= len(v) || v[pos] != ' ' {
					return Pos{}, false
				}
				pos++ // the space the fold put for the break
			}
			if !runesAt(v, pos, text) {
				return Pos{}, false
			}
			if k == line-1 && col-1 >= pos && col-1 < pos+len(text) {
				return Pos{File: sp.File, Line: at, Col: ind + col - pos}, true
			}
			pos += len(text)
			at++
			if len(text) == 0 {
				break
			}
		}
	}
	return Pos{}, false
}

// runesAt reports whether s holds v from index i.
func runesAt(s []rune, i int, v []rune) bool {
	if i < 0 || i+len(v) > len(s) {
		return false
	}
	for k, r := range v {
		if s[i+k] != r {
			return false
		}
	}
	return true
}
