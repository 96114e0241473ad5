// Package spec parses, defaults and validates piperun pipeline specs.
//
// It reads YAML into nodes so that every diagnostic carries file:line:col,
// collects every problem rather than stopping at the first, and type-checks
// the pipeline by propagating field types through the DAG. It knows nothing
// of goroutines, caches or GPUs: it learns about stage types through the
// Catalog interface, which the stage registry implements, and the field
// types it propagates are sample's static ones (TestSpecKnowsNothingOfTheRuntime).
package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/piperun/piperun/internal/didyoumean"
	"github.com/piperun/piperun/sample"
)

// Version is the only spec format version this runner reads.
const Version = 1

// Role says where a stage type sits in the DAG.
type Role int

// The stage roles.
const (
	RoleSource    Role = iota // no input
	RoleTransform             // one input, one output stream
	RoleJoin                  // several inputs, one output stream
	RoleSink                  // one input, no output stream
)

// String names the role.
func (r Role) String() string {
	return [...]string{"source", "transform", "join", "sink"}[r]
}

// StageType describes one stage type to the validator.
type StageType struct {
	Name string
	Role Role
	// Doc is a one-line description, used in the JSON Schema.
	Doc string
	// NewConfig returns a pointer to a config struct holding the defaults.
	NewConfig func() any
	// OnError and Parallel say whether the type takes on_error and parallelism.
	OnError  bool
	Parallel bool
}

// Catalog looks up stage types. The stage registry implements it.
type Catalog interface {
	Lookup(name string) (*StageType, bool)
	Names() []string
}

// Checker is implemented by stage configs. Check validates the config
// against the schemas of the stage's inputs (c.Inputs) and returns the
// schema of what the stage emits. Problems are reported through c.
// Check may run more than once on one config, with other inputs (validate
// checks the stages below one in error again with its schema closed): it
// must set whatever state it keeps afresh, not add to it.
type Checker interface {
	Check(c *CheckContext) sample.Schema
}

// Outputter is implemented by the configs of stages that write files (or
// listen on a socket file): OutputPaths lists them, resolved against the
// spec's directory, so that validate can refuse two stages writing one
// path, and apply a report over an output.
type Outputter interface {
	OutputPaths(resolve func(string) string) []string
}

// Outputs maps each path the spec's stages write, cleaned, to the first
// stage that writes it: by OutputKey, the file written, and where the
// path names a link, by that name too.
func (sp *Spec) Outputs() map[string]string {
	out := map[string]string{}
	for _, st := range sp.Stages {
		if o, ok := st.Config.(Outputter); ok {
			for _, p := range o.OutputPaths(sp.Resolve) {
				// Both the file written and the name that leads to it: a
				// pattern matching the name reads the output too.
				for _, k := range []string{OutputKey(p), namedKey(p)} {
					if _, dup := out[k]; !dup {
						out[k] = st.Name
					}
				}
			}
		}
	}
	return out
}

// OutputKey is the form in which two names of one output compare equal:
// cleaned, a link it names followed to what it leads to (sinks and
// reports write through links, so a link to one output was a second
// writer of it that no check saw), and with the symlinks of its directory
// resolved where it exists (out/x and link-to-out/x are one file). An
// address that is no path (tcp://host:port) is itself.
func OutputKey(p string) string {
	if strings.Contains(p, "://") {
		return p
	}
	return namedKey(FollowLinks(p))
}

// fingerprintName is the name of a cache's folder in its dir.
var fingerprintName = regexp.MustCompile(`^[0-9a-f]{16}$`)

// inCacheFolder reports whether rel, a path below a cache's dir, is where
// a cache keeps its files: in a fingerprint's folder, or a manifest.json
// one folder down, which makes that folder read as a cache.
func inCacheFolder(rel string) bool {
	first, rest, below := strings.Cut(filepath.ToSlash(rel), "/")
	return below && (fingerprintName.MatchString(first) || rest == "manifest.json")
}

// namedKey is OutputKey without following a link p names: the name the
// spec gives, its folders' links resolved.
func namedKey(p string) string {
	if strings.Contains(p, "://") {
		return p
	}
	p = filepath.Clean(p)
	if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		if abs, err := filepath.Abs(dir); err == nil {
			return filepath.Join(abs, filepath.Base(p))
		}
	}
	return p
}

// FollowLinks follows the symbolic link p names, and the one that leads
// to, up to 40, to the first name that is no link (or does not exist):
// the file a write to p creates or replaces. The folders on the way are
// left as they are.
func FollowLinks(p string) string {
	p = filepath.Clean(p)
	for hops := 0; hops < 40; hops++ {
		st, err := os.Lstat(p)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			break
		}
		t, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = filepath.Clean(t)
	}
	return p
}

// PassThrough is implemented by the configs of stages that hand samples on
// with their fields untouched: PassesThrough reports whether the stage
// also never reads field (shuffle, prefetch, take and skip read none; a
// filter those its condition names), so the field may cross it in a
// deferred form.
type PassThrough interface {
	PassesThrough(field string) bool
}

// DeferFinisher is implemented by the configs of stages that can finish a
// field's deferred conversion while they copy it (batch, as it stacks).
type DeferFinisher interface {
	FinishesDeferred(field string) bool
}

// DeferrableField reports whether the stage may emit field in a deferred
// form (sample.Type.Deferred): its samples reach exactly one stage that
// finishes the conversion, through stages that all pass fields through,
// with no fan-out on the way. Nothing else can then see the field before
// it is converted.
func DeferrableField(st *Stage, field string) bool {
	seen := map[*Stage]bool{}
	for cur := st; !seen[cur]; {
		seen[cur] = true
		if len(cur.Outputs) != 1 {
			return false
		}
		next := cur.Outputs[0]
		if len(next.Inputs) != 1 || next.Config == nil {
			return false
		}
		if f, ok := next.Config.(DeferFinisher); ok {
			return f.FinishesDeferred(field)
		}
		if pt, ok := next.Config.(PassThrough); !ok || !pt.PassesThrough(field) {
			return false
		}
		cur = next
	}
	return false // a cycle, reported by link
}

// Resources bounds what a pipeline may use.
type Resources struct {
	Memory  ByteSize `yaml:"memory" jsonschema_description:"Hard budget for bytes held by samples anywhere in the pipeline, e.g. 2GiB. Default: a quarter of physical memory, or of the cgroup's memory limit where that is less."`
	Workers Auto     `yaml:"workers" jsonschema_description:"CPU worker budget shared by all stages; auto = the cores Go may use (a container's CPU limit, or GOMAXPROCS when set)."`
}

// Spec is a parsed and validated pipeline.
type Spec struct {
	// File is the spec's path as given; Dir is the absolute directory that
	// relative paths in the spec resolve against.
	File string
	Dir  string

	Version       int
	Name          string
	Seed          *int64
	Epochs        int
	Deterministic bool
	// Optimize lets the planner reorder stages where that changes memory
	// and speed but not the output (plan: moving a shuffle above maps).
	Optimize  bool
	Resources Resources

	Stages []*Stage
	// Order lists the stages so that every stage follows its inputs.
	Order []*Stage

	pos map[string]Pos
	// sets are the --set overrides, for the positions of their values.
	sets []string
	// expanded are the values that read an environment variable, with the
	// variables read that are set.
	expanded map[*yaml.Node][]string
	// scalars are the scalar nodes by path, and lines the file's lines,
	// to place a diagnostic inside a value (ValuePos).
	scalars map[string]*yaml.Node
	lines   []string
}

// Stage is one stage of a spec.
type Stage struct {
	Index       int
	Name        string
	Type        string
	Role        Role
	InputNames  []string
	OnError     string
	Parallelism Auto
	// Config is the type-specific config, a pointer returned by the type's
	// NewConfig and filled from the spec.
	Config any
	// Path is the stage's diagnostic path, e.g. "stages[3]".
	Path string
	Pos  Pos

	// Inputs and Outputs link the DAG after validation.
	Inputs  []*Stage
	Outputs []*Stage
	// InSchemas are the schemas of the inputs; Schema is what the stage emits.
	InSchemas []sample.Schema
	Schema    sample.Schema
	Valid     bool
}

// Below returns the first stage downstream of s (depth first) that match
// accepts, or nil.
func (s *Stage) Below(match func(*Stage) bool) *Stage { return find(s, match, true) }

// Above returns the first stage upstream of s (depth first) that match
// accepts, or nil.
func (s *Stage) Above(match func(*Stage) bool) *Stage { return find(s, match, false) }

func find(s *Stage, match func(*Stage) bool, down bool) *Stage {
	seen := map[*Stage]bool{}
	var walk func(s *Stage) *Stage
	walk = func(s *Stage) *Stage {
		next := s.Inputs
		if down {
			next = s.Outputs
		}
		for _, o := range next {
			if seen[o] {
				continue
			}
			seen[o] = true
			if match(o) {
				return o
			}
			if f := walk(o); f != nil {
				return f
			}
		}
		return nil
	}
	return walk(s)
}

// Skip reports whether bad samples are skipped rather than failing the run.
func (s *Stage) Skip() bool { return s.OnError == "skip" }

// PosOf returns the position recorded for a path such as
// "stages[3].set.label", falling back to its nearest recorded parent.
func (sp *Spec) PosOf(path string) Pos { return sp.Where(sp.rawPosOf(path)) }

// Where resolves a position recorded while decoding (a Map entry's Pos):
// a value from the k-th command-line override is recorded at line -k, and
// becomes that override's position.
func (sp *Spec) Where(pos Pos) Pos {
	if pos.Line < 0 && -pos.Line <= len(sp.sets) {
		return Pos{File: pos.File, Set: sp.sets[-pos.Line-1]}
	}
	return pos
}

// rawPosOf is PosOf with a value from the k-th override at line -k, as
// the reporter takes it (reporter.pos).
func (sp *Spec) rawPosOf(path string) Pos {
	for p := path; p != ""; {
		if pos, ok := sp.pos[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			break
		}
		p = p[:i]
	}
	return Pos{File: sp.File}
}

// Resolve makes a path from the spec absolute, relative to the spec's
// directory.
func (sp *Spec) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(sp.Dir, p)
}

// ResolvePattern is Resolve for a glob pattern: the spec's directory is
// taken literally, its wildcard characters escaped, so that a spec in
// "sp[1]" matches its own files, not those of a folder "sp1" beside it.
func (sp *Spec) ResolvePattern(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(EscapeGlob(sp.Dir), p)
}

// EscapeGlob escapes the characters filepath.Match reads as wildcards,
// so that the pattern matches path alone.
func EscapeGlob(path string) string {
	if !strings.ContainsAny(path, `*?[\`) {
		return path
	}
	var b strings.Builder
	for _, r := range path {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Stage returns the stage with the given name.
func (sp *Spec) Stage(name string) *Stage {
	for _, s := range sp.Stages {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Options control loading.
type Options struct {
	Catalog Catalog
	// Set holds command-line overrides, "a.b=v" (see ApplySet).
	Set []string
	// LookupEnv resolves ${VAR} references; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Environment enables checks that touch the machine: input patterns
	// match files, output directories are writable.
	Environment bool
}

// Load reads and validates the spec at path. The returned spec is nil only
// when the file cannot be parsed at all; otherwise it is returned with every
// diagnostic found, and can be planned when diags.HasErrors() is false.
// What only a plan can tell (whether its buffers fit the memory budget) is
// plan.Plan's Diagnostics: piperun validate reports both.
func Load(path string, opts Options) (*Spec, Diagnostics) {
	data, err := readSpec(path)
	if err != nil {
		return nil, Diagnostics{{Pos: Pos{File: path}, Message: fmt.Sprintf("cannot read spec: %v", err), Severity: SevError}}
	}
	return Parse(path, data, opts)
}

// MaxSpecBytes bounds what Load reads: `validate /dev/zero` ran the
// process out of memory. A pipe (`<(envsubst < x)`) is
// read as a file is.
const MaxSpecBytes = 16 << 20

func readSpec(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s is a folder", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSpecBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSpecBytes {
		return nil, fmt.Errorf("%s is larger than %s, more than a spec can be", path, ByteSize(MaxSpecBytes))
	}
	return data, nil
}

var (
	nameRe      = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	stageNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)
)

// document is the top level of a spec file.
type document struct {
	Version       int       `yaml:"version" jsonschema:"required" jsonschema_description:"Spec format version; must be 1."`
	Name          string    `yaml:"name" jsonschema:"required,pattern=^[a-z0-9][a-z0-9_-]*$" jsonschema_description:"Pipeline name, [a-z0-9][a-z0-9_-]*."`
	Seed          *int64    `yaml:"seed" jsonschema:"minimum=0" jsonschema_description:"Seed for every random choice; absent = random, printed at start."`
	Epochs        *int      `yaml:"epochs" jsonschema:"minimum=0" jsonschema_description:"Passes over the sources; 0 = until stopped. Default 1."`
	Deterministic *bool     `yaml:"deterministic" jsonschema_description:"Output order independent of parallelism. Default true."`
	Optimize      *bool     `yaml:"optimize" jsonschema_description:"Let the planner move a shuffle above the maps that feed it, where it then holds smaller samples; a deterministic run that succeeds gives the same output unless the plan says otherwise (piperun plan lists what it changed and why). Default true."`
	Resources     Resources `yaml:"resources" jsonschema_description:"The host-memory budget and the CPU workers the stages share."`
	Stages        []rawNode `yaml:"stages" jsonschema:"required" jsonschema_description:"The stages, each reading the one listed before it unless it names its input: sources, transforms, joins and at least one sink."`
}

// rawNode keeps a node for decoding once its type is known.
type rawNode struct{ node *yaml.Node }

func (r *rawNode) UnmarshalNode(n *yaml.Node) error { r.node = n; return nil }

// common holds the keys every stage takes.
type common struct {
	Name        string     `yaml:"name" jsonschema:"required,pattern=^[A-Za-z0-9][A-Za-z0-9_-]*$" jsonschema_description:"Stage name, unique in the spec."`
	Type        string     `yaml:"type" jsonschema:"required" jsonschema_description:"Stage type."`
	Input       string     `yaml:"input" jsonschema_description:"Upstream stage; default: the stage listed before."`
	Inputs      StringList `yaml:"inputs" jsonschema_description:"Upstream stages, for stages that take several."`
	OnError     string     `yaml:"on_error" jsonschema:"enum=fail,enum=skip" jsonschema_description:"fail (default) stops the run on a bad sample; skip skips and counts it."`
	Parallelism Auto       `yaml:"parallelism" jsonschema_description:"Workers for this stage, or auto."`
}

// MaxParallelism is the most workers a stage may have: each holds a
// sample and a goroutine, and a million of them took 20 s to start
// three samples, where tf.data's AUTOTUNE stays
// near the cores.
const MaxParallelism = 4096

var commonKeys = map[string]bool{"name": true, "type": true, "input": true, "inputs": true, "on_error": true, "parallelism": true}

// Parse validates a spec held in memory; file names it in diagnostics and
// its directory anchors relative paths.
func Parse(file string, data []byte, opts Options) (*Spec, Diagnostics) {
	r := &reporter{file: file}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		line, col, msg := yamlErrorPos(data, err)
		r.add(SevError, line, col, "", "invalid YAML: %s", msg)
		return nil, r.diags
	}
	if len(root.Content) == 0 {
		r.add(SevError, 1, 1, "", "empty spec")
		return nil, r.diags
	}
	if line := secondDocument(data); line > 0 {
		// yaml.Unmarshal reads the first and drops the rest unread, so a
		// second pipeline (or broken YAML) after a --- passed validate
		// and never ran.
		r.add(SevError, line, 1, "", "a second YAML document: a spec file holds one pipeline; put each in a file of its own")
	}
	doc := root.Content[0]
	resolveMerges(doc, r)
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	// Overrides first: a value one replaces is not expanded (an unset
	// variable there is no problem once --set gives the value), and the
	// values they give are taken as written (interpolate skips them).
	for _, s := range opts.Set {
		if err := ApplySet(doc, s); err != nil {
			// Reported as the override's, as a problem with its value is.
			r.diags = append(r.diags, Diagnostic{Pos: Pos{File: r.file, Set: s}, Message: err.Error(), Severity: SevError})
			continue
		}
		r.sets = append(r.sets, s)
		markSet(doc, len(r.sets))
	}
	interpolate(doc, "", lookup, r, false)

	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		dir = filepath.Dir(file)
	}
	sp := &Spec{File: file, Dir: dir, pos: map[string]Pos{}, sets: r.sets, expanded: r.expanded, Epochs: 1, Deterministic: true, Optimize: true,
		scalars: map[string]*yaml.Node{}, lines: strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")}
	d := &decoder{r: r, pos: sp.pos, scalars: sp.scalars}
	var top document
	d.decode(doc, reflect_(&top), "")
	if doc.Kind != yaml.MappingNode {
		return nil, r.diags
	}
	sp.Version, sp.Name, sp.Seed, sp.Resources = top.Version, top.Name, top.Seed, top.Resources
	if top.Epochs != nil {
		sp.Epochs = *top.Epochs
	}
	if top.Deterministic != nil {
		sp.Deterministic = *top.Deterministic
	}
	if top.Optimize != nil {
		sp.Optimize = *top.Optimize
	}
	at := func(path string) (int, int) { p := sp.rawPosOf(path); return p.Line, p.Col }
	if _, ok := sp.pos["version"]; ok && sp.Version != Version && !r.undecoded["version"] {
		l, c := at("version")
		r.add(SevError, l, c, "version", "unsupported spec version %d (this runner reads version %d)", sp.Version, Version)
	}
	if _, ok := sp.pos["name"]; ok && !nameRe.MatchString(sp.Name) && !r.undecoded["name"] {
		l, c := at("name")
		r.add(SevError, l, c, "name", "invalid name %q: use lowercase letters, digits, '_' and '-', starting with a letter or digit", sp.Name)
	}
	if sp.Seed != nil && *sp.Seed < 0 {
		// A run's seed is unsigned: -1 was run, logged and reported as
		// 18446744073709551615, which --set seed= then refused.
		l, c := at("seed")
		r.add(SevError, l, c, "seed", "must be 0 or more, got %d", *sp.Seed)
	}
	if w := sp.Resources.Workers; w.N > MaxParallelism {
		// A stage of parallelism auto gets them all: 100000000 workers
		// held 24 GB and ignored the signal to stop.
		l, c := at("resources.workers")
		r.add(SevError, l, c, "resources.workers", "must be at most %d, got %d: a stage of parallelism auto gets one worker each", MaxParallelism, w.N)
	}
	if sp.Epochs < 0 {
		l, c := at("epochs")
		r.add(SevError, l, c, "epochs", "must be 0 (until stopped) or more, got %d", sp.Epochs)
	}
	if _, ok := sp.pos["stages"]; ok && len(top.Stages) == 0 {
		l, c := at("stages")
		r.add(SevError, l, c, "stages", "a pipeline needs at least one stage")
	}
	for i, raw := range top.Stages {
		if st := decodeStage(d, sp, opts.Catalog, i, raw.node); st != nil {
			sp.Stages = append(sp.Stages, st)
		}
	}
	link(sp, r, opts.Catalog)
	check(sp, r, opts)
	r.diags.Sort()
	return sp, r.diags
}

// secondDocument is the line where a second YAML document starts in
// data, or 0 when it holds one (a "---" before the first is fine).
func secondDocument(data []byte) int {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first, next yaml.Node
	if dec.Decode(&first) != nil {
		return 0
	}
	var err error
	for {
		next = yaml.Node{}
		err = dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return 0
		}
		// A trailing --- (and perhaps a comment) is an empty document,
		// as PyYAML reads it: nothing is lost, however
		// many there are.
		if err != nil || len(next.Content) > 0 && next.Content[0].ShortTag() != "!!null" {
			break
		}
	}
	lines := strings.Split(string(data), "\n")
	if err == nil {
		// The separator that starts it: the last before its content,
		// past any empty documents before it.
		at := next.Content[0].Line
		for i := min(at, len(lines)) - 1; i >= 0; i-- {
			if strings.HasPrefix(lines[i], "---") {
				return i + 1
			}
		}
		return at
	}
	// Broken YAML: the separator after the first document's content.
	content := false
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "---") && content:
			return i + 1
		case t != "" && !strings.HasPrefix(t, "#") && !strings.HasPrefix(t, "%") && !strings.HasPrefix(l, "---"):
			content = true
		}
	}
	return 1
}

func decodeStage(d *decoder, sp *Spec, cat Catalog, i int, n *yaml.Node) *Stage {
	path := fmt.Sprintf("stages[%d]", i)
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a stage mapping, got %s", describe(n))
		return nil
	}
	st := &Stage{Index: i, Path: path, Pos: Pos{File: sp.File, Line: n.Line, Col: n.Column}}
	// Split the stage's keys: the common ones, then the type's own.
	commonNode := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
	rest := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
	for j := 0; j+1 < len(n.Content); j += 2 {
		if commonKeys[n.Content[j].Value] {
			commonNode.Content = append(commonNode.Content, n.Content[j], n.Content[j+1])
		} else {
			rest.Content = append(rest.Content, n.Content[j], n.Content[j+1])
		}
	}
	var c common
	d.decode(commonNode, reflect_(&c), path)
	st.Name, st.Type, st.OnError, st.Parallelism = c.Name, c.Type, c.OnError, c.Parallelism
	if c.Parallelism.N > MaxParallelism {
		l, col := posLC(sp, path+".parallelism")
		d.r.add(SevError, l, col, path+".parallelism", "must be at most %d, got %d: each is a worker with a sample in hand; auto gives one a core", MaxParallelism, c.Parallelism.N)
	}
	named := false
	for j := 0; j+1 < len(n.Content); j += 2 {
		named = named || n.Content[j].Value == "name"
	}
	if named && c.Name == "" {
		l, col := posLC(sp, path+".name")
		d.r.add(SevError, l, col, path+".name", "stage name must not be empty")
	}
	if c.Name != "" && !stageNameRe.MatchString(c.Name) {
		l, col := posLC(sp, path+".name")
		d.r.add(SevError, l, col, path+".name", "invalid stage name %q: use letters, digits, '_' and '-', starting with a letter or digit", c.Name)
	}
	if c.Input != "" && len(c.Inputs) > 0 {
		l, col := posLC(sp, path+".inputs")
		d.r.add(SevError, l, col, path+".inputs", "set input or inputs, not both")
	}
	if c.Input != "" {
		st.InputNames = []string{c.Input}
	} else {
		st.InputNames = c.Inputs
	}
	switch c.OnError {
	case "", "fail":
		st.OnError = "fail"
	case "skip":
	default:
		l, col := posLC(sp, path+".on_error")
		d.r.add(SevError, l, col, path+".on_error", "must be fail or skip, got %q", c.OnError)
	}
	if c.Type == "" {
		// `Type: range`: the type's keys are never read, so a key that
		// is a common one but for case or a letter would go unnamed
		// behind "missing required field type".
		for j := 0; j+1 < len(rest.Content); j += 2 {
			k := rest.Content[j]
			for _, want := range []string{"name", "type"} {
				if strings.EqualFold(k.Value, want) || didyoumean.Distance(k.Value, want) == 1 {
					d.r.add(SevError, k.Line, k.Column, path+"."+k.Value, "unknown field %q (did you mean %q?)", k.Value, want)
				}
			}
		}
		return st
	}
	if cat == nil {
		d.r.add(SevError, n.Line, n.Column, path, "internal: no stage catalog")
		return nil
	}
	t, ok := cat.Lookup(c.Type)
	if !ok {
		l, col := posLC(sp, path+".type")
		d.r.add(SevError, l, col, path+".type", "unknown stage type %q%s", c.Type, suggest(c.Type, cat.Names()))
		return st
	}
	st.Role = t.Role
	for j := 0; j+1 < len(commonNode.Content); j += 2 {
		k := commonNode.Content[j]
		bad := (k.Value == "on_error" && !t.OnError) || (k.Value == "parallelism" && !t.Parallel) ||
			((k.Value == "input" || k.Value == "inputs") && t.Role == RoleSource)
		if bad {
			d.r.add(SevError, k.Line, k.Column, path+"."+k.Value, "stage type %s does not take %s", t.Name, k.Value)
		}
	}
	cfg := t.NewConfig()
	// The common keys this type takes, offered for a misspelt key at the
	// stage's top level only (not inside features: of a parse_example).
	// name and type too, for Name: beside a type.
	d.extra, d.extraAt = []string{"name", "type"}, path
	if t.Role != RoleSource {
		d.extra = append(d.extra, "input", "inputs")
	}
	if t.OnError {
		d.extra = append(d.extra, "on_error")
	}
	if t.Parallel {
		d.extra = append(d.extra, "parallelism")
	}
	d.decode(rest, reflect_(cfg), path)
	d.extra, d.extraAt = nil, ""
	st.Config = cfg
	return st
}

func posLC(sp *Spec, path string) (int, int) {
	p := sp.rawPosOf(path)
	return p.Line, p.Col
}

// sinkNames lists the catalog's sink types, for the error of a pipeline
// without one.
func sinkNames(cat Catalog) []string {
	var out []string
	if cat == nil {
		return out
	}
	for _, n := range cat.Names() {
		if t, ok := cat.Lookup(n); ok && t.Role == RoleSink {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// link resolves inputs, checks names and roles, and orders the DAG.
func link(sp *Spec, r *reporter, cat Catalog) {
	byName := map[string]*Stage{}
	// unwired holds the stages a stage that could not be wired (its type
	// unknown, its name taken) would have read, and such a stage itself:
	// they look unread, and saying so would only add noise to the error
	// that explains it.
	unwired := map[string]bool{}
	afterUnnamed := map[*Stage]bool{} // reads, by default, a stage with no name
	for i, st := range sp.Stages {
		if st.Config == nil {
			for _, n := range st.InputNames {
				unwired[n] = true
			}
			if len(st.InputNames) == 0 && i > 0 {
				unwired[sp.Stages[i-1].Name] = true
			}
		}
		if st.Name == "" {
			continue
		}
		if prev, dup := byName[st.Name]; dup {
			unwired[st.Name] = true
			l, c := posLC(sp, st.Path+".name")
			r.add(SevError, l, c, st.Path+".name", "duplicate stage name %q (first used by %s)", st.Name, prev.Path)
			continue
		}
		byName[st.Name] = st
	}
	for i, st := range sp.Stages {
		if st.Type == "" || st.Config == nil {
			continue
		}
		if st.Role != RoleSource && len(st.InputNames) == 0 {
			if i == 0 {
				r.add(SevError, st.Pos.Line, st.Pos.Col, st.Path, "stage %q has no input: it is the first stage, so set input or use a source type", st.Name)
				st.InputNames = []string{""} // unresolved: its checks, quiet, find no field missing
				continue
			}
			prev := sp.Stages[i-1]
			if prev.Role == RoleSink {
				which := strconv.Quote(prev.Name)
				if prev.Name == "" {
					which = prev.Path
				}
				r.add(SevError, st.Pos.Line, st.Pos.Col, st.Path, "stage %q has no input: the stage before it, %s, is a sink; set input", st.Name, which)
				st.InputNames = []string{""}
				continue
			}
			// Where prev has no name (reported), the input is "": it
			// stays unresolved, so that the stage is checked quietly, and
			// "unknown input" is not said (an echo of the error). An
			// input the user wrote empty is still unknown.
			st.InputNames = []string{prev.Name}
			if prev.Name == "" {
				afterUnnamed[st] = true
			}
		}
		if st.Role == RoleJoin && len(st.InputNames) < 2 {
			l, c := posLC(sp, st.Path+".inputs")
			r.add(SevError, l, c, st.Path+".inputs", "%s joins streams: list at least two inputs", st.Type)
		}
		if st.Role != RoleJoin && len(st.InputNames) > 1 {
			l, c := posLC(sp, st.Path+".inputs")
			r.add(SevError, l, c, st.Path+".inputs", "%s takes one input, got %d", st.Type, len(st.InputNames))
		}
		for j, name := range st.InputNames {
			in, ok := byName[name]
			field := st.Path + ".input"
			if len(st.InputNames) > 1 || sp.pos[st.Path+".inputs"] != (Pos{}) {
				field = fmt.Sprintf("%s.inputs[%d]", st.Path, j)
			}
			l, c := posLC(sp, field)
			switch {
			case !ok && afterUnnamed[st]:
				// The stage before it has no name (reported).
			case !ok:
				// Only the stages it could read: not itself, nor a sink.
				names := make([]string, 0, len(byName))
				for n, o := range byName {
					if o != st && o.Role != RoleSink {
						names = append(names, n)
					}
				}
				if name == "" {
					// A guess at an empty name is any name.
					r.add(SevError, l, c, field, "empty input name (stages here: %s)", strings.Join(sortedStrings(names), ", "))
					break
				}
				r.add(SevError, l, c, field, "unknown input %q%s", name, suggest(name, sortedStrings(names)))
			case in == st:
				unwired[st.Name] = true // "not read by any stage" would echo this
				r.add(SevError, l, c, field, "stage %q reads its own output", st.Name)
			case in.Role == RoleSink:
				r.add(SevError, l, c, field, "input %q is a sink and has no output", name)
			default:
				st.Inputs = append(st.Inputs, in)
				in.Outputs = append(in.Outputs, st)
			}
		}
	}
	// Kahn's algorithm; what is left over sits on a cycle.
	indeg := map[*Stage]int{}
	for _, st := range sp.Stages {
		indeg[st] = len(st.Inputs)
	}
	var queue []*Stage
	for _, st := range sp.Stages {
		if indeg[st] == 0 {
			queue = append(queue, st)
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		sp.Order = append(sp.Order, st)
		for _, o := range st.Outputs {
			if indeg[o]--; indeg[o] == 0 {
				queue = append(queue, o)
			}
		}
	}
	if len(sp.Order) < len(sp.Stages) {
		for _, st := range sp.Stages {
			if indeg[st] > 0 && reaches(st, st, map[*Stage]bool{}) {
				l, c := posLC(sp, st.Path+".input")
				if _, ok := sp.pos[st.Path+".inputs"]; ok {
					l, c = posLC(sp, st.Path+".inputs")
				}
				r.add(SevError, l, c, st.Path, "stage %q is part of a cycle", st.Name)
			}
		}
	}
	// A stage that nothing reads, of an unknown type (reported already)
	// close to a sink's, is the sink meant: "dscard" got a second error,
	// "no sink", listed first.
	hasSink := false
	for _, st := range sp.Stages {
		if st.Role == RoleSink && st.Config != nil || st.Config == nil && len(st.Outputs) == 0 && meantSink(st.Type, cat) {
			hasSink = true
		}
		if st.Role != RoleSink && st.Config != nil && len(st.Outputs) == 0 && st.Name != "" && !unwired[st.Name] {
			r.add(SevWarning, st.Pos.Line, st.Pos.Col, st.Path, "output of stage %q is not read by any stage", st.Name)
		}
	}
	if len(sp.Stages) > 0 && !hasSink {
		r.add(SevError, sp.Stages[0].Pos.Line, sp.Stages[0].Pos.Col, "stages", "the pipeline has no sink: add one of %s", strings.Join(sinkNames(cat), ", "))
	}
}

// meantSink reports whether the unknown stage type t is a misspelt sink's.
func meantSink(t string, cat Catalog) bool {
	st, ok := cat.Lookup(didyoumean.Closest(t, cat.Names()))
	return ok && st.Role == RoleSink
}

// reaches reports whether to can be reached from from's outputs.
func reaches(from, to *Stage, seen map[*Stage]bool) bool {
	for _, o := range from.Outputs {
		if o == to {
			return true
		}
		if !seen[o] {
			seen[o] = true
			if reaches(o, to, seen) {
				return true
			}
		}
	}
	return false
}

// check propagates schemas in topological order, letting each config
// validate itself against what reaches it.
func check(sp *Spec, r *reporter, opts Options) {
	tainted := map[*Stage]bool{} // below a stage with an error
	open := map[*Stage]bool{}    // whether a stage's own schema was open
	for _, st := range sp.Order {
		if st.Config == nil {
			st.Schema = sample.Schema{Open: true}
			continue
		}
		unresolved := len(st.Inputs) != len(st.InputNames)
		if unresolved {
			// An input did not resolve: the stage is checked, quietly,
			// against open schemas, which find no field missing and no
			// type wrong, so that its own settings (batch size: 0) and
			// its environment (an output folder) are not left for the
			// rerun.
			st.InSchemas = make([]sample.Schema, len(st.InputNames))
			for i := range st.InSchemas {
				st.InSchemas[i] = sample.Schema{Open: true}
			}
		} else {
			st.InSchemas = make([]sample.Schema, len(st.Inputs))
			for i, in := range st.Inputs {
				st.InSchemas[i] = in.Schema
			}
		}
		before := len(r.diags.Errors())
		c := &CheckContext{Spec: sp, Stage: st, Inputs: st.InSchemas, Environment: opts.Environment, r: r, quiet: unresolved}
		for _, in := range st.Inputs {
			// Below a stage with an error, what the stage sees is a guess
			// (an open schema, fields of unknown type): warnings about it
			// would be the error's echo. Errors still count.
			c.quiet = c.quiet || !in.Valid || tainted[in]
		}
		tainted[st] = c.quiet
		if ck, ok := st.Config.(Checker); ok {
			st.Schema = ck.Check(c)
		} else if len(st.InSchemas) > 0 {
			st.Schema = st.InSchemas[0]
		}
		st.Valid = len(r.diags.Errors()) == before && !c.dropped && !unresolved
		open[st] = st.Schema.Open
		if !st.Valid {
			// Downstream stages see an open schema so one mistake does not
			// cascade into a diagnostic for every later field reference.
			st.Schema.Open = true
		}
	}
	partlyChecked(sp, r, tainted, open)
	// Two stages writing one path would leave the output of whichever
	// committed last.
	// Nor may one write over the spec itself.
	writers := map[string]string{}
	if abs, err := filepath.Abs(sp.File); err == nil {
		writers[OutputKey(abs)] = ""
	}
	for _, st := range sp.Stages {
		o, ok := st.Config.(Outputter)
		if !ok {
			continue
		}
		// The folders other stages write, for the clash check below: once
		// per stage, not per path (sorting them for each of 19000 shards
		// took validate a minute).
		var others []string
		for _, w := range slices.Sorted(maps.Keys(writers)) {
			if by := writers[w]; by != "" && by != st.Name && !strings.Contains(w, "://") {
				others = append(others, w)
			}
		}
		for _, p := range o.OutputPaths(sp.Resolve) {
			first, dup := writers[OutputKey(p)]
			if dup && first != st.Name {
				c := &CheckContext{Spec: sp, Stage: st, r: r}
				shown := p
				if st, err := os.Lstat(p); err == nil && st.Mode()&os.ModeSymlink != 0 {
					shown = fmt.Sprintf("%s (a link to %s)", p, OutputKey(p))
				}
				if first == "" {
					c.Errorf("", "writes %s, the spec itself", shown)
				} else {
					c.Errorf("", "writes %s, which stage %q writes too", shown, first)
				}
				break
			}
			// A file where a cache keeps its own, in a folder below
			// another's output (one per fingerprint): a sink writing a
			// cache's manifest.json damaged it. Anything else there is
			// passed over by the cache commands, which read only folders
			// that hold a manifest.json.
			k, clash := OutputKey(p), ""
			for _, w := range others {
				by, sep := writers[w], string(filepath.Separator)
				switch {
				case strings.HasPrefix(k, w+sep) && inCacheFolder(k[len(w)+1:]):
					clash = fmt.Sprintf("writes %s, inside the folder %s that stage %q writes", p, w, by)
				case strings.HasPrefix(w, k+sep) && inCacheFolder(w[len(k)+1:]):
					clash = fmt.Sprintf("writes the folder %s, around %s that stage %q writes", p, w, by)
				}
				if clash != "" {
					break
				}
			}
			if clash != "" {
				(&CheckContext{Spec: sp, Stage: st, r: r}).Errorf("", "%s", clash)
				break
			}
			writers[OutputKey(p)] = st.Name
		}
	}
}

// unknownField picks the field name out of the messages the checks give
// for a field that does not reach them: expressions', map's and batch's
// "unknown field", a source field's "input has no field".
var unknownField = regexp.MustCompile(`(?:unknown field|has no field) ("[^"]*")`)

// partlyChecked finds what the open schemas below a stage with errors
// hide: a field read there that no stage makes is not reported, so that
// one mistake does not cascade, and a CI user who fixed the first error
// met the next only on the rerun. It checks the stages below again,
// quietly, into a scratch list, with the schemas of the stages in error
// closed, and turns each unknown field found there, and only that kind
// of error, into a warning at its place: an error, it might be the echo
// of the one above (a field that stage would make once fixed). Checks run
// without the environment (a serve sink's must not listen twice), and
// only when there are errors, so no run sees the state they leave.
func partlyChecked(sp *Spec, r *reporter, tainted, open map[*Stage]bool) {
	seen := map[string]bool{}
	for _, d := range r.diags {
		seen[d.String()] = true
	}
	closed := map[*Stage]sample.Schema{}
	above := map[*Stage][]string{} // the stages in error above each stage
	for _, st := range sp.Order {
		for _, in := range st.Inputs {
			for _, a := range above[in] {
				if !slices.Contains(above[st], a) {
					above[st] = append(above[st], a)
				}
			}
		}
		// A stage with errors of its own, also one below another (a map
		// with a keep below an unknown stage type) or one whose input
		// does not resolve, passes on the schema its check made, closed
		// as that made it; below another in error, as its check makes
		// it from the closed schemas above. Nothing it finds is told:
		// it is in error.
		if isOpen, checked := open[st]; !st.Valid && checked && st.Name != "" {
			s := st.Schema
			s.Open = isOpen
			if ck, ok := st.Config.(Checker); ok && len(above[st]) > 0 && len(st.Inputs) == len(st.InputNames) {
				s = ck.Check(&CheckContext{Spec: sp, Stage: st, Inputs: closedInputs(st, closed), r: &reporter{file: r.file, sets: r.sets, undecoded: r.undecoded}, quiet: true})
			}
			closed[st] = s
			above[st] = append(above[st], strconv.Quote(st.Name))
			continue
		}
		// A stage with no stage in error above it sees what it saw
		// before (below an unknown stage type, say): nothing to
		// attribute a finding to.
		if !tainted[st] || len(above[st]) == 0 || st.Config == nil || len(st.Inputs) != len(st.InputNames) {
			continue
		}
		ins := closedInputs(st, closed)
		scratch := &reporter{file: r.file, sets: r.sets, undecoded: r.undecoded}
		c := &CheckContext{Spec: sp, Stage: st, Inputs: ins, r: scratch, quiet: true}
		closed[st] = ins[0]
		if ck, ok := st.Config.(Checker); ok {
			closed[st] = ck.Check(c)
		}
		for _, d := range scratch.diags.Errors() {
			m := unknownField.FindStringSubmatch(d.Message)
			if m == nil && !seen[d.String()] {
				// Some other error with the schemas closed (a concat's
				// inputs differ): what it passes on is a guess again.
				s := closed[st]
				s.Open = true
				closed[st] = s
			}
			if m == nil || seen[d.String()] {
				continue
			}
			roots := above[st]
			what := "stage " + roots[0] + " has errors"
			if n := len(roots); n > 1 {
				what = "stages " + strings.Join(roots[:n-1], ", ") + " and " + roots[n-1] + " have errors"
			}
			d.Severity = SevWarning
			d.Message = fmt.Sprintf("field %s is made by no stage above, as far as validate can tell while %s; validate again once they are fixed", m[1], what)
			r.diags = append(r.diags, d)
		}
	}
}

// closedInputs are the schemas st reads, closed where partlyChecked has
// closed them.
func closedInputs(st *Stage, closed map[*Stage]sample.Schema) []sample.Schema {
	ins := make([]sample.Schema, len(st.Inputs))
	for i, in := range st.Inputs {
		ins[i] = in.Schema
		if c, ok := closed[in]; ok {
			ins[i] = c
		}
	}
	return ins
}

// CheckContext is what a stage config sees while it is validated.
type CheckContext struct {
	Spec   *Spec
	Stage  *Stage
	Inputs []sample.Schema
	// Environment is true when checks may touch the machine.
	Environment bool
	r           *reporter
	// dropped says an error was left out because the decoder had
	// reported its field already; the stage is no more valid for that.
	dropped bool
	// quiet drops warnings: the stage is below one with an error.
	quiet bool
}

// Input returns the schema of the stage's first input (empty for sources).
func (c *CheckContext) Input() sample.Schema {
	if len(c.Inputs) == 0 {
		return sample.Schema{}
	}
	return c.Inputs[0]
}

// Given says where the value of field came from, for the values that N
// processes a launcher starts from one spec may hold apart
// (out/part-${RANK}.jsonl): set reports a --set (given per process), and
// vars lists the environment variables it read that are set here, in the
// order read. An unset variable's default is the same in every process.
func (c *CheckContext) Given(field string) (set bool, vars []string) {
	p := c.FieldPath(field)
	return c.Spec.rawPosOf(p).Line < 0, c.Spec.expanded[c.Spec.scalars[p]]
}

// FieldPath returns the diagnostic path of a field of the stage's config.
func (c *CheckContext) FieldPath(field string) string {
	if field == "" {
		return c.Stage.Path
	}
	if strings.HasPrefix(field, "[") {
		return c.Stage.Path + field
	}
	return c.Stage.Path + "." + field
}

// Errorf reports a problem with a field of the stage's config ("" for the
// stage itself), at that field's position. A field the decoder reported
// (missing, or of the wrong type), or one of whose elements it reported,
// gets no second error: the config holds zero values, and a complaint
// about them says nothing new.
func (c *CheckContext) Errorf(field, format string, args ...any) {
	p := c.FieldPath(field)
	if c.r.isUndecoded(p) || field != "" && c.r.undecodedBelow(p) {
		c.dropped = true
		return
	}
	pos := c.Spec.rawPosOf(p)
	c.r.add(SevError, pos.Line, pos.Col, p, format, args...)
}

// Warnf reports a warning at a field's position.
func (c *CheckContext) Warnf(field, format string, args ...any) {
	p := c.FieldPath(field)
	if c.quiet || c.r.isUndecoded(p) || field != "" && c.r.undecodedBelow(p) {
		return // its value had an error already: a warning about it would be about the default
	}
	pos := c.Spec.rawPosOf(p)
	c.r.add(SevWarning, pos.Line, pos.Col, p, format, args...)
}

// ErrorAt reports a problem at an explicit position, for diagnostics inside
// a value such as an expression.
func (c *CheckContext) ErrorAt(pos Pos, field, format string, args ...any) {
	p := c.FieldPath(field)
	if c.r.isUndecoded(p) {
		c.dropped = true
		return
	}
	c.r.add(SevError, pos.Line, pos.Col, p, format, args...)
}

// Has reports whether the spec sets a field of the stage's config.
func (c *CheckContext) Has(field string) bool {
	_, ok := c.Spec.pos[c.FieldPath(field)]
	return ok
}

// ValuePos returns where a place inside a field's value stands in the
// file (Spec.ValuePos).
func (c *CheckContext) ValuePos(field string, line, col int) (Pos, bool) {
	return c.Spec.ValuePos(c.FieldPath(field), line, col)
}

// Pos returns the position of a field of the stage's config.
func (c *CheckContext) Pos(field string) Pos { return c.Spec.rawPosOf(c.FieldPath(field)) }

// Resolve makes a spec-relative path absolute.
func (c *CheckContext) Resolve(p string) string { return c.Spec.Resolve(p) }

// ResolvePattern is Spec.ResolvePattern.
func (c *CheckContext) ResolvePattern(p string) string { return c.Spec.ResolvePattern(p) }
