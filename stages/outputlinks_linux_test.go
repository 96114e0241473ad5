package stages

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputsThroughLinks: a sink writes through a link, so an output
// path that is a link to another sink's output, to the spec, or to an
// input the run reads is refused as that file named directly is. Each
// passed validate, and the run exited 0 having replaced the other
// output's lines, the spec, or its own input.
func TestOutputsThroughLinks(t *testing.T) {
	for _, tc := range []struct {
		name, link, to, stages, want string
	}{
		{"another sink's", "out/b.jsonl", "a.jsonl",
			"  - {name: src, type: range, count: 10}\n  - {name: a, type: write_jsonl, path: out/a.jsonl}\n  - {name: t, type: take, count: 3, input: src}\n  - {name: b, type: write_jsonl, path: out/b.jsonl}\n",
			`stages[3]: writes DIR/out/b.jsonl (a link to DIR/out/a.jsonl), which stage "a" writes too`},
		{"the spec", "out/s.jsonl", "../s.yaml",
			"  - {name: src, type: range, count: 10}\n  - {name: a, type: write_jsonl, path: out/s.jsonl}\n",
			`stages[1]: writes DIR/out/s.jsonl (a link to DIR/s.yaml), the spec itself`},
		{"a name the pattern matches", "out/o.jsonl", "../elsewhere.jsonl",
			"  - {name: f, type: files, pattern: 'out/*.jsonl'}\n  - {name: r, type: jsonl}\n  - {name: o, type: write_jsonl, path: out/o.jsonl}\n",
			`stages[0].pattern: pattern "out/*.jsonl" matches DIR/out/o.jsonl, which stage "o" writes`},
		// Two shards of one set through a link to one file: the last
		// renamed replaced the other (a re-test: shard 0's records lost,
		// exit 0).
		{"another shard", "out/s-00001-of-00003.tfrecord", "s-00000-of-00003.tfrecord",
			"  - {name: src, type: range, count: 10}\n  - {name: o, type: write_tfrecord, path: 'out/s-{shard}-of-{shards}.tfrecord', shards: 3}\n",
			`stages[1].path: shard 1, DIR/out/s-00001-of-00003.tfrecord, is a link to DIR/out/s-00000-of-00003.tfrecord, which shard 0 writes: one would replace the other`},
		{"its input", "out/o.jsonl", "../in.jsonl",
			"  - {name: f, type: files, pattern: in.jsonl}\n  - {name: r, type: jsonl}\n  - {name: o, type: write_jsonl, path: out/o.jsonl}\n",
			`stages[0].pattern: pattern "in.jsonl" matches DIR/in.jsonl, which stage "o" writes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{"in.jsonl", "elsewhere.jsonl"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("{\"x\": 1}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(dir, "out"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tc.to, filepath.Join(dir, tc.link)); err != nil {
				t.Skip("no symlinks here:", err)
			}
			src := "version: 1\nname: l\nstages:\n" + tc.stages
			got := checkErrors(dir, src)
			if want := strings.ReplaceAll(tc.want, "DIR", dir); strings.Join(got, "\n") != want {
				t.Errorf("got %q\nwant %q", got, want)
			}
		})
	}
}
