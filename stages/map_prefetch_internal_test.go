package stages

import (
	"slices"
	"testing"

	"github.com/piperun/piperun/spec"
)

// TestMapPrefetchesTheFilesItReads: a map has the files read ahead whose
// paths are fields of its input, not paths an earlier expression of the
// same map makes.
func TestMapPrefetchesTheFilesItReads(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{`{img: 'decode_image(read_file(path), 3) | resize(8, 8)'}`, []string{"path"}},
		{`{b: 'read_file(path)', n: 'len(read_file(path))'}`, []string{"path"}},
		{`{p: 'path + ".x"', b: 'read_file(p)'}`, nil},
		{`{n: 'len(path)'}`, nil},
	} {
		src := "version: 1\nname: t\nstages:\n  - {name: f, type: files, pattern: '*.png'}\n  - {name: m, type: map, set: " + tc.set + "}\n  - {name: out, type: discard}\n"
		sp, diags := spec.Parse("t.yaml", []byte(src), spec.Options{Catalog: Default()})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tc.set, diags)
		}
		st := sp.Stages[1]
		impl, err := buildMap(&Env{Spec: sp, Stage: st}, st.Config)
		if err != nil {
			t.Fatalf("%s: %v", tc.set, err)
		}
		if got := impl.(*mapStage).files; !slices.Equal(got, tc.want) {
			t.Errorf("%s: the map prefetches %q, want %q", tc.set, got, tc.want)
		}
	}
}
