package spec

import (
	"fmt"
	"go.yaml.in/yaml/v3"
	"sort"
	"strings"
)

// Pos is a position in a spec file. Line and Col start at 1; zero means
// unknown.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"column"`
	// Set is the command-line override ("a.b=v") the value came from,
	// which has no place in the file.
	Set string `json:"set,omitempty"`
}

// String formats the position as file:line:col, or "file (--set a.b=v)"
// for a value given on the command line.
func (p Pos) String() string {
	switch {
	case p.Set != "":
		return fmt.Sprintf("%s (--set %s)", p.File, p.Set)
	case p.Line == 0:
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Severity tells whether a diagnostic fails validation.
type Severity string

// The severities. Warnings are printed but do not fail validation.
const (
	SevError   Severity = "error"
	SevWarning Severity = "warning"
)

// Diagnostic is one problem found in a spec, with where it is.
type Diagnostic struct {
	Pos      Pos      `json:"pos"`
	Path     string   `json:"path"`
	Message  string   `json:"message"`
	Severity Severity `json:"severity"`
}

// String formats the diagnostic as file:line:col: path: message, on one
// line: breaks in the message are written \r and \n.
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.Pos.String())
	b.WriteString(": ")
	if d.Severity == SevWarning {
		b.WriteString("warning: ")
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	// One problem, one line: CI's problem matchers read lines. A break
	// comes from the user's own text (a ${VAR:?message}, a --set value).
	return lineBreaks.Replace(b.String())
}

var lineBreaks = strings.NewReplacer("\r", `\r`, "\n", `\n`)

// Diagnostics is a list of problems. As an error it reports them all, one
// per line.
type Diagnostics []Diagnostic

// Error joins the diagnostics, one per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

// HasErrors reports whether any diagnostic is an error rather than a warning.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity != SevWarning {
			return true
		}
	}
	return false
}

// Errors returns only the error diagnostics.
func (ds Diagnostics) Errors() Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity != SevWarning {
			out = append(out, d)
		}
	}
	return out
}

// Sort orders diagnostics by file, line and column, keeping the order of
// diagnostics at the same place.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// reporter collects diagnostics for one file.
type reporter struct {
	file  string
	diags Diagnostics
	// sets are the command-line overrides; a node one of them made has
	// line -(i+1) for sets[i] (see markSet).
	sets []string
	// undecoded holds the paths of values the decoder reported (missing,
	// or of the wrong type): a stage's Check sees them as zero values, and
	// its own complaint about them would be a second diagnostic for the
	// one problem.
	undecoded map[string]bool
	// expanded holds the values that read an environment variable
	// (${VAR}), with the variables read that are set: values that may
	// differ between processes. By node, not path: an alias (path: *out)
	// reads its anchor's.
	expanded map[*yaml.Node][]string
}

// markUndecoded records that the value at path was reported by the decoder.
func (r *reporter) markUndecoded(path string) {
	if path == "" {
		return
	}
	if r.undecoded == nil {
		r.undecoded = map[string]bool{}
	}
	r.undecoded[path] = true
}

// undecodedBelow reports whether a value path holds (an element, a key)
// was reported by the decoder: a list whose elements did not decode holds
// their zero values, and "weights: must not all be zero" said nothing of
// the elements' own errors.
func (r *reporter) undecodedBelow(path string) bool {
	for p := range r.undecoded {
		if len(p) > len(path) && strings.HasPrefix(p, path) && (p[len(path)] == '[' || p[len(path)] == '.') {
			return true
		}
	}
	return false
}

// isUndecoded reports whether the value at path, or one that holds it, was
// reported by the decoder.
func (r *reporter) isUndecoded(path string) bool {
	for p := path; p != ""; {
		if r.undecoded[p] {
			return true
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}

func (r *reporter) add(sev Severity, line, col int, path, format string, args ...any) {
	r.diags = append(r.diags, Diagnostic{
		Pos:      r.pos(line, col),
		Path:     path,
		Message:  fmt.Sprintf(format, args...),
		Severity: sev,
	})
}

// pos is the position of a node at line and col, or of the override that
// made it.
func (r *reporter) pos(line, col int) Pos {
	if line < 0 && -line <= len(r.sets) {
		return Pos{File: r.file, Set: r.sets[-line-1]}
	}
	return Pos{File: r.file, Line: line, Col: col}
}
