package plan_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// compile parses and plans a spec held in a string.
func compile(t *testing.T, src string) *plan.Plan {
	t.Helper()
	reg := stages.Default()
	sp, diags := spec.Parse("spec.yaml", []byte(src), spec.Options{Catalog: reg})
	if diags.HasErrors() {
		t.Fatalf("spec problems:\n%v", diags)
	}
	p, err := plan.Compile(sp, reg, plan.Options{Workers: 2, Memory: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// edges lists the plan's stages in order, each with its inputs:
// "a b<a c<b".
func edges(p *plan.Plan) string {
	var out []string
	for _, n := range p.Nodes {
		s := n.Stage.Name
		for i, in := range n.Stage.Inputs {
			sep := "<"
			if i > 0 {
				sep = ","
			}
			s += sep + in.Name
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// TestPushShuffles: which shuffles move above which maps, and the DAG
// after the move, stage by stage.
func TestPushShuffles(t *testing.T) {
	const head = "version: 1\nname: p\n%s\nstages:\n  - {name: src, type: range, count: 10}\n"
	for _, tc := range []struct {
		name, top, stages string
		want              string // stages in order, each "<" its inputs
		moved             string // "shuffle past m1,m2" or ""
	}{
		{"one map",
			"", `
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src sh<src m<sh out<m", "sh past m"},
		{"a chain of maps, nearest first",
			"", `
  - {name: m1, type: map, set: {x: 'index * 2'}}
  - {name: m2, type: map, set: {y: 'x + 1'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: b, type: batch, size: 2}
  - {name: out, type: discard}`,
			"src sh<src m1<sh m2<m1 b<m2 out<b", "sh past m2,m1"},
		{"optimize: false",
			"optimize: false", `
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src m<src sh<m out<sh", ""},
		{"a map that skips changes the count the shuffle sees",
			"", `
  - {name: m, type: map, on_error: skip, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src m<src sh<m out<sh", ""},
		{"a map with a second consumer",
			"", `
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}
  - {name: all, type: discard, input: m}`,
			"src m<src sh<m all<m out<sh", ""},
		{"a filter stops the move",
			"", `
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: f, type: filter, where: 'x > 4'}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src m<src f<m sh<f out<sh", ""},
		{"only past the maps before a filter",
			"", `
  - {name: f, type: filter, where: 'index > 4'}
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src f<src sh<f m<sh out<m", "sh past m"},
		{"a map from bytes may shrink its samples",
			"", `
  - {name: b, type: map, set: {data: 'read_file("x.jpg")'}}
  - {name: m, type: map, set: {img: 'decode_image(data, 3) | resize(8, 8)'}, keep: [img]}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src b<src m<b sh<m out<sh", ""},
		{"a map that shrinks a known tensor",
			"", `
  - {name: big, type: map, set: {v: 'one_hot(index, 5000)'}}
  - {name: m, type: map, set: {n: 'shape(v)[0]'}, keep: [n]}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src big<src m<big sh<m out<sh", ""},
		{"overheads count: eight fields collapse into one small tensor",
			"", `
  - {name: m0, type: map, set: {a: '1', b: '2', c: '3', d: '4', e: '5', f: '6', g: '7', h: '8'}}
  - {name: keep, type: filter, where: 'a > 0'}
  - {name: m1, type: map, set: {t: 'one_hot(index % 6, 6)'}, keep: [t]}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src m0<src keep<m0 m1<keep sh<m1 out<sh", ""},
		{"a cache below the shuffle replays its order",
			"", `
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: c, type: cache}
  - {name: out, type: discard}`,
			"src m<src sh<m c<sh out<c", ""},
		{"a cache above the maps does not matter",
			"", `
  - {name: c, type: cache}
  - {name: m, type: map, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: out, type: discard}`,
			"src c<src sh<c m<sh out<m", "sh past m"},
		{"a join's input",
			"", `
  - {name: other, type: range, count: 5}
  - {name: o, type: map, set: {x: 'index'}}
  - {name: m, type: map, input: src, set: {x: 'index * 2'}}
  - {name: sh, type: shuffle, buffer: 4}
  - {name: both, type: concat, inputs: [sh, o]}
  - {name: out, type: discard}`,
			"src other sh<src m<sh o<other both<m,o out<both", "sh past m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compile(t, fmt.Sprintf(head, tc.top)+strings.TrimPrefix(tc.stages, "\n")+"\n")
			if got := edges(p); got != tc.want {
				t.Errorf("plan\n got %s\nwant %s", got, tc.want)
			}
			var moved []string
			for _, r := range p.Rewrites {
				moved = append(moved, r.Stage+" past "+strings.Join(r.Past, ","))
			}
			if got := strings.Join(moved, "; "); got != tc.moved {
				t.Errorf("rewrites %q, want %q", got, tc.moved)
			}
			// Every stage's inputs name it among their outputs, and the
			// shuffle emits what its input emits.
			for _, n := range p.Nodes {
				for _, in := range n.Stage.Inputs {
					found := false
					for _, o := range in.Outputs {
						found = found || o == n.Stage
					}
					if !found {
						t.Errorf("%s reads %s, which does not list it as an output", n.Stage.Name, in.Name)
					}
				}
				if n.Stage.Type == "shuffle" && n.Stage.Schema.String() != n.Stage.Inputs[0].Schema.String() {
					t.Errorf("shuffle emits %s, its input %s", n.Stage.Schema, n.Stage.Inputs[0].Schema)
				}
			}
		})
	}
}

// TestPushShufflesOpenSchema: a map after jsonl, whose schema is open
// (fields unknown until read, of any size), may shrink its samples: the
// shuffle stays.
func TestPushShufflesOpenSchema(t *testing.T) {
	p := compile(t, `version: 1
name: p
stages:
  - {name: files, type: files, pattern: 'docs.jsonl'}
  - {name: lines, type: jsonl}
  - {name: m, type: map, set: {y: 'one_hot(int(label), 10)'}, keep: [y]}
  - {name: sh, type: shuffle, buffer: 100}
  - {name: out, type: discard}
`)
	if got := edges(p); got != "files lines<files m<lines sh<m out<sh" || len(p.Rewrites) != 0 {
		t.Errorf("plan %s, rewrites %v; want the shuffle where it is", got, p.Rewrites)
	}
	if n := p.Node("lines"); n.SampleBytes != -1 {
		t.Errorf("jsonl samples estimated at %d bytes, want unknown (-1)", n.SampleBytes)
	}
}

// TestPushShufflesSaysWhenTheOrderChanges: a shuffle whose samples as
// written would fill its half of the budget before its buffer (200 ×
// 39 KiB > 4 MiB) shuffles over fewer samples than the moved one, so the
// rewrite says the order differs (the run as written warns that its
// shuffle holds 103 of 200); under a budget where they fit it says
// the order is the same.
func TestPushShufflesSaysWhenTheOrderChanges(t *testing.T) {
	src := `version: 1
name: p
resources: {memory: %s}
stages:
  - {name: src, type: range, count: 400}
  - {name: big, type: map, set: {v: 'one_hot(index %% 10000, 10000)'}}
  - {name: sh, type: shuffle, buffer: 200}
  - {name: out, type: discard}
`
	for _, tc := range []struct {
		memory string
		same   bool
		why    string
	}{
		{"8MiB", false, "As written, samples of about 39.39KiB would fill its share of resources.memory at about 103 of its 200, so it now shuffles over more"},
		{"64MiB", true, "; the samples out and their order are the same"},
	} {
		p := compile(t, fmt.Sprintf(src, tc.memory))
		if len(p.Rewrites) != 1 || p.Rewrites[0].SameOrder != tc.same || !strings.Contains(p.Rewrites[0].Why, tc.why) {
			t.Errorf("memory %s: rewrites %+v; want same_order %v and %q", tc.memory, p.Rewrites, tc.same, tc.why)
		}
	}
}

// TestPushShufflesShrinksTheBuffer: the moved shuffle's buffer is sized
// by the map's input, not its output.
func TestPushShufflesShrinksTheBuffer(t *testing.T) {
	src := `version: 1
name: p
%s
stages:
  - {name: src, type: range, count: 10}
  - {name: m, type: map, set: {img: 'cast(one_hot(index, 1000), "float32")'}}
  - {name: sh, type: shuffle, buffer: 100}
  - {name: out, type: discard}
`
	asWritten := compile(t, fmt.Sprintf(src, "optimize: false")).Node("sh")
	moved := compile(t, fmt.Sprintf(src, "")).Node("sh")
	if asWritten.InSampleBytes <= 4000 || moved.InSampleBytes >= asWritten.InSampleBytes/10 {
		t.Errorf("shuffle input: %d bytes as written, %d moved; want > 4000 and under a tenth", asWritten.InSampleBytes, moved.InSampleBytes)
	}
}

// ExamplePlan_Text shows a plan whose shuffle the planner moved above the
// decoding map.
func ExamplePlan_Text() {
	reg := stages.Default()
	sp, _ := spec.Parse("w.yaml", []byte(`version: 1
name: w
seed: 1
stages:
  - {name: files, type: range, count: 100}
  - name: decode
    type: map
    set: {image: 'cast(one_hot(index, 1000), "float32")'}
  - {name: shuffle, type: shuffle, buffer: 50}
  - {name: out, type: discard}
`), spec.Options{Catalog: reg})
	p, _ := plan.Compile(sp, reg, plan.Options{Workers: 2, Memory: 1 << 30})
	p.Text(os.Stdout)
	// Output:
	// pipeline w: 4 stages, seed 1, epochs 1, deterministic true, memory 1GiB, workers 2
	// rewritten: shuffle "shuffle" runs before map "decode", so it holds samples as they were before it, not after; the samples out and their order are the same
	// (optimize: false runs the stages as written)
	// STAGE            TYPE            INPUTS            PAR   BUFFER     SAMPLE      SHARE  OUTPUT
	// files            range           -                   1        0       205B       205B  {index: int64}
	// shuffle          shuffle         files               1       50       205B   10.21KiB  {index: int64}
	// decode           map             shuffle             2        0    4.24KiB    4.24KiB  {index: int64, image: tensor<float32>[1000]}
	// out              discard         decode              1        0          -          -  -
}

// TestRewritesInDotAndMermaid: the graph formats draw the moved DAG and
// carry the rewrite as a comment.
func TestRewritesInDotAndMermaid(t *testing.T) {
	p := compile(t, `version: 1
name: p
stages:
  - {name: src, type: range, count: 10}
  - {name: decode, type: map, set: {v: 'one_hot(index, 1000)'}}
  - {name: shuffle, type: shuffle, buffer: 4}
  - {name: out, type: discard}
`)
	var dot, mermaid strings.Builder
	p.Dot(&dot)
	p.Mermaid(&mermaid)
	for _, c := range []struct{ name, got, comment, edge string }{
		{"dot", dot.String(), "\n  // rewritten: shuffle \"shuffle\" runs before map \"decode\"", "\n  s_shuffle -> s_decode;\n"},
		{"mermaid", mermaid.String(), "\n  %% rewritten: shuffle \"shuffle\" runs before map \"decode\"", "\n  s_shuffle --> s_decode\n"},
	} {
		if !strings.Contains(c.got, c.comment) || !strings.Contains(c.got, c.edge) {
			t.Errorf("%s:\n%s\nwant %q and %q", c.name, c.got, c.comment, c.edge)
		}
	}
}
