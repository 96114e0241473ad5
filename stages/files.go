package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/invopop/jsonschema"
	"go.yaml.in/yaml/v3"

	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// FilesConfig configures the files source.
type FilesConfig struct {
	Pattern  string          `yaml:"pattern" jsonschema_description:"Glob of input files, relative to the spec's directory; ** matches any number of directories."`
	Patterns spec.StringList `yaml:"patterns" jsonschema_description:"Several globs; their matches are merged and de-duplicated."`
	Shuffle  bool            `yaml:"shuffle" jsonschema_description:"Reshuffle the file order every epoch, from the seed."`
	Shard    Shard           `yaml:"shard" jsonschema_description:"auto (read the launcher's rank and world size) or {index, count}."`
	Labels   string          `yaml:"labels" jsonschema:"enum=from_dir" jsonschema_description:"from_dir adds label (index of the parent folder among sorted folder names) and class_name."`
}

// Shard selects this process's share of the files: file i (in sorted order)
// belongs to shard i mod count.
type Shard struct {
	Auto         bool
	Index, Count int
}

// UnmarshalNode reads "auto" or {index, count}.
func (s *Shard) UnmarshalNode(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*s = Shard{Auto: true}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected auto or {index: I, count: N}")
	}
	var v struct{ Index, Count *int }
	for i := 0; i+1 < len(n.Content); i += 2 {
		var x int
		if v := n.Content[i+1]; v.ShortTag() == "!!null" {
			return fmt.Errorf("shard.%s: expected an integer, got null", n.Content[i].Value)
		} else if v.ShortTag() != "!!int" {
			// yaml.v3 decodes 1.5 into an int as 1, in silence.
			return fmt.Errorf("shard.%s: expected an integer, got %s", n.Content[i].Value, v.Value)
		} else if err := v.Decode(&x); err != nil {
			return fmt.Errorf("shard.%s: expected an integer", n.Content[i].Value)
		}
		switch n.Content[i].Value {
		case "index":
			v.Index = &x
		case "count":
			v.Count = &x
		default:
			return fmt.Errorf("unknown field %q in shard (want index and count)", n.Content[i].Value)
		}
	}
	if v.Index == nil || v.Count == nil {
		return fmt.Errorf("shard needs both index and count")
	}
	if *v.Count < 1 || *v.Index < 0 || *v.Index >= *v.Count {
		return fmt.Errorf("shard index %d out of range for count %d", *v.Index, *v.Count)
	}
	*s = Shard{Index: *v.Index, Count: *v.Count}
	return nil
}

// JSONSchema describes "auto" or {index, count}.
func (Shard) JSONSchema() *jsonschema.Schema {
	props := jsonschema.NewProperties()
	props.Set("index", &jsonschema.Schema{Type: "integer", Minimum: "0"})
	props.Set("count", &jsonschema.Schema{Type: "integer", Minimum: "1"})
	return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
		{Type: "string", Enum: []any{"auto"}},
		{Type: "object", Properties: props, Required: []string{"index", "count"}, AdditionalProperties: jsonschema.FalseSchema},
	}}
}

// ShardFromEnv reads the rank and world size that common launchers set:
// torchrun (RANK, WORLD_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS), a
// Kubernetes Indexed Job (JOB_COMPLETION_INDEX with PIPERUN_SHARD_COUNT,
// since Kubernetes does not export the completion count), or piperun's own
// PIPERUN_SHARD_INDEX and PIPERUN_SHARD_COUNT. None set means one shard.
func ShardFromEnv(lookup func(string) (string, bool)) (index, count int, err error) {
	index, count, _, err = shardFromEnv(lookup)
	return index, count, err
}

// shardFromEnv is ShardFromEnv, also saying where it read the shard: the
// pair of variables, or "" if none was set.
func shardFromEnv(lookup func(string) (string, bool)) (index, count int, from string, err error) {
	pairs := [][2]string{
		{"PIPERUN_SHARD_INDEX", "PIPERUN_SHARD_COUNT"},
		{"RANK", "WORLD_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS"},
		{"JOB_COMPLETION_INDEX", "PIPERUN_SHARD_COUNT"},
	}
	for _, p := range pairs {
		is, ok1 := lookup(p[0])
		cs, ok2 := lookup(p[1])
		// The index variable decides: PIPERUN_SHARD_COUNT alone belongs to
		// the Kubernetes pair.
		if !ok1 {
			continue
		}
		if !ok2 {
			return 0, 0, "", fmt.Errorf("shard: auto: %s and %s must be set together", p[0], p[1])
		}
		i, err1 := strconv.Atoi(is)
		c, err2 := strconv.Atoi(cs)
		switch {
		case err1 != nil || i < 0:
			return 0, 0, "", fmt.Errorf("shard: auto: %s=%q is not a whole number from 0", p[0], is)
		case err2 != nil || c < 1:
			return 0, 0, "", fmt.Errorf("shard: auto: %s=%q is not a whole number from 1", p[1], cs)
		case i >= c:
			return 0, 0, "", fmt.Errorf("shard: auto: %s=%d must be below %s=%d (ranks count from 0)", p[0], i, p[1], c)
		}
		return i, c, p[0] + " and " + p[1], nil
	}
	// A world size of more than one without its rank is a launcher
	// misconfigured: read as one shard, every process would read every
	// file, each sample once per process and epoch. Not Slurm's: an
	// allocation's shell (salloc -n 4) exports SLURM_NTASKS, and only
	// srun sets SLURM_PROCID, so one process run there is one shard.
	for _, p := range [][2]string{{"PIPERUN_SHARD_INDEX or JOB_COMPLETION_INDEX", "PIPERUN_SHARD_COUNT"}, {"RANK", "WORLD_SIZE"}} {
		cs, ok := lookup(p[1])
		if !ok {
			continue
		}
		c, err := strconv.Atoi(cs)
		switch {
		case err != nil || c < 1:
			return 0, 0, "", fmt.Errorf("shard: auto: %s=%q is not a whole number from 1", p[1], cs)
		case c > 1:
			return 0, 0, "", fmt.Errorf("shard: auto: %s=%d is set but %s is not: without its rank every process would read every file (for one process reading every file, unset %s or write shard: {index: 0, count: 1})", p[1], c, p[0], p[1])
		}
	}
	return 0, 1, "", nil
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "files", Role: spec.RoleSource, Doc: "Lists files matching globs as {path}; shuffle, shard, labels from folders.",
			NewConfig: func() any { return &FilesConfig{} }},
		Build: buildFiles,
	})
}

func (c *FilesConfig) patterns() []string {
	var out []string
	if c.Pattern != "" {
		out = append(out, c.Pattern)
	}
	return append(out, c.Patterns...)
}

// Check implements spec.Checker.
func (c *FilesConfig) Check(cc *spec.CheckContext) sample.Schema {
	pats := c.patterns()
	if len(pats) == 0 {
		cc.Errorf("", "set pattern or patterns")
	}
	parents := map[string]bool{} // of every file matched, for labels: from_dir
	matched := map[string]bool{}
	for i, p := range pats {
		field := "pattern"
		if c.Pattern == "" || i > 0 {
			field = fmt.Sprintf("patterns[%d]", i-boolInt(c.Pattern != ""))
			if len(c.Patterns) == 1 && !cc.Has(field) {
				field = "patterns"
			}
		}
		if err := checkGlob(p); err != nil {
			cc.Errorf(field, "%v", err)
			continue
		}
		if cc.Environment {
			m, err := Glob(cc.Resolve(p))
			if err != nil {
				cc.Errorf(field, "%v", err)
			} else if len(m) == 0 {
				cc.Errorf(field, "%s", noMatch(p, cc.Resolve(p)))
			}
			// Only the label and shard warnings read them: a million
			// files need not be counted twice for nothing.
			if c.Labels == "from_dir" || c.Shard.Count > 1 {
				for _, f := range m {
					parents[filepath.Dir(f)] = true
					matched[f] = true
				}
			}
			if c.Labels == "from_dir" {
				if a, b, cls := sharedClass(m); cls != "" {
					cc.Warnf("labels", "%s", sharedClassWords(a, b, cls))
				}
				if n, root := rootFiles(cc.Resolve(p), m); n > 0 && n < len(m) {
					verb := "sit"
					if n == 1 {
						verb = "sits"
					}
					cc.Warnf("labels", "%d of the files matched %s directly in %s, beside its class folders, so labels: from_dir makes %q a class of its own; match the class folders' files only (root/*/*.jpg)", n, verb, root, filepath.Base(root))
				}
			}
			// A sink writing what this reads would replace the input. Only
			// a match with an output's name is resolved (a pattern may match
			// a million files).
			outputs := cc.Spec.Outputs()
			names := map[string]bool{}
			for o := range outputs {
				names[filepath.Base(o)] = true
			}
			for _, f := range m {
				if !names[filepath.Base(f)] {
					continue
				}
				if st, ok := outputs[spec.OutputKey(f)]; ok {
					cc.Errorf(field, "pattern %q matches %s, which stage %q writes", p, f, st)
					break
				}
			}
		}
	}
	if c.Labels == "from_dir" && len(matched) > 1 && len(parents) == 1 {
		for d := range parents {
			cc.Warnf("labels", "every file matched is in one folder, %s, so labels: from_dir gives all of them class 0 (%q): it names a file's class by its parent folder; match class folders (root/*/*.jpg)", d, filepath.Base(d))
		}
	}
	// Files are dealt to shards one by one: with fewer files than shards
	// some get none, and a rank without data leaves the others waiting in
	// a collective step. apply warns too; validate can say it first.
	if !c.Shard.Auto && c.Shard.Count > 1 && cc.Environment && len(matched) > 0 && c.Shard.Index >= len(matched) {
		cc.Warnf("shard", "shard %d of %d gets no files: the %d files matched all go to other shards (sharding is by file)", c.Shard.Index, c.Shard.Count, len(matched))
	}
	if !c.Shard.Auto && c.Shard.Count > 1 && cc.Environment && len(matched) > c.Shard.Index {
		if w := unevenShards(c.Shard.Index, c.Shard.Count, len(matched)); w != "" {
			cc.Warnf("shard", "%s", w)
		}
	}
	if c.Shard.Auto && cc.Environment {
		if _, _, err := ShardFromEnv(os.LookupEnv); err != nil {
			cc.Errorf("shard", "%v", err)
		}
	}
	fields := []sample.Field{{Name: "path", Type: sample.TString}}
	if c.Labels == "from_dir" {
		fields = append(fields, sample.Field{Name: "label", Type: sample.TInt}, sample.Field{Name: "class_name", Type: sample.TString})
	} else if c.Labels != "" {
		cc.Errorf("labels", "unknown labels mode %q (want from_dir)", c.Labels)
	}
	return sample.Schema{Fields: fields}
}

// noMatch says that pattern p, resolved to abs, matches no file, and why
// where it can tell: the folder it looks in is not there, or files match
// it but for case (*.jpeg against ImageNet's *.JPEG).
func noMatch(p, abs string) string {
	msg := fmt.Sprintf("pattern %q matches no file (resolved to %s)", p, abs)
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return msg + fmt.Sprintf("; it is a folder: match the files in it with %s", filepath.Join(p, "*"))
	}
	// Not with **: a folded folder name defeats the walk's literal
	// start, which would then be the root of the file system.
	if !strings.Contains(abs, "[") && !strings.Contains(abs, "**") {
		var fold strings.Builder
		for _, r := range abs {
			if lo, up := unicode.ToLower(r), unicode.ToUpper(r); lo != up {
				fold.WriteString("[" + string(lo) + string(up) + "]")
			} else {
				fold.WriteRune(r)
			}
		}
		if m, err := Glob(fold.String()); err == nil && len(m) > 0 {
			verb := "match"
			if len(m) == 1 {
				verb = "matches"
			}
			return msg + fmt.Sprintf("; %d %s it but for case, such as %s", len(m), verb, m[0])
		}
	}
	// The deepest folder named before any wildcard, and the file's.
	dir := filepath.Dir(abs)
	for strings.ContainsAny(dir, "*?[") {
		dir = filepath.Dir(dir)
	}
	if _, err := os.Stat(dir); err != nil {
		return msg + fmt.Sprintf("; folder %s does not exist", dir)
	}
	return msg
}

// rootFiles counts the files of m that sit in the folder pattern abs
// starts from, its path before the first wildcard (a README beside the
// class folders that root/** matches), and returns that folder.
func rootFiles(abs string, m []string) (int, string) {
	root := abs
	for strings.ContainsAny(root, "*?[") {
		root = filepath.Dir(root)
	}
	if root == abs {
		return 0, root
	}
	n := 0
	for _, f := range m {
		if filepath.Dir(f) == root {
			n++
		}
	}
	return n, root
}

// sharedClass returns two folders of files that share a name, and the
// name, or "" when every class name comes from one folder.
func sharedClass(files []string) (a, b, class string) {
	dirs := map[string]string{}
	for _, f := range files {
		d := filepath.Dir(f)
		cls := filepath.Base(d)
		if prev, ok := dirs[cls]; ok && prev != d {
			return prev, d, cls
		}
		dirs[cls] = d
	}
	return "", "", ""
}

// sharedClassWords says that two folders make one class.
func sharedClassWords(a, b, class string) string {
	return fmt.Sprintf("folders %s and %s both give class %q: labels: from_dir names a file's class by its parent folder, so they are one class; match the class folders themselves (root/*/*.jpg)", a, b, class)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

type filesSource struct {
	env     *Env
	cfg     *FilesConfig
	files   []string
	labels  map[string]int
	classes []string
	order   []string
	i       int
	epoch   int
}

func buildFiles(env *Env, cfg any) (any, error) {
	c := cfg.(*FilesConfig)
	seen := map[string]bool{}
	var all []string
	for _, p := range c.patterns() {
		m, err := Glob(env.Resolve(p))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, errors.New(noMatch(p, env.Resolve(p)))
		}
		for _, f := range m {
			if !seen[f] {
				seen[f] = true
				all = append(all, f)
			}
		}
	}
	sort.Strings(all)
	fs := &filesSource{env: env, cfg: c}
	if c.Labels == "from_dir" {
		// Classes come from every matched file, before sharding, so that all
		// shards agree on the label of a folder.
		fs.labels = map[string]int{}
		for _, f := range all {
			fs.labels[filepath.Base(filepath.Dir(f))] = 0
		}
		for k := range fs.labels {
			fs.classes = append(fs.classes, k)
		}
		if a, b, cls := sharedClass(all); cls != "" {
			env.Log.Warn(sharedClassWords(a, b, cls))
		}
		sort.Strings(fs.classes)
		for i, k := range fs.classes {
			fs.labels[k] = i
		}
	}
	index, count := c.Shard.Index, c.Shard.Count
	from := ""
	if c.Shard.Auto {
		var err error
		if index, count, from, err = shardFromEnv(os.LookupEnv); err != nil {
			return nil, err
		}
	}
	if count <= 1 {
		fs.files = all
	} else {
		for i, f := range all {
			if i%count == index {
				fs.files = append(fs.files, f)
			}
		}
		if len(fs.files) == 0 && env.Log != nil {
			// A rank without data ends at once while the others train, and
			// a collective step then waits for it forever: say so.
			env.Log.Warn(fmt.Sprintf("shard %d of %d has no files: the %d files matched all go to other shards; this process emits no samples", index, count, len(all)))
		} else if w := unevenShards(index, count, len(all)); w != "" && env.Log != nil {
			env.Log.Warn(w)
		}
	}
	if c.Shard.Auto && env.Log != nil {
		// Which launcher variables decided, or that none did: a job
		// whose every rank reads every file would otherwise look fine.
		if from == "" {
			from = "none of PIPERUN_SHARD_INDEX, RANK, SLURM_PROCID or JOB_COMPLETION_INDEX is set, so one shard"
		}
		env.Log.Info(fmt.Sprintf("shard: auto: this process reads shard %d of %d (%s): %d of the %d files matched", index, max(count, 1), from, len(fs.files), len(all)))
	}
	return fs, nil
}

func (f *filesSource) Open(_ context.Context, epoch int) error {
	f.order = append(f.order[:0], f.files...)
	if f.cfg.Shuffle {
		r := stageRand(f.env.Seed, f.env.Stage.Name, epoch)
		r.Shuffle(len(f.order), func(i, j int) { f.order[i], f.order[j] = f.order[j], f.order[i] })
	}
	f.i, f.epoch = 0, epoch
	return nil
}

func (f *filesSource) Next(context.Context) (*sample.Sample, error) {
	if f.i >= len(f.order) {
		return nil, io.EOF
	}
	p := f.order[f.i]
	s := &sample.Sample{ID: int64(f.i), Epoch: f.epoch, Origin: p, Fields: map[string]any{"path": p}}
	if f.labels != nil {
		cls := filepath.Base(filepath.Dir(p))
		s.Fields["label"] = int64(f.labels[cls])
		s.Fields["class_name"] = cls
	}
	f.i++
	return s, nil
}

func checkGlob(p string) error {
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if seg == "**" {
			continue
		}
		if _, err := filepath.Match(seg, ""); err != nil {
			return fmt.Errorf("bad pattern %q: %w", p, err)
		}
	}
	return nil
}

// Glob returns the files matching pattern, where a "**" segment matches
// any number of directories. Directories themselves are not returned.
func Glob(pattern string) ([]string, error) {
	if err := checkGlob(pattern); err != nil {
		return nil, err
	}
	if !strings.Contains(pattern, "**") {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, err
		}
		return regularFiles(m), nil
	}
	// Walk from the longest prefix without wildcards.
	segs := strings.Split(filepath.ToSlash(pattern), "/")
	root := []string{}
	for _, s := range segs {
		if strings.ContainsAny(s, "*?[") {
			break
		}
		root = append(root, s)
	}
	base := strings.Join(root, "/")
	if base == "" {
		base = "."
		if strings.HasPrefix(pattern, "/") {
			base = "/"
		}
	}
	rest := segs[len(root):]
	var out []string
	err := filepath.WalkDir(filepath.FromSlash(base), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == filepath.FromSlash(base) && os.IsNotExist(err) {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(filepath.FromSlash(base), p)
		if matchSegs(rest, strings.Split(filepath.ToSlash(rel), "/")) {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	// As with a plain pattern, only what opens as a regular file: not a
	// broken symlink, which the walk lists like a file.
	return regularFiles(out), err
}

func regularFiles(m []string) []string {
	out := m[:0]
	for _, p := range m {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	return out
}

func matchSegs(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchSegs(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, _ := filepath.Match(pat[0], name[0])
	return ok && matchSegs(pat[1:], name[1:])
}

// unevenShards says how files that do not divide by count fall to the
// shards, or "" when they divide: ranks that read fewer files see fewer
// samples an epoch, and in a job whose ranks step together (DDP) the
// longer ones then wait for a step the shorter never take.
func unevenShards(index, count, files int) string {
	if count <= 1 || files%count == 0 {
		return ""
	}
	more := files % count
	mine := files / count
	if index < more {
		mine++
	}
	first := fmt.Sprintf("shards 0 to %d get", more-1)
	if more == 1 {
		first = "shard 0 gets"
	}
	return fmt.Sprintf("the %d files matched do not divide into %d shards: %s %s, the others %d (this one, %d: %d), so the ranks see different numbers of samples an epoch, and ranks that step together (DDP) wait at the end for the shorter ones; match a multiple of %d files, or end every rank's epoch at the same count with a take",
		files, count, first, plural(files/count+1, "file"), files/count, index, mine, count)
}

// plural writes n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
