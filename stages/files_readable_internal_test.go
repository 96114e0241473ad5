package stages

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/piperun/piperun/spec"
)

// TestFilesSaysWhatCannotBeRead: validate warns of a pattern that matches
// files this process cannot read, as DESIGN.md's validate promises, naming
// how many and the first (a warning: under on_error: skip the run reads on
// past them); a folder it cannot list says so rather than only "matches
// no file" (both passed validate without a word). Root reads a
// file of mode 000, so the files are refused by a stand-in for access(2)
// first; then the real modes are tried, on a thread that is another user
// where the test runs as root.
func TestFilesSaysWhatCannotBeRead(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"one/a.jpg", "one/b.jpg", "two/a.jpg", "two/b.jpg", "two/c.jpg", "priv/data/a.jpg", "srch/a/b/c/x.jpg", "ns/sub/x.jpg"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(pattern, want string) {
		t.Helper()
		src := fmt.Sprintf("version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '%s'}\n  - {name: out, type: discard}\n", pattern)
		_, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		var got []string
		for _, d := range diags {
			got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
		}
		if strings.Join(got, "\n") != want {
			t.Errorf("%s:\n got %q\nwant %q", pattern, got, want)
		}
	}
	const skipTail = ": reading one fails the run unless the stage that reads it has on_error: skip"
	real := readable
	t.Cleanup(func() { readable = real })
	readable = func(path string) error {
		if strings.HasSuffix(path, "b.jpg") || strings.HasSuffix(path, "c.jpg") {
			return fs.ErrPermission
		}
		return real(path)
	}
	check("one/*.jpg", `warning: stages[0].pattern: pattern "one/*.jpg" matches a file this process cannot read: read `+filepath.Join(dir, "one/b.jpg")+`: permission denied`+skipTail)
	check("two/*.jpg", `warning: stages[0].pattern: pattern "two/*.jpg" matches 2 files this process cannot read; the first: read `+filepath.Join(dir, "two/b.jpg")+`: permission denied`+skipTail)
	check("one/a.jpg", ``)
	readable = real

	if runtime.GOOS == "windows" {
		t.Skip("no Unix file modes here")
	}
	realModes := func(fn func()) { fn() }
	if os.Geteuid() == 0 {
		// The two folders t.TempDir made must let that user through, and
		// the ones above them must already: none of those is changed.
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		var through error
		if !asUser(t, 65534, func() { _, through = os.ReadDir(dir) }) {
			t.Skip("the real modes need a user other than root, and this process cannot become one")
		}
		if through != nil {
			t.Skipf("the real modes run as user 65534, who cannot reach the test's folder: %v", through)
		}
		realModes = func(fn func()) {
			if !asUser(t, 65534, fn) {
				t.Skip("the real modes need a user other than root, and this process cannot become one")
			}
		}
	}
	if err := os.Chmod(filepath.Join(dir, "one/b.jpg"), 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "two"), 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "two"), 0o755) })
	if err := os.Chmod(filepath.Join(dir, "one"), 0o644); err != nil {
		t.Fatal(err)
	}
	realModes(func() {
		check("one/*.jpg", `stages[0].pattern: pattern "one/*.jpg" matches no file (resolved to `+filepath.Join(dir, "one/*.jpg")+`); folder `+filepath.Join(dir, "one")+` lists 2 names but none can be looked up (permission denied): it needs execute (search) permission`)
	})
	if err := os.Chmod(filepath.Join(dir, "one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "priv"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Searched but not listed, after a wildcard, as the shell reads it:
	// filepath.Glob listed b to find c, and matched nothing.
	if err := os.Chmod(filepath.Join(dir, "srch/a/b"), 0o711); err != nil {
		t.Fatal(err)
	}
	// Listed but not searched, above a ** walk: the error named the
	// folder below it that the walk could not open.
	if err := os.Chmod(filepath.Join(dir, "ns"), 0o644); err != nil {
		t.Fatal(err)
	}
	realModes(func() {
		check("srch/a/*/c/*.jpg", "")
		check("ns/**/*.jpg", `stages[0].pattern: folder `+filepath.Join(dir, "ns")+` needs execute (search) permission for this process: permission denied`)
		check("priv/data/*.jpg", `stages[0].pattern: pattern "priv/data/*.jpg" matches no file (resolved to `+filepath.Join(dir, "priv/data/*.jpg")+`); folder `+filepath.Join(dir, "priv/data")+` cannot be reached: `+filepath.Join(dir, "priv")+` needs execute (search) permission for this process`)
		check("one/*.jpg", `warning: stages[0].pattern: pattern "one/*.jpg" matches a file this process cannot read: read `+filepath.Join(dir, "one/b.jpg")+`: permission denied`+skipTail)
		check("two/*.jpg", `stages[0].pattern: pattern "two/*.jpg" matches no file (resolved to `+filepath.Join(dir, "two/*.jpg")+`); folder `+filepath.Join(dir, "two")+` cannot be read: permission denied`)
	})
}

// TestFilesWithoutShardUnderALauncher: a files stage with no shard, in a
// process a launcher says is one of several, is warned of: each would
// read every sample (a new-user test read 140 samples in each of 3 ranks
// without a word).
func TestFilesWithoutShardUnderALauncher(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} { // one for each of the 3 ranks
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "3")
	for shard, want := range map[string]string{
		"":                              "warning: stages[0]: RANK and WORLD_SIZE say this is one of 3 processes, but files has no shard: each reads every file, so every sample comes 3 times an epoch; write shard: auto",
		", shard: auto":                 "",
		", shard: {index: 0, count: 1}": "",
	} {
		src := "version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '*.jsonl'" + shard + "}\n  - {name: out, type: discard}\n"
		_, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		var got []string
		for _, d := range diags {
			got = append(got, strings.SplitN(d.String(), ": ", 2)[1])
		}
		if strings.Join(got, "\n") != want {
			t.Errorf("shard %q:\n got %q\nwant %q", shard, got, want)
		}
	}
}

// TestShardedRunsWriteApart: N processes running one sharded spec each
// write a sink's path; where it is the same in every process (not read
// from the environment nor given by --set) validate warns that the last
// replaces the others' output (a new-user test lost 60 of 140 samples).
func TestShardedRunsWriteApart(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} { // one for each of the 3 ranks
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "3")
	t.Setenv("PIPERUN_TEST_OUT", "out")
	t.Setenv("LOCAL_RANK", "1")
	t.Setenv("SLURM_PROCID", "")
	const warn = "warning: stages[1].path: RANK and WORLD_SIZE say this is one of 3 processes, and each writes out/all.jsonl: the last to finish replaces the others' output; put the rank in the path (out/all-${RANK}.jsonl)"
	for _, tc := range []struct {
		shard, path string
		set         []string
		want        string
	}{
		{"auto", "out/all.jsonl", nil, warn},
		{"auto", "out/all-${RANK}.jsonl", nil, ""},
		// A variable read, but unset: its default is the same everywhere.
		{"auto", "${PIPERUN_TEST_UNSET:-out}/all.jsonl", nil, warn},
		{"auto", "out/all-${SLURM_PROCID:-x}.jsonl", nil, "warning: stages[1].path: RANK and WORLD_SIZE say this is one of 3 processes, and each writes out/all-x.jsonl: the last to finish replaces the others' output; put the rank in the path (out/all-x-${RANK}.jsonl)"},
		// Set, but no rank: a launcher's script may set it apart.
		{"auto", "${PIPERUN_TEST_OUT}/all.jsonl", nil, "warning: stages[1].path: RANK and WORLD_SIZE say this is one of 3 processes, and each writes out/all.jsonl (unless PIPERUN_TEST_OUT differs between them): the last to finish replaces the others' output; put the rank in the path (out/all-${RANK}.jsonl)"},
		{"auto", "${PIPERUN_TEST_OUT}/${RANK}.jsonl", nil, ""},
		// Set but empty: its default, the same everywhere.
		{"auto", "out/all-${SLURM_PROCID:-x}.jsonl", nil, "warning: stages[1].path: RANK and WORLD_SIZE say this is one of 3 processes, and each writes out/all-x.jsonl: the last to finish replaces the others' output; put the rank in the path (out/all-x-${RANK}.jsonl)"},
		// A local rank repeats on the next machine.
		{"auto", "out/p-${LOCAL_RANK}.jsonl", nil, "warning: stages[1].path: RANK and WORLD_SIZE say this is one of 3 processes, and the path's LOCAL_RANK repeats on every machine: processes on two machines write out/p-1.jsonl alike, and on shared storage the last to finish replaces the other's output; put the rank in the path instead (${RANK})"},
		{"auto", "out/all.jsonl", []string{"stages.out.path=out/r1.jsonl"}, ""},
		{"{index: 0, count: 2}", "out/all.jsonl", nil, `warning: stages[1].path: stage "f"'s shard says this is one of 2 processes, and each writes out/all.jsonl: the last to finish replaces the others' output; give each process a path of its own (--set stages.out.path=out/all-0.jsonl, as you set its shard)`},
		{"{index: 0, count: 1}", "out/all.jsonl", nil, ""},
	} {
		src := "version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '*.jsonl', shard: " + tc.shard + "}\n  - {name: out, type: write_jsonl, path: '" + tc.path + "'}\n"
		_, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true, Set: tc.set})
		var got []string
		for _, d := range diags {
			if s := d.String(); strings.Contains(s, "processes") {
				got = append(got, strings.SplitN(s, ": ", 2)[1])
			}
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("shard %s, path %s, set %v:\n got %q\nwant %q", tc.shard, tc.path, tc.set, got, tc.want)
		}
	}
	// On one machine a local rank is enough.
	t.Setenv("LOCAL_WORLD_SIZE", "3")
	src1 := "version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '*.jsonl', shard: auto}\n  - {name: out, type: write_jsonl, path: 'out/p-${LOCAL_RANK}.jsonl'}\n"
	if _, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src1), spec.Options{Catalog: Default(), Environment: true}); len(diags) != 0 {
		t.Errorf("a path with LOCAL_RANK, all 3 processes on this machine: %v", diags)
	}
	// A path that is an alias of a value reading the rank varies too.
	src := "x-out: &out 'out/part-${RANK}.jsonl'\nversion: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '*.jsonl', shard: auto}\n  - {name: out, type: write_jsonl, path: *out}\n"
	if _, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true}); len(diags) != 0 {
		t.Errorf("a path aliasing ${RANK}: %v", diags)
	}
}

// TestFilesCountsItsShare: validate counts the files this process reads
// an epoch (for the fit of an in-memory cache below): file i is shard
// i mod count's, patterns' matches counted once.
func TestFilesCountsItsShare(t *testing.T) {
	dir := t.TempDir()
	for i := range 7 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.jsonl", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		files string
		want  int64
	}{
		{"pattern: '*.jsonl'", 7},
		{"patterns: ['*.jsonl', 'f1.jsonl']", 7},
		{"pattern: '*.jsonl', shard: {index: 0, count: 3}", 3},
		{"pattern: '*.jsonl', shard: {index: 2, count: 3}", 2},
		{"pattern: '*.jsonl', shard: {index: 6, count: 8}", 1},
		{"pattern: '*.jsonl', shard: {index: 7, count: 8}", 0},
	} {
		src := "version: 1\nname: f\nstages:\n  - {name: f, type: files, " + tc.files + "}\n  - {name: out, type: discard}\n"
		sp, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tc.files, diags)
		}
		if got := sp.Stages[0].Config.(*FilesConfig).EpochSamples(-1); got != tc.want {
			t.Errorf("%s: %d files an epoch, want %d", tc.files, got, tc.want)
		}
	}
	// Without looking at the machine, unknown.
	sp, _ := spec.Parse(filepath.Join(dir, "f.yaml"), []byte("version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '*.jsonl'}\n  - {name: out, type: discard}\n"), spec.Options{Catalog: Default()})
	if got := sp.Stages[0].Config.(*FilesConfig).EpochSamples(-1); got != -1 {
		t.Errorf("with no environment: %d files, want -1", got)
	}
}

// TestCacheBelowRandomWarns: random functions above a cache are drawn
// once and replayed every epoch; validate says so (a new-user test found
// the same crops in every epoch, without a word).
func TestCacheBelowRandomWarns(t *testing.T) {
	const want = `warning: stages[2]: stage "aug" above this cache draws random numbers: the cache stores the first epoch's draws and replays them in every later epoch, so its augmentation is the same each epoch; move the random functions to a map below the cache`
	for set, warn := range map[string]bool{
		"'flip_left_right(decode_raw(\"abcdef\", \"uint8\", [1, 2, 3]), 0.5)'": true,
		"'one_hot(index % 3, 3)'": false,
	} {
		src := "version: 1\nname: c\nseed: 1\nepochs: 2\nstages:\n  - {name: r, type: range, count: 3}\n  - {name: aug, type: map, set: {x: " + set + "}}\n  - {name: c, type: cache}\n  - {name: out, type: discard}\n"
		_, diags := spec.Parse("c.yaml", []byte(src), spec.Options{Catalog: Default()})
		got := ""
		for _, d := range diags {
			got += strings.SplitN(d.String(), ": ", 2)[1]
		}
		if (got == want) != warn || !warn && got != "" {
			t.Errorf("%s:\n got %q\nwant %v %q", set, got, warn, want)
		}
		// One epoch held in memory is never replayed.
		one := strings.Replace(src, "epochs: 2", "epochs: 1", 1)
		if _, diags := spec.Parse("c.yaml", []byte(one), spec.Options{Catalog: Default()}); len(diags) != 0 {
			t.Errorf("%s, one epoch in memory: %v", set, diags)
		}
	}
}

// TestCacheBelowAnEndlessTakeWarns: in an endless run a cache with a take
// above it stores nothing (PassesThrough), and validate says so, in place
// of the warnings of what it would replay; with epochs set, or the take
// below the cache, it caches as usual.
func TestCacheBelowAnEndlessTakeWarns(t *testing.T) {
	const warn = `warning: stages[3]: this cache stores nothing: with epochs: 0 a take above it ends the stream after its count, which may span epochs, and a replay could not; put the take below the cache (after it, the take counts the replayed stream), or set epochs`
	for _, tc := range []struct{ epochs, order, want string }{
		{"0", "take, cache", warn},
		{"2", "take, cache", ""},
		{"0", "cache, take", ""},
	} {
		stagesOf := map[string]string{"take": "  - {name: t, type: take, count: 20}\n", "cache": "  - {name: c, type: cache, dir: cache}\n"}
		order := strings.Split(tc.order, ", ")
		src := "version: 1\nname: c\nseed: 1\nepochs: " + tc.epochs + "\nstages:\n  - {name: r, type: range, count: 7}\n  - {name: aug, type: map, set: {x: 'index * 2'}}\n" +
			stagesOf[order[0]] + stagesOf[order[1]] + "  - {name: out, type: discard}\n"
		sp, diags := spec.Parse("c.yaml", []byte(src), spec.Options{Catalog: Default()})
		got := ""
		for _, d := range diags {
			got += strings.SplitN(d.String(), ": ", 2)[1]
		}
		if got != tc.want {
			t.Errorf("epochs %s, %s:\n got %q\nwant %q", tc.epochs, tc.order, got, tc.want)
		}
		var c *spec.Stage
		for _, st := range sp.Stages {
			if st.Type == "cache" {
				c = st
			}
		}
		if PassesThrough(sp, c) != (tc.want != "") {
			t.Errorf("epochs %s, %s: PassesThrough %v", tc.epochs, tc.order, !(tc.want != ""))
		}
		// One that stores nothing reserves nothing, and holds no first
		// pass in memory (validate refused such a spec over a
		// first pass it would never hold).
		cfg := c.Config.(*CacheConfig)
		if through := tc.want != ""; (cfg.ReservedBytes(1<<30) == 0) != through {
			t.Errorf("epochs %s, %s: reserves %d", tc.epochs, tc.order, cfg.ReservedBytes(1<<30))
		}
		mem := CacheConfig{through: cfg.through}
		if got := mem.EpochShare(); (got == 0) != (tc.want != "") {
			t.Errorf("epochs %s, %s: in memory, holds a 1/%d share", tc.epochs, tc.order, got)
		}
	}
}

// TestShardedRunsServeApart: N processes running one sharded spec each
// listen at a serve sink's address; where it is the same in every process
// validate warns that on one machine only the first can listen there, and
// an address another process serves says why it matters (a new-user
// test's second rank was refused as an invalid spec, with no word of the
// rank).
func TestShardedRunsServeApart(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.jsonl", "b.jsonl", "c.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "3")
	t.Setenv("LOCAL_RANK", "1")
	ln, err := net.Listen("unix", filepath.Join(dir, "taken.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const from = "RANK and WORLD_SIZE say this is one of 3 processes, and each serves at "
	free, err := net.Listen("tcp", "127.0.0.1:0") // a port nothing listens on once closed
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(free.Addr().String())
	free.Close()
	for _, tc := range []struct {
		shard, listen string
		want          string
	}{
		{"auto", "unix://p.sock", "warning: stages[1].listen: " + from + "unix://p.sock: on one machine only the first can listen there, and the others are refused; put the rank in the address (unix://p-${RANK}.sock)"},
		{"auto", "unix://p-${RANK}.sock", ""},
		{"auto", "unix://p-${LOCAL_RANK}.sock", ""}, // a socket need only differ on one machine
		{"auto", "unix://p-${SLURM_PROCID:-0}.sock", "warning: stages[1].listen: " + from + "unix://p-0.sock: on one machine only the first can listen there, and the others are refused; put the rank in the address (unix://p-0-${RANK}.sock)"},
		{"auto", "tcp://127.0.0.1:" + port, "warning: stages[1].listen: " + from + "tcp://127.0.0.1:" + port + ": on one machine only the first can listen there, and the others are refused; give each process a port of its own (--set stages.out.listen=tcp://HOST:PORT from the launcher, a port a rank)"},
		{"auto", "tcp://127.0.0.1:0", ""}, // the system picks a port for each
		{"{index: 0, count: 2}", "unix://p.sock", `warning: stages[1].listen: stage "f"'s shard says this is one of 2 processes, and each serves at unix://p.sock: on one machine only the first can listen there, and the others are refused; give each process an address of its own (--set stages.out.listen=..., as you set its shard)`},
		{"auto", "unix://taken.sock", "stages[1].listen: another process serves at " + filepath.Join(dir, "taken.sock") + " (this is one of 3 processes: each needs an address of its own)\n" +
			"warning: stages[1].listen: " + from + "unix://taken.sock: on one machine only the first can listen there, and the others are refused; put the rank in the address (unix://taken-${RANK}.sock)"},
		{"{index: 0, count: 1}", "unix://p.sock", ""},
	} {
		src := "version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '*.jsonl', shard: " + tc.shard + "}\n  - {name: out, type: serve, listen: '" + tc.listen + "'}\n"
		_, diags := spec.Parse(filepath.Join(dir, "f.yaml"), []byte(src), spec.Options{Catalog: Default(), Environment: true})
		var got []string
		for _, d := range diags {
			if s := strings.SplitN(d.String(), ": ", 2)[1]; strings.Contains(s, "stages[1]") {
				got = append(got, s)
			}
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("shard %s, listen %s:\n got %q\nwant %q", tc.shard, tc.listen, got, tc.want)
		}
	}
}
