package stages

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/invopop/jsonschema"
	"go.yaml.in/yaml/v3"

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
	// Each problem at its key or value, not at the mapping's start.
	at := func(n *yaml.Node, format string, args ...any) error {
		return &spec.NodeError{Node: n, Err: fmt.Errorf(format, args...)}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		var x int
		k := n.Content[i]
		if k.Value != "index" && k.Value != "count" {
			return at(k, "unknown field %q in shard (want index and count)", k.Value)
		}
		if v := n.Content[i+1]; v.ShortTag() == "!!null" {
			return at(v, "shard.%s: expected an integer, got null", k.Value)
		} else if v.ShortTag() != "!!int" {
			// yaml.v3 decodes 1.5 into an int as 1, in silence.
			return at(v, "shard.%s: expected an integer, got %s", k.Value, v.Value)
		} else if err := v.Decode(&x); err != nil {
			return at(v, "shard.%s: expected an integer", k.Value)
		}
		if k.Value == "index" {
			v.Index = &x
		} else {
			v.Count = &x
		}
	}
	if v.Index == nil || v.Count == nil {
		return fmt.Errorf("shard needs both index and count")
	}
	if *v.Count < 1 {
		return fmt.Errorf("shard count must be at least 1, got %d", *v.Count)
	}
	if *v.Index < 0 || *v.Index >= *v.Count {
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
	index, count, from, err = pairFromEnv(lookup, pairs)
	if err != nil || from == "PIPERUN_SHARD_INDEX and PIPERUN_SHARD_COUNT" {
		return index, count, from, err
	}
	if from == "" {
		if err := lonelyCount(lookup, "RANK", "WORLD_SIZE"); err != nil {
			return 0, 0, "", err
		}
		return index, count, from, nil
	}
	// A world size without its rank that disagrees with the pair read is a
	// launcher misconfigured: SLURM_NTASKS=1 with WORLD_SIZE=2 read as one
	// shard hid it. One that agrees is a common sbatch
	// line (export WORLD_SIZE=$SLURM_NTASKS). piperun's
	// own pair overrides all.
	if _, ok := lookup("RANK"); !ok {
		if ws, ok := lookup("WORLD_SIZE"); ok {
			if c, err := strconv.Atoi(ws); err != nil || c != count {
				return 0, 0, "", fmt.Errorf("shard: auto: %s make this shard %d of %d, but WORLD_SIZE=%q is set without RANK: set RANK too, unset WORLD_SIZE, or set PIPERUN_SHARD_INDEX and PIPERUN_SHARD_COUNT", from, index, count, ws)
			}
		}
	}
	return index, count, from, nil
}

// pairFromEnv reads the first of pairs whose index variable is set.
func pairFromEnv(lookup func(string) (string, bool), pairs [][2]string) (index, count int, from string, err error) {
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
	if err := lonelyCount(lookup, "PIPERUN_SHARD_INDEX or JOB_COMPLETION_INDEX", "PIPERUN_SHARD_COUNT"); err != nil {
		return 0, 0, "", err
	}
	return 0, 1, "", nil
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

// shardedProcesses says, for a spec whose files stages are sharded, how
// many processes read it and what says so ("RANK and WORLD_SIZE say");
// 0 where none is.
// rank names the variable holding this process's rank, or, for an
// explicit shard, is its index.
func shardedProcesses(sp *spec.Spec) (n int, from, rank string) {
	for _, st := range sp.Stages {
		fc, ok := st.Config.(*FilesConfig)
		if !ok {
			continue
		}
		if fc.Shard.Count > 1 {
			return fc.Shard.Count, fmt.Sprintf("stage %q's shard says", st.Name), strconv.Itoa(fc.Shard.Index)
		}
		if fc.Shard.Auto {
			if _, n, from, err := shardFromEnv(os.LookupEnv); err == nil && n > 1 {
				rank, _, _ := strings.Cut(from, " ")
				return n, from + " say", rank
			}
		}
	}
	return 0, "", ""
}

// rankVars are the variables that launchers set to a different value in
// each process they start: the ranks ShardFromEnv reads, and Open MPI's
// and MPICH's. localRankVars differ only among the processes of one
// machine, and repeat on the next.
var (
	rankVars = []string{"PIPERUN_SHARD_INDEX", "RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX",
		"OMPI_COMM_WORLD_RANK", "PMI_RANK"}
	localRankVars = []string{"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}
)

// perProcess reports whether the value of field differs between the
// processes a launcher starts from one spec: a --set gave it, or it reads
// a rank variable set here; with perMachine, a local rank is enough (a
// socket or a port need only differ on one machine), and otherwise only
// where the launcher says every process runs on this one. local names the
// local rank a value read, short of that. others are the other variables
// set here that it read, which a launcher's script may set apart in each
// process; a value that read only unset ones (${RANK:-0} under Slurm) is
// its default everywhere.
func perProcess(cc *spec.CheckContext, field string, perMachine bool) (per bool, local string, others []string) {
	set, vars := cc.Given(field)
	if set {
		return true, "", nil
	}
	for _, v := range vars {
		switch {
		case slices.Contains(rankVars, v):
			return true, "", nil
		case slices.Contains(localRankVars, v):
			if perMachine || oneMachine(os.LookupEnv) {
				return true, "", nil
			}
			local = v
		case !slices.Contains(others, v):
			others = append(others, v)
		}
	}
	return false, local, others
}

// oneMachine reports whether the launcher says all its processes run on
// this machine: torchrun's local world size is its world size, or Slurm's
// job has one node.
func oneMachine(lookup func(string) (string, bool)) bool {
	lws, ok1 := lookup("LOCAL_WORLD_SIZE")
	ws, ok2 := lookup("WORLD_SIZE")
	if ok1 && ok2 && lws == ws {
		return true
	}
	n, ok := lookup("SLURM_JOB_NUM_NODES")
	if !ok {
		n, ok = lookup("SLURM_NNODES")
	}
	return ok && n == "1"
}

// unlessDiffer is what a shared-value warning adds when the value read
// variables that may be set apart in each process.
func unlessDiffer(others []string) string {
	if len(others) == 0 {
		return ""
	}
	return " (unless " + strings.Join(others, " or ") + " differs between them)"
}

// sharedOutput warns, for a sink writing path in a spec that N processes
// run as shards, that each writes the same file where the path is the
// same in every process: the last to finish replaced the others' samples,
// each reporting success (a new-user test lost 60 of 140 samples so).
func sharedOutput(cc *spec.CheckContext, path string) {
	per, local, others := perProcess(cc, "path", false)
	if path == "" || per {
		return
	}
	if n, from, rank := shardedProcesses(cc.Spec); n > 1 {
		ext := filepath.Ext(path)
		fix := fmt.Sprintf("put the rank in the path (%s-${%s}%s)", strings.TrimSuffix(path, ext), rank, ext)
		if _, err := strconv.Atoi(rank); err == nil {
			fix = fmt.Sprintf("give each process a path of its own (--set stages.%s.path=%s-%s%s, as you set its shard)", cc.Stage.Name, strings.TrimSuffix(path, ext), rank, ext)
		}
		if local != "" {
			fix := "put the rank in the path instead"
			if _, err := strconv.Atoi(rank); err != nil {
				fix += fmt.Sprintf(" (${%s})", rank)
			}
			cc.Warnf("path", "%s this is one of %d processes, and the path's %s repeats on every machine: processes on two machines write %s alike, and on shared storage the last to finish replaces the other's output; %s", from, n, local, path, fix)
			return
		}
		cc.Warnf("path", "%s this is one of %d processes, and each writes %s%s: the last to finish replaces the others' output; %s", from, n, path, unlessDiffer(others), fix)
	}
}

// lonelyCount is the error for the world size count set, above 1, without
// its rank (the variable or variables named by rank), or nil.
func lonelyCount(lookup func(string) (string, bool), rank, count string) error {
	cs, ok := lookup(count)
	if !ok {
		return nil
	}
	c, err := strconv.Atoi(cs)
	switch {
	case err != nil || c < 1:
		return fmt.Errorf("shard: auto: %s=%q is not a whole number from 1", count, cs)
	case c > 1:
		return fmt.Errorf("shard: auto: %s=%d is set but %s is not: without its rank every process would read every file (for one process reading every file, unset %s or write shard: {index: 0, count: 1})", count, c, rank, count)
	}
	return nil
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
	c.files = -1
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
			m, err := Glob(cc.ResolvePattern(p))
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
				if clash || strings.Contains(o, "://") || isCacheStage(cc.Spec, outputs[o]) || !globMatches(cc.ResolvePattern(p), o) {
					continue // a cache's folder is no file the pattern lists
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

// noMatch says that pattern p, resolved to abs, matches no file, and why
// where it can tell: the folder it looks in is not there, or files match
// it but for case (*.jpeg against ImageNet's *.JPEG).
func noMatch(p, specDir string) string {
	abs, shown := p, p
	if !filepath.IsAbs(p) {
		// The spec's folder as it is named, not as escaped into the
		// pattern ("sp\[1]" named a folder that does not exist).
		abs, shown = filepath.Join(spec.EscapeGlob(specDir), p), filepath.Join(specDir, p)
	}
	msg := fmt.Sprintf("pattern %q matches no file (resolved to %s)", p, shown)
	// Only a pattern without wildcards names a folder: one named "[abc]"
	// was told to match "[abc]/*", which matches nothing either.
	if st, err := os.Stat(unescapeGlob(abs)); err == nil && st.IsDir() && !hasMeta(abs) {
		// A folder of class folders holds no file directly: tree/* would
		// match nothing either.
		ents, _ := os.ReadDir(unescapeGlob(abs))
		files, dirs := 0, 0
		for _, e := range ents {
			if e.IsDir() {
				dirs++
			} else {
				files++
			}
		}
		switch {
		case len(ents) == 0:
			return msg + "; it is an empty folder"
		case files == 0 && dirs > 0:
			if !anyFile(unescapeGlob(abs)) {
				return msg + "; it is a folder of folders, which hold no file"
			}
			return msg + fmt.Sprintf("; it is a folder of folders: match the files in them with %s, or at any depth with %s", path.Join(filepath.ToSlash(p), "*/*"), path.Join(filepath.ToSlash(p), "**"))
		}
		return msg + fmt.Sprintf("; it is a folder: match the files in it with %s", filepath.Join(p, "*"))
	}
	if hint := literalHint(p, abs); hint != "" {
		return msg + hint
	}
	// Names that match but are no regular file: links into a dataset that
	// is not mounted, or folders, were passed over without a word.
	if raw, _ := globAll(abs); len(raw) > 0 && !strings.Contains(abs, "**") {
		var broken, dirs []string
		for _, m := range raw {
			st, err := os.Stat(m)
			switch {
			case err != nil:
				broken = append(broken, m)
			case st.IsDir():
				dirs = append(dirs, m)
			}
		}
		msg += fmt.Sprintf("; %d %s, none a regular file", len(raw), oneOrMany(len(raw), "name matches", "names match"))
		if len(dirs) > 0 {
			msg += fmt.Sprintf("; %d %s (such as %s)", len(dirs), oneOrMany(len(dirs), "is a folder", "are folders"), dirs[0])
			deep := false
			for _, d := range dirs {
				deep = deep || anyFile(d)
			}
			switch m, _ := Glob(abs + "/*"); {
			case len(m) > 0:
				msg += fmt.Sprintf(": match the files in them with %s", path.Join(filepath.ToSlash(p), "*"))
			case deep:
				msg += fmt.Sprintf(", with files only deeper down: match them with %s", path.Join(filepath.ToSlash(p), "**"))
			default:
				msg += oneOrMany(len(dirs), ", which holds no file", ", which hold no file")
			}
		}
		if len(broken) > 0 {
			msg += fmt.Sprintf("; %d %s nowhere (such as %s): is its target mounted?", len(broken), oneOrMany(len(broken), "is a symlink that leads", "are symlinks that lead"), broken[0])
		}
		return msg
	}
	// Not with **: a folded folder name defeats the walk's literal
	// start, which would then be the root of the file system.
	// Only the pattern as written is folded, not the spec's folder
	// escaped into it (a spec in "case[1]" lost the hint).
	if !strings.ContainsAny(p, `[\`) && !strings.Contains(p, "**") {
		var fold strings.Builder
		if !filepath.IsAbs(p) {
			fold.WriteString(spec.EscapeGlob(specDir) + string(filepath.Separator))
		}
		for _, r := range p {
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
	for hasMeta(dir) {
		dir = filepath.Dir(dir)
	}
	dir = unescapeGlob(dir)
	if _, err := os.Stat(dir); err != nil {
		switch {
		case errors.Is(err, fs.ErrPermission):
			// A folder above it lets this process not look inside: it
			// was said not to exist.
			up := dir
			for errors.Is(err, fs.ErrPermission) && filepath.Dir(up) != up {
				up = filepath.Dir(up)
				_, err = os.Stat(up)
			}
			return msg + fmt.Sprintf("; folder %s cannot be reached: %s needs execute (search) permission for this process", dir, up)
		case os.IsNotExist(err):
			return msg + fmt.Sprintf("; folder %s does not exist", dir)
		}
		return msg + fmt.Sprintf("; folder %s cannot be read: %v", dir, errors.Unwrap(err))
	}
	// A folder that cannot be listed matches nothing, without an error
	// from the glob.
	ents, err := os.ReadDir(dir)
	if err != nil {
		return msg + fmt.Sprintf("; folder %s cannot be read: %v", dir, errors.Unwrap(err))
	}
	if len(ents) == 0 {
		return msg + fmt.Sprintf("; folder %s is empty", dir)
	}
	// One with read but not execute permission lists its names, but the
	// glob cannot look any of them up, so each vanishes.
	if len(ents) > 0 {
		if _, err := os.Lstat(filepath.Join(dir, ents[0].Name())); errors.Is(err, fs.ErrPermission) {
			return msg + fmt.Sprintf("; folder %s lists %d names but none can be looked up (%v): it needs execute (search) permission", dir, len(ents), errors.Unwrap(err))
		}
	}
	return msg
}

// anyFile reports whether a regular file lies anywhere below dir, stopping
// at the first: a hint need not walk an ImageNet tree.
func anyFile(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// oneOrMany is one or many by n.
func oneOrMany(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// literalHint says that a name in pattern p (resolved to abs) exists as
// written, wildcard characters and all, with the pattern that matches it,
// or "": a file "c[3].jpg" or a folder "photos [2024]" matched nothing,
// without a word on why.
func literalHint(p, abs string) string {
	segs := strings.Split(filepath.ToSlash(p), "/")
	absSegs := strings.Split(filepath.ToSlash(abs), "/")
	off := len(absSegs) - len(segs)
	if path.Clean(filepath.ToSlash(p)) != filepath.ToSlash(p) || off < 0 {
		return ""
	}
	for i, seg := range segs {
		if !hasMeta(seg) {
			continue
		}
		lit := filepath.FromSlash(unescapeGlob(strings.Join(absSegs[:off+i+1], "/")))
		if _, err := os.Lstat(lit); err != nil {
			return ""
		}
		fixed := slices.Clone(segs)
		for j := 0; j <= i; j++ {
			if hasMeta(fixed[j]) {
				fixed[j] = spec.EscapeGlob(fixed[j])
			}
		}
		if st, err := os.Stat(lit); err == nil && st.IsDir() && i == len(segs)-1 {
			// A folder's files, those in it or, where it holds none
			// directly, those deeper down.
			switch m, _ := Glob(filepath.Join(lit, "*")); {
			case len(m) > 0:
				fixed = append(fixed, "*")
			case anyFile(lit):
				fixed = append(fixed, "**")
			default:
				return fmt.Sprintf("; %s exists, but it is a folder that holds no file (and *, ? and [ are wildcards: a backslash escapes them)", lit)
			}
		}
		hint := fmt.Sprintf("; %s exists, but *, ? and [ are wildcards: escape them with a backslash to match them as they stand (%s", lit, strings.Join(fixed, "/"))
		// Said where it would still match nothing, not to send the user
		// to another pattern that fails in silence.
		if m, _ := Glob(path.Join(append([]string{spec.EscapeGlob(filepath.ToSlash(lit))}, fixed[i+1:]...)...)); len(m) == 0 {
			hint += ", which matches no file either: check the rest of the pattern"
		}
		return hint + ")"
	}
	return ""
}

// unreadable says how many of the files matched this process cannot read
// and why the first cannot, or "" when it can read them all: DESIGN.md's
// validate checks that inputs are readable, and a file that is not fails
// the run or is skipped only once the run reaches it.
// It costs an access(2) a file, about 3 µs (0.6 s over 200,000 files).
func unreadable(files []string) string {
	n, first := 0, error(nil)
	for _, f := range files {
		if err := readable(f); err != nil {
			if n == 0 {
				first = &os.PathError{Op: "read", Path: f, Err: err}
			}
			n++
		}
	}
	switch {
	case n == 0:
		return ""
	case n == 1:
		return fmt.Sprintf("matches a file this process cannot read: %v", first)
	}
	return fmt.Sprintf("matches %d files this process cannot read; the first: %v", n, first)
}

// labelPattern is what one pattern matched, for labels: from_dir.
type labelPattern struct {
	pattern string   // as written
	abs     string   // resolved
	files   []string // its matches
}

// labelProblem says why labels: from_dir cannot label what a pattern
// matched (err), or warns of it.
type labelProblem struct {
	err bool
	msg string
}

// folderLabels is the ImageFolder labelling of the files matched.
type folderLabels struct {
	files   []string // the files labelled, sorted
	labels  []int32  // each file's label, an index into classes
	classes []string // every class, sorted by name
}

// patternRoot splits a slash-separated pattern into the folder it starts
// from, its segments before the first with a wildcard ("." or "/" when
// none, its folder when it has no wildcard), and the rest.
func patternRoot(p string) (root, rest string) {
	segs := strings.Split(p, "/")
	n := 0
	for n < len(segs)-1 && !hasMeta(segs[n]) {
		n++
	}
	root = strings.Join(segs[:n], "/")
	switch {
	case root == "" && strings.HasPrefix(p, "/"):
		root = "/"
	case root == "":
		root = "."
	}
	return root, strings.Join(segs[n:], "/")
}

// joinPattern appends a slash-separated tail to a pattern's root.
func joinPattern(root, tail string) string {
	switch root {
	case ".":
		return tail
	case "/":
		return "/" + tail
	}
	return strings.TrimSuffix(root, "/") + "/" + tail
}

// imageFolder labels the files that pats matched as torchvision's
// ImageFolder does: a pattern's root is the folder it starts from (its
// path before the first wildcard); every folder directly in a root is a
// class, and a file's class is the one of them it sits in, at any depth
// below. With several patterns the classes are those of all their roots
// together, sorted; a file matched by several takes its class from the
// first that gives it one. A file that sits directly in the root of every
// pattern that matched it has no class: it is left out with a warning, or
// an error when it is all a pattern matched. A class folder that holds no
// file matched is an error, as in ImageFolder: it would take a label.
func imageFolder(pats []labelPattern) (*folderLabels, []labelProblem) {
	type rootInfo struct {
		first  int             // the first pattern starting from it
		pats   []int           // every pattern starting from it
		has    map[string]bool // class folders holding a file a pattern of this root matched
		active bool            // it gave a file its class
	}
	fl := &folderLabels{}
	class := map[string]string{} // file to class name
	roots := map[string]*rootInfo{}
	var order []string // roots in the order of their first pattern
	absRoot := make([]string, len(pats))
	for i, lp := range pats {
		r, _ := patternRoot(filepath.ToSlash(lp.abs))
		r = filepath.Clean(filepath.FromSlash(unescapeGlob(r)))
		absRoot[i] = r
		ri := roots[r]
		if ri == nil {
			ri = &rootInfo{first: i, has: map[string]bool{}}
			roots[r] = ri
			order = append(order, r)
		}
		ri.pats = append(ri.pats, i)
		prefix := r + string(filepath.Separator)
		if strings.HasSuffix(r, string(filepath.Separator)) {
			prefix = r
		}
		for _, f := range lp.files {
			rel, ok := strings.CutPrefix(f, prefix)
			if !ok {
				var err error
				if rel, err = filepath.Rel(r, f); err != nil {
					continue
				}
			}
			cls, _, nested := strings.Cut(filepath.ToSlash(rel), "/")
			if !nested || cls == ".." || cls == "." {
				continue
			}
			ri.has[cls] = true
			if _, ok := class[f]; !ok {
				class[f] = cls
				fl.files = append(fl.files, f)
				ri.active = true
			}
		}
	}
	sort.Strings(fl.files)
	var problems []labelProblem
	told := map[string]bool{} // files left out, said once
	for i, lp := range pats {
		wroot, rest := patternRoot(filepath.ToSlash(lp.pattern))
		var out []string
		labelled := false
		for _, f := range lp.files {
			if _, ok := class[f]; ok {
				labelled = true
			} else if !told[f] {
				told[f] = true
				out = append(out, f)
			}
		}
		if len(out) == 0 {
			continue
		}
		suggest := joinPattern(wroot, "*/"+rest)
		if !labelled {
			also := ""
			if up := path.Dir(wroot); wroot != "." && wroot != "/" && up != wroot && !strings.HasSuffix(wroot, "..") {
				also = fmt.Sprintf(", or %s if %s is itself one class's folder", joinPattern(up, "*/"+rest), path.Base(wroot))
			}
			problems = append(problems, labelProblem{err: true, msg: fmt.Sprintf("every file pattern %q matches sits directly in %s, the folder it starts from, so none has a class: a file's class is the folder directly in %s that holds it (%s, torchvision's ImageFolder layout); match files in class folders (%s%s), or drop labels: from_dir",
				lp.pattern, absRoot[i], absRoot[i], filepath.Join(absRoot[i], "<class>", "…"), suggest, also)})
			continue
		}
		which, verb, it := fmt.Sprintf("1 file (%s)", out[0]), "sits", "it"
		if len(out) > 1 {
			which, verb, it = fmt.Sprintf("%d files (such as %s)", len(out), out[0]), "sit", "them"
		}
		problems = append(problems, labelProblem{msg: fmt.Sprintf("%s that pattern %q matches %s directly in %s, the folder it starts from, outside the class folders: labels: from_dir leaves %s out, as torchvision's ImageFolder does (a file's class is the folder directly in %s that holds it); match the class folders' files only (%s) not to list %s",
			which, lp.pattern, verb, absRoot[i], it, absRoot[i], suggest, it)})
	}
	classes := map[string]bool{}
	for _, f := range fl.files {
		classes[class[f]] = true
	}
	for _, r := range order {
		ri := roots[r]
		if !ri.active {
			continue
		}
		entries, err := os.ReadDir(r)
		if err != nil {
			problems = append(problems, labelProblem{err: true, msg: fmt.Sprintf("listing the class folders: %v", err)})
			continue
		}
		var empty, links []string
		for _, e := range entries {
			dir := e.IsDir()
			if e.Type()&fs.ModeSymlink != 0 {
				// A symlink to a folder is a class, as in ImageFolder
				// (os.scandir's is_dir follows it).
				if st, err := os.Stat(filepath.Join(r, e.Name())); err == nil && st.IsDir() {
					dir = true
					links = append(links, e.Name())
				}
			}
			if !dir {
				continue
			}
			classes[e.Name()] = true
			if !ri.has[e.Name()] {
				empty = append(empty, e.Name())
			}
		}
		if len(empty) == 0 {
			continue
		}
		names, verb, them := "class folder "+empty[0], "holds", "it"
		if len(empty) > 1 {
			names, verb, them = "class folders "+listNames(empty, 10), "hold", "them"
		}
		matched := fmt.Sprintf("that pattern %q matches", pats[ri.first].pattern)
		if len(ri.pats) > 1 {
			matched = "that the patterns starting there match"
		}
		msg := fmt.Sprintf("%s in %s %s no file %s: every folder directly in %s is a class, numbered in sorted order as torchvision's ImageFolder does, so an empty one would take a label (ImageFolder refuses such a tree too); put files in %s, or move %s out of %s",
			names, r, verb, matched, r, them, them, r)
		for _, name := range empty {
			if strings.HasPrefix(name, ".") {
				msg += "; a hidden folder is a class too, as in ImageFolder"
				break
			}
		}
		for _, name := range empty {
			if !slices.Contains(links, name) {
				continue
			}
			for _, i := range ri.pats {
				p := filepath.ToSlash(pats[i].pattern)
				if strings.Contains(p, "**") {
					wroot, _ := patternRoot(p)
					msg += fmt.Sprintf("; %s is a symlinked folder, which ** does not follow: match it with a pattern without ** (%s)", name, joinPattern(wroot, "*/"+path.Base(p)))
					break
				}
			}
			break
		}
		problems = append(problems, labelProblem{err: true, msg: msg})
	}
	fl.classes = make([]string, 0, len(classes))
	for c := range classes {
		fl.classes = append(fl.classes, c)
	}
	// Byte order is code point order, Python's sorted() on the names.
	sort.Strings(fl.classes)
	index := make(map[string]int32, len(fl.classes))
	for i, c := range fl.classes {
		index[c] = int32(i)
	}
	fl.labels = make([]int32, len(fl.files))
	for i, f := range fl.files {
		fl.labels[i] = index[class[f]]
	}
	return fl, problems
}

// listNames writes names as "a, b and c", the first most of them and how
// many more.
func listNames(names []string, most int) string {
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
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
		m, err := Glob(abs)
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

func checkGlob(p string) error {
	// Read as written, before a Join drops the slash: "data/*/" matched the
	// files in data, where a shell and Python's glob match its folders.
	if q := filepath.ToSlash(p); len(q) > 1 && strings.HasSuffix(q, "/") {
		return fmt.Errorf("pattern %q ends with /, which matches folders, not files: match the files in them with %s*", p, q)
	}
	// Resolving the pattern cleans "d/*/." to "d/*" and "d/*/../x" to
	// "d/x", through the wildcard, which a shell reads otherwise.
	wild := false
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if (seg == "." || seg == "..") && wild {
			return fmt.Errorf("pattern %q has %s after a wildcard, which would be read as if the folder before it were named: write . and .. only after folders named in full", p, seg)
		}
		wild = wild || hasMeta(seg)
	}
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

// hasMeta reports whether a pattern holds a wildcard that is not escaped.
func hasMeta(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// unescapeGlob is the path a pattern without wildcards names: its
// escapes removed (the spec's folder is escaped into every pattern).
func unescapeGlob(p string) string {
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// Glob returns the files matching pattern, where a "**" segment matches
// any number of directories. Directories themselves are not returned.
func Glob(pattern string) ([]string, error) {
	if err := checkGlob(pattern); err != nil {
		return nil, err
	}
	if !strings.Contains(pattern, "**") {
		m, err := globAll(pattern)
		if err != nil {
			return nil, err
		}
		return regularFiles(m), nil
	}
	// Walk from the longest prefix without wildcards.
	segs := strings.Split(filepath.ToSlash(pattern), "/")
	root := []string{}
	for _, s := range segs {
		if hasMeta(s) {
			break
		}
		root = append(root, s)
	}
	base := unescapeGlob(strings.Join(root, "/"))
	if base == "" {
		base = "."
		if strings.HasPrefix(pattern, "/") {
			base = "/"
		}
	}
	rest := segs[len(root):]
	var out []string
	// The walk follows no symlink, but the root's own is followed (a
	// trailing separator makes its Lstat read the target): data ->
	// /mnt/dataset is common, and following the folder named cannot loop
	// (** found nothing there). Only a folder's: on a
	// file, file/** matches the file, as before.
	start := filepath.FromSlash(base)
	if st, err := os.Stat(start); err == nil && st.IsDir() && !strings.HasSuffix(start, string(filepath.Separator)) {
		start += string(filepath.Separator)
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && os.IsNotExist(err) {
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

// globAll is filepath.Glob of a pattern without "**", directories and
// all, that reads its literal prefix as a path: a folder named there need
// not be listed, only opened, as a spec's folder escaped into every
// pattern ("sp\[1]") was, below a parent that lets no one list it.
func globAll(pattern string) ([]string, error) {
	segs := strings.Split(filepath.ToSlash(pattern), "/")
	k := 0
	for k < len(segs) && !hasMeta(segs[k]) {
		k++
	}
	base := unescapeGlob(strings.Join(segs[:k], "/"))
	switch {
	case k == len(segs):
		if _, err := os.Lstat(base); err != nil {
			return nil, nil
		}
		return []string{filepath.FromSlash(base)}, nil
	case base == "" && k > 0: // the root: "/*"
		base = "/"
	case base == "":
		base = "."
	}
	rel, err := fs.Glob(os.DirFS(filepath.FromSlash(base)), strings.Join(segs[k:], "/"))
	if err != nil {
		return nil, err
	}
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = filepath.Join(filepath.FromSlash(base), filepath.FromSlash(r))
	}
	return out, nil
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

// globMatches reports whether the file at path, both absolute, matches
// pattern as the files stage reads it (** for any depth).
func globMatches(pattern, path string) bool {
	return matchSegs(strings.Split(filepath.ToSlash(filepath.Clean(pattern)), "/"), strings.Split(filepath.ToSlash(filepath.Clean(path)), "/"))
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
// samples an epoch, and in a job whose ranks step together (DDP) they fall
// out of step, a longer rank's last steps of one epoch paired with a
// shorter one's first of the next, until at the end the longer ones wait
// for steps the others never take (a new-user test's DDP job averaged two
// epochs' gradients without a word, then failed).
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
	fix := fmt.Sprintf("match a multiple of %d files, or put a take of %d (the smaller shards' files) right after this stage", count, files/count)
	if files < count {
		fix = fmt.Sprintf("match %d files or a multiple of them", count)
	}
	return fmt.Sprintf("the %d files matched do not divide into %d shards: %s %s, the others %d (this one, %d: %d), so the ranks see different numbers of samples an epoch: ranks that step together (DDP) fall out of step, the longer ones' last steps of an epoch meeting the shorter ones' first of the next, and at the end the longer ones wait for steps the others never take; %s",
		files, count, first, plural(files/count+1, "file"), files/count, index, mine, fix)
}

// emptyShard is the warning of a shard that gets none of the files
// matched, in validate's words and the run's.
func emptyShard(index, count, files int) string {
	return fmt.Sprintf("shard %d of %d gets no files: the %d files matched all go to other shards (sharding is by file), so this process emits no samples", index, count, files)
}

// evenedByTake reports whether every stage reading st is a take of at
// most per samples, or passes a sample on for each it reads to stages
// that are (files → decode → take): files emits one sample a
// file, so such a take ends every rank's epoch at the same count however
// the files fall to the shards, and the warning of unevenShards does not
// apply.
func evenedByTake(st *spec.Stage, per int) bool {
	if st == nil || len(st.Outputs) == 0 {
		return false
	}
	for _, o := range st.Outputs {
		if c, ok := o.Config.(*CountConfig); ok && !c.skip {
			if c.Count > int64(per) {
				return false
			}
			continue
		}
		if !oneForOne(o, per) || !evenedByTake(o, per) {
			return false
		}
	}
	return true
}

// oneForOne reports whether st reads one input and emits a sample for
// each of the per it reads an epoch (a map that skips none, a shuffle, a
// prefetch, a cache).
func oneForOne(st *spec.Stage, per int) bool {
	c, ok := st.Config.(interface{ EpochSamples(int64) int64 })
	return ok && len(st.Inputs) == 1 && !st.Skip() && c.EpochSamples(int64(per)) == int64(per)
}

// plural writes n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
