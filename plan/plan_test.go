package plan_test

import (
	"strings"
	"testing"
)

// TestIdentsStayApart: stage names that differ only in '-' and '_' get
// different node IDs in dot and Mermaid.
func TestIdentsStayApart(t *testing.T) {
	p := compile(t, `version: 1
name: p
stages:
  - {name: src, type: range, count: 10}
  - {name: a-b, type: map, set: {x: 'index * 2'}}
  - {name: a_b, type: map, set: {y: 'x + 1'}}
  - {name: out, type: discard}
`)
	var dot strings.Builder
	p.Dot(&dot)
	for _, want := range []string{"\n  s_src -> s_a_00002db;\n", "\n  s_a_00002db -> s_a__b;\n", "\n  s_a__b -> s_out;\n"} {
		if !strings.Contains(dot.String(), want) {
			t.Errorf("dot:\n%s\nwant %q", dot.String(), want)
		}
	}
}
