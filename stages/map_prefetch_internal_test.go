package stages

import (
	"slices"
	"testing"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// buildFilesMap builds the map of files → map(set) → discard, with cached
// as its Env.Cached.
func buildFilesMap(t *testing.T, set string, cached func(*sample.Sample) bool) *mapStage {
	t.Helper()
	src := "version: 1\nname: t\nstages:\n  - {name: f, type: files, pattern: '*.png'}\n  - {name: m, type: map, set: " + set + "}\n  - {name: out, type: discard}\n"
	sp, diags := spec.Parse("t.yaml", []byte(src), spec.Options{Catalog: Default()})
	if diags.HasErrors() {
		t.Fatalf("%s: %v", set, diags)
	}
	st := sp.Stages[1]
	impl, err := buildMap(&Env{Spec: sp, Stage: st, Cached: cached}, st.Config)
	if err != nil {
		t.Fatalf("%s: %v", set, err)
	}
	return impl.(*mapStage)
}

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
		if got := buildFilesMap(t, tc.set, nil).files; !slices.Equal(got, tc.want) {
			t.Errorf("%s: the map prefetches %q, want %q", tc.set, got, tc.want)
		}
	}
}

// TestMapPrefetchSkipsCachedSamples: the files of samples a cache below
// already holds are not read ahead (the map will not read them), nor
// paths that are not strings.
func TestMapPrefetchSkipsCachedSamples(t *testing.T) {
	m := buildFilesMap(t, `{b: 'read_file(path)'}`, func(s *sample.Sample) bool { return s.ID == 1 })
	var ss []*sample.Sample
	for i, p := range []any{"a.png", "b.png", "c.png", 7} {
		s := sample.New(int64(i), 0, "")
		s.Fields["path"] = p
		ss = append(ss, s)
	}
	if got, want := m.paths(ss), []string{"a.png", "c.png"}; !slices.Equal(got, want) {
		t.Errorf("paths = %q, want %q", got, want)
	}
	if m.Prefetch(ss[1:2]) != nil {
		t.Error("Prefetch of a cached sample returned work")
	}
}
