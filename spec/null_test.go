package spec_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// nullOpts is a mapping-valued config field for TestNullMappingIsAbsent.
type nullOpts struct {
	Size int    `yaml:"size"`
	Mode string `yaml:"mode"`
}

type nullConfig struct {
	Opts  nullOpts         `yaml:"opts"`
	Need  nullOpts         `yaml:"need" jsonschema:"required"`
	Names spec.Map[string] `yaml:"names"`
}

// nullCatalog holds a source and a sink taking nullConfig, so that the test
// depends on no real stage's checks.
type nullCatalog map[string]*spec.StageType

func (c nullCatalog) Lookup(name string) (*spec.StageType, bool) { t, ok := c[name]; return t, ok }

func (c nullCatalog) Names() []string {
	var out []string
	for n := range c {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestNullMappingIsAbsent: a mapping key left empty (its entries commented
// out, or nothing written yet) is absent, as a null is for every other
// type: the defaults hold, and what a stage says of a missing mapping it
// says of this one. A required one is still reported, once.
func TestNullMappingIsAbsent(t *testing.T) {
	newConfig := func() any { return &nullConfig{Opts: nullOpts{Size: 7, Mode: "fast"}} }
	cat := nullCatalog{
		"src":  {Name: "src", Role: spec.RoleSource, NewConfig: newConfig},
		"sink": {Name: "sink", Role: spec.RoleSink, NewConfig: newConfig},
	}
	const head = "version: 1\nname: t\n"
	tests := []struct {
		desc, src, want string
		cat             spec.Catalog
		check           func(*spec.Spec) bool
	}{
		{"resources with its only entry commented out",
			head + "resources:\n  # memory: 1GiB\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: out, type: discard}\n",
			"", stages.Default(),
			func(sp *spec.Spec) bool { return sp.Resources == spec.Resources{} }},
		{"resources: ~",
			head + "resources: ~\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: out, type: discard}\n",
			"", stages.Default(), nil},
		// Through an alias too ("expected a mapping, got
		// null", placed at the anchor).
		{"resources: an alias of null",
			head + "seed: &none ~\nresources: *none\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: out, type: discard}\n",
			"", stages.Default(), nil},
		{"resources as a list is still a type error",
			head + "resources: []\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: out, type: discard}\n",
			"n.yaml:3:12: resources: expected a mapping, got a list\n", stages.Default(), nil},
		// The map stage's own word for it, not "expected a mapping, got null".
		{"map with set: left empty",
			head + "stages:\n  - {name: r, type: range, count: 3}\n  - name: m\n    type: map\n    set:\n  - {name: out, type: discard}\n",
			"n.yaml:5:5: stages[1]: map needs set, keep or drop\n", stages.Default(), nil},
		{"map with set: left empty and keep",
			head + "stages:\n  - {name: r, type: range, count: 3}\n  - name: m\n    type: map\n    set:\n    keep: [index]\n  - {name: out, type: discard}\n",
			"", stages.Default(),
			func(sp *spec.Spec) bool { return sp.Stage("m").Config.(*stages.MapConfig).Set.Len() == 0 }},
		{"struct field left empty keeps its defaults",
			head + "stages:\n  - {name: a, type: src, need: {size: 1}, opts: }\n  - {name: b, type: sink, need: {}, opts: {size: 2}}\n",
			"", cat,
			func(sp *spec.Spec) bool {
				a, b := sp.Stage("a").Config.(*nullConfig), sp.Stage("b").Config.(*nullConfig)
				return a.Opts == nullOpts{Size: 7, Mode: "fast"} && a.Need == nullOpts{Size: 1} &&
					b.Opts == nullOpts{Size: 2, Mode: "fast"}
			}},
		{"ordered map left empty",
			head + "stages:\n  - {name: a, type: src, need: {}, names: }\n  - {name: b, type: sink, need: {}, names: {x: y}}\n",
			"", cat,
			func(sp *spec.Spec) bool {
				a, b := sp.Stage("a").Config.(*nullConfig), sp.Stage("b").Config.(*nullConfig)
				return a.Names.Len() == 0 && b.Names.Len() == 1
			}},
		{"required struct field left empty",
			head + "stages:\n  - {name: a, type: src, need: }\n  - {name: b, type: sink, need: ~}\n",
			"n.yaml:4:32: stages[0].need: required field \"need\" has no value\n" +
				"n.yaml:5:33: stages[1].need: required field \"need\" has no value\n", cat, nil},
		{"required ordered map left empty",
			head + "stages:\n  - {name: r, type: range, count: 3}\n  - {name: p, type: parse_example, field: index, features: }\n  - {name: out, type: discard}\n",
			"n.yaml:5:43: stages[1].field: field \"index\" is int64; parse_example needs serialized bytes\n" +
				"n.yaml:5:60: stages[1].features: required field \"features\" has no value\n", stages.Default(), nil},
		// Scalars, auto and byte sizes left empty keep their defaults; they
		// were 0 ("block_length: must be at least 1, got 0") or type errors
		// (epochs: ~ was absent, shuffle: ~ an error).
		{"scalar, auto and byte size keys left empty",
			head + "resources: {memory: ~, workers: ~}\nstages:\n  - {name: f, type: files, pattern: '*.jsonl', shuffle: ~, shard: ~}\n  - {name: j, type: jsonl, block_length: ~, cycle_length: ~, parallelism: ~}\n  - {name: out, type: discard}\n",
			"", stages.Default(),
			func(sp *spec.Spec) bool {
				j, f := sp.Stage("j").Config.(*stages.JSONLConfig), sp.Stage("f").Config.(*stages.FilesConfig)
				return j.BlockLength == 1 && j.CycleLength == (spec.Auto{}) && sp.Stage("j").Parallelism == (spec.Auto{}) &&
					!f.Shuffle && f.Shard == (stages.Shard{}) && sp.Resources == (spec.Resources{})
			}},
		// Inside a value a null is not a key's absence: yaml.v3 read it as
		// 0 (pad 0, weight 0, shard index 0, shape 0).
		{"nulls inside lists and maps",
			head + "stages:\n  - {name: f, type: files, pattern: '*.jsonl', shard: {index: ~, count: 2}}\n  - {name: j, type: jsonl}\n  - {name: r, type: range, count: 3}\n  - {name: m, type: mix, inputs: [j, r], weights: [1, ~]}\n  - {name: b, type: batch, size: 2, pad: {x: ~}}\n  - {name: out, type: discard}\n",
			"n.yaml:4:63: stages[0].shard: shard.index: expected an integer, got null\n" +
				"n.yaml:7:55: stages[3].weights[1]: expected a number, got null\n" +
				"n.yaml:8:46: stages[4].pad.x: expected a number, got null\n", stages.Default(), nil},
		{"a required count left empty",
			head + "stages:\n  - {name: r, type: range, count: ~}\n  - {name: out, type: discard}\n",
			"n.yaml:4:35: stages[0].count: required field \"count\" has no value\n", stages.Default(), nil},
	}
	for _, tc := range tests {
		sp, diags := spec.Parse("n.yaml", []byte(tc.src), spec.Options{Catalog: tc.cat, LookupEnv: noEnv})
		if got := diagText(diags); got != tc.want {
			t.Errorf("%s:\ngot\n%swant\n%s", tc.desc, got, tc.want)
			continue
		}
		if tc.check != nil && !tc.check(sp) {
			t.Errorf("%s: not decoded as absent", tc.desc)
		}
	}
}

// TestEmptyVariableIsAnError: a value that is only a variable set to
// nothing, written without a default, is an error rather than null: MEM=
// must not drop memory: ${MEM} to the default budget unseen; ${MEM:-} says
// absent on purpose.
func TestEmptyVariableIsAnError(t *testing.T) {
	const src = "version: 1\nname: t\nresources:\n  memory: %s\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: out, type: discard}\n"
	lookup := func(k string) (string, bool) { return "", k == "MEM" }
	for _, tc := range []struct{ value, want string }{
		{"${MEM}", "n.yaml:4:11: resources.memory: environment variable MEM is set but empty, which leaves the value empty (write ${MEM:-} to leave the key at its default, or ${MEM:-VALUE})\n"},
		{"${MEM:-}", ""},
	} {
		sp, diags := spec.Parse("n.yaml", []byte(fmt.Sprintf(src, tc.value)), spec.Options{Catalog: stages.Default(), LookupEnv: lookup})
		if got := diagText(diags); got != tc.want {
			t.Errorf("memory: %s with MEM empty:\ngot\n%swant\n%s", tc.value, got, tc.want)
		}
		if tc.want == "" && (sp == nil || sp.Resources.Memory != 0) {
			t.Errorf("memory: %s: not absent", tc.value)
		}
	}
}
