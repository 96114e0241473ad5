package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.Counter         = (*FilesConfig)(nil)
	_ plan.OriginSizer     = (*FilesConfig)(nil)
	_ spec.Checker         = (*FilesConfig)(nil)
	_ spec.NodeUnmarshaler = (*Shard)(nil)
	_ Source               = (*filesSource)(nil)
)

// FilesConfig configures the files source.
type FilesConfig struct {
	Pattern  string          `yaml:"pattern" jsonschema_description:"Glob of input files, relative to the spec's directory; ** matches any number of directories."`
	Patterns spec.StringList `yaml:"patterns" jsonschema_description:"Several globs; their matches are merged and de-duplicated."`
	Shuffle  bool            `yaml:"shuffle" jsonschema_description:"Reshuffle the file order every epoch, from the seed."`
	Shard    Shard           `yaml:"shard" jsonschema_description:"auto (read the launcher's rank and world size) or {index, count}."`
	Labels   string          `yaml:"labels" jsonschema:"enum=from_dir" jsonschema_description:"from_dir labels as torchvision's ImageFolder: class_name is the folder directly below the pattern's root (its path before the first wildcard) that holds the file, at any depth; label is its index among all the folders there (of every pattern's root, with several), sorted by code point (Zebra before apple). A class folder with no file matched, or a pattern whose files all sit in its root, is an error; files directly in the root beside class folders are left out, with a warning."`

	// files is how many files this process reads an epoch, as Check
	// found them on the machine; -1 when it did not look. longest is the
	// longest path among them.
	files, longest int64
	// first is the first file the first pattern matched, as Check found
	// it, or "": a tfrecord stage below checks its compression.
	first string
	// shardWarned says Check warned of this process's shard (empty, or
	// unlike the others), which the run then does not say again.
	shardWarned bool
}

// EpochSamples implements plan.Counter: one sample a file.
func (c *FilesConfig) EpochSamples(int64) int64 { return c.files }

// OriginBytes implements plan.OriginSizer: the longest path matched, which
// each sample carries as its origin; -1 where the files are not known.
func (c *FilesConfig) OriginBytes() int64 {
	if c.files < 0 {
		return -1
	}
	return c.longest
}

// filesOf counts the distinct files the patterns matched; matched holds
// them already where the shard checks filled it.
func filesOf(byPattern []labelPattern, matched map[string]bool) int64 {
	if len(byPattern) == 1 {
		return int64(len(byPattern[0].files))
	}
	if len(matched) == 0 {
		for _, b := range byPattern {
			for _, f := range b.files {
				matched[f] = true
			}
		}
	}
	return int64(len(matched))
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "files", Role: spec.RoleSource, Doc: "Lists files matching globs as {path}; shuffle, shard, labels from folders.",
			NewConfig: func() any { return &FilesConfig{} }},
		Build: buildFiles,
	})
}

// tempName is the name of an output being written aside (createAtomic):
// .NAME.tmp-PID-RANDOM.
var tempName = regexp.MustCompile(`^\..+\.tmp-[0-9]+-[0-9]+$`)

// filesGlob is Glob less the temporary files of unfinished piperun
// writes, which it returns apart: after a kill -9 a pattern such as
// out/*.rec* read a writer's partial shards as data, their cut tails
// counted as damage.
func filesGlob(pattern string) (files, temps []string, err error) {
	m, err := Glob(pattern)
	files = m[:0]
	for _, f := range m {
		if tempName.MatchString(filepath.Base(f)) {
			temps = append(temps, f)
		} else {
			files = append(files, f)
		}
	}
	return files, temps, err
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
	c.files = -1
	c.first = ""
	c.shardWarned = false
	matched := map[string]bool{}
	// This process's shard, for the shard warnings; shard: auto's from
	// its launcher's variables.
	shardIndex, shardCount := c.Shard.Index, c.Shard.Count
	if c.Shard.Auto {
		if i, n, err := ShardFromEnv(os.LookupEnv); err == nil {
			shardIndex, shardCount = i, n
		}
	}
	// Each pattern's matches, for labels: from_dir, which is not checked
	// once a pattern fails (that is said already).
	var byPattern []labelPattern
	labelsOK := c.Labels == "from_dir" && cc.Environment
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
			labelsOK = false
			continue
		}
		if cc.Environment {
			m, temps, err := filesGlob(cc.ResolvePattern(p))
			if len(temps) > 0 {
				cc.Warnf(field, "pattern %q matches %d %s of an unfinished piperun write (such as %s), passed over: a run stopped by kill -9 leaves them, and the next run writing there removes them", p, len(temps), oneOrMany(len(temps), "temporary file", "temporary files"), temps[0])
			}
			if err != nil {
				cc.Errorf(field, "%v", err)
			} else if len(m) == 0 {
				cc.Errorf(field, "%s", noMatch(p, cc.Spec.Dir))
			} else if msg := unreadable(m); msg != "" {
				// A warning: a run whose stages skip errors reads on past
				// them, as it did before validate looked, and a path manifest
				// never opens them.
				cc.Warnf(field, "pattern %q %s: reading one fails the run unless the stage that reads it has on_error: skip", p, msg)
			}
			labelsOK = labelsOK && err == nil && len(m) > 0
			if c.first == "" && len(m) > 0 {
				c.first = m[0]
			}
			byPattern = append(byPattern, labelPattern{pattern: p, abs: cc.ResolvePattern(p), files: m})
			// Only the shard warnings read them: a million files need
			// not be counted twice for nothing.
			if shardCount > 1 {
				for _, f := range m {
					matched[f] = true
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
			clash := false
			for _, f := range m {
				if !names[filepath.Base(f)] {
					continue
				}
				if st, ok := outputs[spec.OutputKey(f)]; ok {
					cc.Errorf(field, "pattern %q matches %s, which stage %q writes", p, f, st)
					clash = true
					break
				}
			}
			// An output not written yet, which the next run would read
			// (the first run passed, and every later
			// one was refused).
			for _, o := range slices.Sorted(maps.Keys(outputs)) {
				if clash || strings.Contains(o, "://") {
					continue
				}
				if isCacheStage(cc.Spec, outputs[o]) {
					// A cache's folder is no file the pattern lists, but
					// the files a cache keeps in it are: the next run read
					// Badger's tables as its input.
					fp := filepath.Join(o, "0123456789abcdef")
					if globMatches(cc.ResolvePattern(p), filepath.Join(fp, "manifest.json")) || globMatches(cc.ResolvePattern(p), filepath.Join(fp, "badger", "000001.sst")) {
						cc.Errorf(field, "pattern %q would match the files that stage %q keeps in its folder %s (FINGERPRINT/manifest.json and Badger's tables): the next run would read the cache as input; put the cache's dir outside what the pattern matches", p, outputs[o], o)
						break
					}
					continue
				}
				if !globMatches(cc.ResolvePattern(p), o) {
					continue
				}
				cc.Errorf(field, "pattern %q would match %s, which stage %q writes: the next run would read this one's output", p, o, outputs[o])
				break
			}
		}
	}
	if labelsOK && len(pats) > 0 {
		fl, problems := imageFolder(byPattern)
		for _, pr := range problems {
			if pr.err {
				cc.Errorf("labels", "%s", pr.msg)
			} else {
				cc.Warnf("labels", "%s", pr.msg)
			}
		}
		// The files left out (those in a pattern's root) are no shard's.
		if shardCount > 1 {
			matched = map[string]bool{}
			for _, f := range fl.files {
				matched[f] = true
			}
		}
		c.files = int64(len(fl.files))
	} else if cc.Environment && len(byPattern) == len(pats) && c.Labels == "" {
		c.files = filesOf(byPattern, matched)
	}
	if c.files >= 0 {
		for _, b := range byPattern {
			for _, f := range b.files {
				c.longest = max(c.longest, int64(len(f)))
			}
		}
	}
	if c.files >= 0 {
		// This process's share: file i is shard i mod count's.
		index, count := c.Shard.Index, c.Shard.Count
		if c.Shard.Auto {
			var err error
			if index, count, err = ShardFromEnv(os.LookupEnv); err != nil {
				c.files = -1
			}
		}
		if count > 1 && c.files >= 0 {
			c.files = max(0, (c.files-int64(index)+int64(count)-1)/int64(count))
		}
	}
	// Files are dealt to shards one by one: with fewer files than shards
	// some get none, and a rank without data leaves the others waiting in
	// a collective step. apply warns too; validate can say it first.
	index, count := shardIndex, shardCount
	if count > 1 && cc.Environment && len(matched) > 0 && index >= len(matched) {
		cc.Warnf("shard", "%s", emptyShard(index, count, len(matched)))
		c.shardWarned = true
	} else if count > 1 && cc.Environment && len(matched) > 0 && !evenedByTake(cc.Stage, len(matched)/count) {
		if w := unevenShards(index, count, len(matched)); w != "" {
			cc.Warnf("shard", "%s", w)
			c.shardWarned = true
		}
	}
	if c.Shard.Auto && cc.Environment {
		if _, _, err := ShardFromEnv(os.LookupEnv); err != nil {
			cc.Errorf("shard", "%v", err)
		}
	}
	if c.Shard == (Shard{}) && cc.Environment {
		// As DistributedSampler left out of a DataLoader: every process
		// a launcher started reads every file.
		if _, n, from, err := shardFromEnv(os.LookupEnv); err == nil && n > 1 {
			cc.Warnf("", "%s say this is one of %d processes, but files has no shard: each reads every file, so every sample comes %d times an epoch; write shard: auto", from, n, n)
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

type filesSource struct {
	env     *Env
	cfg     *FilesConfig
	files   []string
	labels  []int32  // files[i]'s label, nil without labels
	classes []string // label to class name
	order   []int32  // this epoch's order, indices into files
	i       int
	epoch   int
}

func buildFiles(env *Env, cfg any) (any, error) {
	c := cfg.(*FilesConfig)
	seen := map[string]bool{}
	var all []string
	var byPattern []labelPattern
	for _, p := range c.patterns() {
		if err := checkGlob(p); err != nil {
			return nil, err
		}
		abs := env.ResolvePattern(p)
		m, _, err := filesGlob(abs)
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, errors.New(noMatch(p, env.Spec.Dir))
		}
		byPattern = append(byPattern, labelPattern{pattern: p, abs: abs, files: m})
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
		fl, problems := imageFolder(byPattern)
		var errs []error
		for _, pr := range problems {
			if pr.err {
				errs = append(errs, errors.New("labels: from_dir: "+pr.msg))
			} else if env.Log != nil {
				env.Log.Warn("labels: from_dir: " + pr.msg)
			}
		}
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		all, fs.labels, fs.classes = fl.files, fl.labels, fl.classes
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
		var labels []int32
		for i, f := range all {
			if i%count == index {
				fs.files = append(fs.files, f)
				if fs.labels != nil {
					labels = append(labels, fs.labels[i])
				}
			}
		}
		if fs.labels != nil {
			fs.labels = labels
			if labels == nil {
				fs.labels = []int32{} // still labelled
			}
		}
		// Said once: validate (which apply runs) said it already where
		// it could list the files.
		if !c.shardWarned && env.Log != nil {
			if len(fs.files) == 0 {
				// A rank without data ends at once while the others train,
				// and a collective step then waits for it forever: say so.
				env.Log.Warn(emptyShard(index, count, len(all)))
			} else if w := unevenShards(index, count, len(all)); w != "" && !evenedByTake(env.Stage, len(all)/count) {
				env.Log.Warn(w)
			}
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
	f.order = f.order[:0]
	for i := range f.files {
		f.order = append(f.order, int32(i))
	}
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
	idx := f.order[f.i]
	p := f.files[idx]
	s := &sample.Sample{ID: int64(f.i), Epoch: f.epoch, Origin: p, Fields: map[string]any{"path": p}}
	if f.labels != nil {
		l := f.labels[idx]
		s.Fields["label"] = int64(l)
		s.Fields["class_name"] = f.classes[l]
	}
	f.i++
	return s, nil
}

// isCacheStage reports whether the stage named name is a cache, whose
// output is a folder.
func isCacheStage(sp *spec.Spec, name string) bool {
	for _, st := range sp.Stages {
		if st.Name == name {
			_, ok := st.Config.(*CacheConfig)
			return ok
		}
	}
	return false
}

// plural writes n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// JSONSchemaExtend asks for pattern or a list of at least one pattern, as
// Check does.
func (FilesConfig) JSONSchemaExtend(s *jsonschema.Schema) {
	pattern := jsonschema.NewProperties()
	pattern.Set("pattern", &jsonschema.Schema{Type: "string", MinLength: atLeast(1)})
	patterns := jsonschema.NewProperties()
	patterns.Set("patterns", &jsonschema.Schema{MinItems: atLeast(1)})
	s.AnyOf = []*jsonschema.Schema{
		{Required: []string{"pattern"}, Properties: pattern},
		{Required: []string{"patterns"}, Properties: patterns},
	}
}
