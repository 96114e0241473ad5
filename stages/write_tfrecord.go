package stages

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/sample"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/tensor"
	"github.com/piperun/piperun/tfrecord"
)

// The hooks this file's types provide, checked by the compiler: the
// engine and planner find them by type assertion, where a changed
// signature would silently turn a hook off.
var (
	_ plan.WholeWriter = (*WriteTFRecordConfig)(nil)
	_ spec.Checker     = (*WriteTFRecordConfig)(nil)
	_ spec.Outputter   = (*WriteTFRecordConfig)(nil)
	_ Preparer         = (*tfrecordSink)(nil)
	_ Sink             = (*tfrecordSink)(nil)
)

// WriteTFRecordConfig configures the write_tfrecord sink.
type WriteTFRecordConfig struct {
	Path        string `yaml:"path" jsonschema:"required" jsonschema_description:"Output path; {shard} and {shards} become 5-digit numbers, e.g. out/train-{shard}-of-{shards}.tfrecord."`
	Shards      int    `yaml:"shards" jsonschema:"minimum=1,maximum=65536" jsonschema_description:"Number of files; sample i goes to shard i mod shards (default 1)."`
	Compression string `yaml:"compression" jsonschema:"enum=none,enum=gzip,enum=zlib,enum=NONE,enum=GZIP,enum=ZLIB" jsonschema_description:"none (default), gzip or zlib."`

	// bools are the fields that are booleans batched into uint8 tensors:
	// written as int64_lists of 0 and 1, as a single bool is, not as the
	// raw bytes a uint8 image is.
	bools map[string]bool
}

func init() {
	register(&Type{
		StageType: spec.StageType{Name: "write_tfrecord", Role: spec.RoleSink, Doc: "Writes samples as tf.train.Example records into sharded TFRecord files, renamed into place when the run succeeds.",
			NewConfig: func() any { return &WriteTFRecordConfig{Shards: 1, Compression: "none"} }},
		Build: buildWriteTFRecord,
	})
}

// placeholder matches what looks like a {name} in an output path.
var placeholder = regexp.MustCompile(`\{[A-Za-z_]+\}`)

// ShardPath returns the path of shard i of n.
func ShardPath(pattern string, i, n int) string {
	r := strings.NewReplacer("{shard}", fmt.Sprintf("%05d", i), "{shards}", fmt.Sprintf("%05d", n))
	return r.Replace(pattern)
}

// Check implements spec.Checker.
func (c *WriteTFRecordConfig) Check(cc *spec.CheckContext) sample.Schema {
	if c.Path == "" {
		cc.Errorf("path", "must not be empty")
	}
	if c.Shards < 1 {
		cc.Errorf("shards", "must be at least 1, got %d", c.Shards)
	}
	if c.Shards > MaxShards {
		cc.Errorf("shards", "must be at most %d, got %d: every shard is a file open as the run writes", MaxShards, c.Shards)
	}
	if c.Shards > 1 && !strings.Contains(c.Path, "{shard}") {
		cc.Errorf("path", "with %d shards the path must contain {shard}", c.Shards)
	}
	sharedOutput(cc, c.Path)
	// A mistyped placeholder would be written literally into the name.
	for _, m := range placeholder.FindAllString(c.Path, -1) {
		if m != "{shard}" && m != "{shards}" {
			cc.Errorf("path", "unknown placeholder %s (known: {shard}, {shards})", m)
		}
	}
	comp, auto, err := tfrecord.ParseCompression(c.Compression)
	if err != nil || auto {
		cc.Errorf("compression", "must be none, gzip or zlib, got %q", c.Compression)
	}
	_ = comp
	// Only a list whose elements are not known before the run can fail to
	// write (a JSON array, a literal mixing kinds). A field of kind Any gets
	// no warning, though it too may hold such a list: every key of a jsonl
	// source is Any, and warning on each would drown the warnings that
	// matter.
	c.bools = map[string]bool{}
	for _, f := range cc.Input().Fields {
		if f.Type.Kind == sample.Tensor && f.Type.Elem == sample.Bool {
			c.bools[f.Name] = true
		}
		if f.Type.Kind != sample.List {
			continue
		}
		switch f.Type.Elem {
		case sample.Int, sample.Float, sample.Bool, sample.String, sample.Bytes:
		case sample.List:
			// A batch of a list field always fails to write (a new-user
			// test: validate only warned, and every run failed).
			cc.Errorf("", "field %q is %s: a batch stacks each sample's list into a list of lists, and a TFRecord feature holds one flat list; drop the field before the batch (a map's drop), or write with write_jsonl, which keeps nested lists", f.Name, f.Type)
		default:
			cc.Warnf("", "field %q is %s, whose elements are known only at run time: it can be written only if they are all numbers and booleans (an int64_list, or a float_list if any is a float) or all strings and bytes (a bytes_list)", f.Name, f.Type)
		}
	}
	if lim, ok := openFileLimit(); ok && cc.Environment && c.Shards >= 1 && c.Shards <= MaxShards && uint64(c.Shards)+shardsSpare > lim {
		// Every shard is open until the commit: 100001 of them failed at
		// the run's start, "too many open files".
		cc.Errorf("shards", "the %d shards are all open as the run writes them, more than the %d files this process may open (ulimit -n) less %d for the rest of the run: write fewer shards, or raise the limit", c.Shards, lim, shardsSpare)
	}
	if cc.Environment && c.Path != "" && c.Shards >= 1 && c.Shards <= MaxShards {
		if stale := otherShards(cc.Resolve(c.Path), c.Shards); len(stale) > 0 {
			them := "them"
			if len(stale) == 1 {
				them = "it"
			}
			cc.Warnf("path", "%s (left by a run with another number of shards?): a pattern reading the output, such as %s, would read %s too; remove %[3]s, or write elsewhere",
				staleWords(filepath.Dir(c.Path), stale, c.Shards), placeholder.ReplaceAllString(c.Path, "*"), them)
		}
	}
	if err := FileName(ShardPath(c.Path, max(c.Shards, 1)-1, max(c.Shards, 1))); c.Path != "" && err != nil {
		cc.Errorf("path", "%v", err)
	} else if cc.Environment && c.Path != "" && c.Shards <= MaxShards {
		err := checkWritable(cc.Resolve(ShardPath(c.Path, 0, max(c.Shards, 1))))
		// Shards whose paths lead to one file through links would replace
		// one another (a re-test: shard 0's records lost, exit 0).
		written := map[string]int{}
		for i := 0; err == nil && i < max(c.Shards, 1); i++ {
			p := cc.Resolve(ShardPath(c.Path, i, max(c.Shards, 1)))
			if err = replaceable(p); err != nil {
				break
			}
			target, terr := OutputPath(p)
			if terr != nil {
				err = terr
				break
			}
			if j, ok := written[target]; ok {
				err = fmt.Errorf("shard %d, %s, is a link to %s, which shard %d writes: one would replace the other", i, p, target, j)
				if target != cc.Resolve(ShardPath(c.Path, j, c.Shards)) {
					err = fmt.Errorf("shards %d and %d, %s and %s, lead to one file, %s: one would replace the other", j, i, cc.Resolve(ShardPath(c.Path, j, c.Shards)), p, target)
				}
				break
			}
			written[target] = i
		}
		if err != nil {
			cc.Errorf("path", "%v", err)
		}
	}
	return sample.Schema{}
}

// shardsSpare is the open files write_tfrecord leaves to the rest of a
// run beside its shards: the sources' files, a cache's store, sockets.
const shardsSpare = 64

// otherShards lists the files in the folder of path, a resolved shard
// path, that it names for some shard or shard count but that a run
// writing n shards does not write: a set of 3 shards rewritten as 2
// leaves its third beside them. Nothing is said of a path with no
// placeholder in its file name, or with one in its folders.
func otherShards(path string, n int) []string {
	dir, base := filepath.Split(path)
	if !placeholder.MatchString(base) || placeholder.MatchString(dir) {
		return nil
	}
	re, err := regexp.Compile("^" + strings.NewReplacer(`\{shard\}`, `[0-9]{5}`, `\{shards\}`, `[0-9]{5}`).Replace(regexp.QuoteMeta(base)) + "$")
	if err != nil {
		return nil
	}
	ours := map[string]bool{}
	for i := range n {
		ours[filepath.Base(ShardPath(path, i, n))] = true
	}
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return nil // what cannot be listed is said where it is written
	}
	var stale []string
	for _, e := range entries {
		if e.Type().IsRegular() && re.MatchString(e.Name()) && !ours[e.Name()] {
			stale = append(stale, e.Name())
		}
	}
	return stale // ReadDir sorts by name
}

// staleWords names the files otherShards found, in the spec's folder
// dir, as a warning begins: "a, b, c and 2 more match this path but …".
func staleWords(dir string, stale []string, n int) string {
	names := make([]string, 0, 3)
	for _, s := range stale[:min(len(stale), 3)] {
		names = append(names, filepath.Join(dir, s))
	}
	list := strings.Join(names, ", ")
	if more := len(stale) - len(names); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	} else if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	verb, not := "match", "are not"
	if len(stale) == 1 {
		verb, not = "matches", "is not"
	}
	if n == 1 {
		return fmt.Sprintf("%s %s this path but %s the shard it writes", list, verb, not)
	}
	return fmt.Sprintf("%s %s this path but %s among the %d shards it writes", list, verb, not, n)
}

// WritesWhole implements plan.WholeWriter: the file is renamed into place
// when the run ends.
func (c *WriteTFRecordConfig) WritesWhole() {}

// OutputPaths implements spec.Outputter: every shard.
func (c *WriteTFRecordConfig) OutputPaths(resolve func(string) string) []string {
	if c.Path == "" || c.Shards > MaxShards { // refused by Check
		return nil
	}
	var out []string
	for i := range max(c.Shards, 1) {
		out = append(out, resolve(ShardPath(c.Path, i, max(c.Shards, 1))))
	}
	return out
}

// MaxShards is the most files write_tfrecord writes: 100000000 of them
// spent minutes and gigabytes building their names.
const MaxShards = 1 << 16

type tfrecordSink struct {
	env     *Env
	bools   map[string]bool
	files   []*atomicFile
	paths   []string // the shards' paths, as the spec names them
	checked bool     // whether Prepare looked for another writer
	writers []*tfrecord.Writer
	n       int64
	// kinds is the list kind each feature was first written as, and where,
	// to warn once of a feature written as two kinds: a reader declares
	// one dtype per key, and TensorFlow's parser fails on a record of the
	// other kind.
	kinds  map[string]firstKind
	warned map[string]bool
}

type firstKind struct {
	kind   example.Kind
	record int64
	origin string
}

func buildWriteTFRecord(env *Env, cfg any) (any, error) {
	c := cfg.(*WriteTFRecordConfig)
	comp, _, err := tfrecord.ParseCompression(c.Compression)
	if err != nil {
		return nil, err
	}
	s := &tfrecordSink{env: env, bools: c.bools, kinds: map[string]firstKind{}, warned: map[string]bool{}}
	sweep := tempSweeper{}
	for i := 0; i < c.Shards; i++ {
		s.paths = append(s.paths, env.Resolve(ShardPath(c.Path, i, c.Shards)))
	}
	// Before the run's work, where another writer is known already; and
	// again before the commit (Prepare), for one that began beside it.
	if err := s.alone(sweep); err != nil {
		return nil, err
	}
	for _, p := range s.paths {
		f, err := createAtomicSwept(p, sweep)
		if err != nil {
			s.Abort()
			return nil, err
		}
		s.files = append(s.files, f)
		s.writers = append(s.writers, tfrecord.NewWriter(f, comp))
	}
	return s, nil
}

// alone refuses to write shards another live process is writing: a set of
// several files is renamed into place one by one, and two runs committing
// together left a set mixed from both. One file is replaced whole, the
// last run's, as a shell's > replaces it.
func (s *tfrecordSink) alone(sweep tempSweeper) error {
	if len(s.paths) < 2 {
		return nil
	}
	finals := make([]string, len(s.paths))
	for i, p := range s.paths {
		if finals[i], _ = OutputPath(p); finals[i] == "" {
			finals[i] = p // what stands there is said when it is made
		}
	}
	if pid, p, tmp := sweep.otherWriter(finals); pid != 0 {
		return fmt.Errorf("another process (pid %d) is writing %s (its temporary file %s): committing beside it would leave a set of shards mixed from both runs; run one at a time, or write elsewhere", pid, p, tmp)
	}
	return nil
}

func (s *tfrecordSink) Write(_ context.Context, smp *sample.Sample) error {
	if n := exampleAtLeast(smp.Fields); n > tfrecord.DefaultMaxRecordSize {
		// Refused before the Example is made: it copies float and int
		// tensors (2.2 GiB of int64s made of a 1.1 GiB int32
		// tensor before the size was checked).
		return fmt.Errorf("write_tfrecord: an Example of at least %d bytes is over the %d a protocol buffer (a tf.train.Example) may hold, so neither TensorFlow nor piperun could read it back: %w", n, tfrecord.DefaultMaxRecordSize, tfrecord.ErrRecordTooLarge)
	}
	ex, err := toExample(smp.Fields, s.bools)
	if err != nil {
		return err
	}
	s.checkKinds(ex, smp)
	if n := example.Size(ex); n > tfrecord.DefaultMaxRecordSize {
		// Refused before it is marshalled: a copy of an Example that size
		// took 23 s and 4.2 GB to be refused by the writer.
		return fmt.Errorf("write_tfrecord: an Example of %d bytes is over the %d a protocol buffer (a tf.train.Example) may hold, so neither TensorFlow nor piperun could read it back: %w", n, tfrecord.DefaultMaxRecordSize, tfrecord.ErrRecordTooLarge)
	}
	i := int(s.n % int64(len(s.writers)))
	s.n++
	err = s.writers[i].Write(example.Marshal(ex))
	smp.Recycle() // the Example was marshalled into a copy
	return err
}

// exampleAtLeast is a lower bound of the Example fields make: a uint8
// tensor's bytes, 4 bytes a float, 1 (the least varint) an integer, and
// the bytes of strings and byte strings.
func exampleAtLeast(fields map[string]any) int64 {
	var n int64
	for _, v := range fields {
		t, ok := v.(*tensor.Tensor)
		switch {
		case !ok:
			n += sample.TextBytes(v)
		case t.DType == tensor.Float32 || t.DType == tensor.Float64:
			n += 4 * int64(t.Len())
		default:
			n += int64(t.Len())
		}
	}
	return n
}

// checkKinds warns, once per key, of a feature written as another kind
// than it was first: a jsonl key holding 1 in one line and 1.5 in the
// next is an int64_list in one record and a float_list in the other.
// Refusing would lose a run over data JSON allows; the warning says the
// output mixes kinds and how to give the key one. A feature with no list
// set (an empty list) reads as any kind, so it neither sets nor breaks
// the first kind.
func (s *tfrecordSink) checkKinds(ex *example.Example, smp *sample.Sample) {
	// The first pass, on every record, allocates nothing once each key's
	// kind is known; the sorted one runs only to warn.
	changed := false
	for k, f := range ex.Features {
		if f.Kind == example.KindNone {
			continue
		}
		first, ok := s.kinds[k]
		if !ok {
			s.kinds[k] = firstKind{kind: f.Kind, record: s.n, origin: smp.Describe()}
		} else if first.kind != f.Kind && !s.warned[k] {
			changed = true
		}
	}
	if !changed || s.env.Log == nil {
		return
	}
	keys := make([]string, 0, len(ex.Features))
	for k := range ex.Features {
		keys = append(keys, k)
	}
	sort.Strings(keys) // several keys changing at once warn in one order
	for _, k := range keys {
		f := ex.Features[k]
		first := s.kinds[k]
		if f.Kind == example.KindNone || first.kind == f.Kind || s.warned[k] {
			continue
		}
		s.warned[k] = true
		fix := fmt.Sprintf("give it one type in a map before this sink (a reader that declares %s fails on the other records)", dtypeOf(first.kind))
		if first.kind != example.KindBytes && f.Kind != example.KindBytes {
			fix = "its values are integers in some samples and other numbers in others (a jsonl key, say); for one kind, set it with float(x) in a map"
			if _, list := smp.Fields[k].([]any); list {
				fix = "its values are integers in some samples and other numbers in others (a jsonl key, say); for one kind, set it with map(x, float(#)) in a map"
			}
		}
		s.env.Log.Warn(fmt.Sprintf("field %q is written as %s in %s (%s) and as %s in %s (%s), so the output mixes kinds for one key: %s",
			k, first.kind, s.record(first.record), first.origin, f.Kind, s.record(s.n), smp.Describe(), fix))
	}
}

// record names the n-th record written as inspect numbers it: within
// its shard's file.
func (s *tfrecordSink) record(n int64) string {
	if len(s.files) == 1 {
		return fmt.Sprintf("record %d", n)
	}
	shards := int64(len(s.files))
	return fmt.Sprintf("record %d of %s", n/shards, s.files[n%shards].final)
}

// dtypeOf names the dtype a reader declares to read a feature kind.
func dtypeOf(k example.Kind) string {
	switch k {
	case example.KindFloat:
		return "float32"
	case example.KindInt64:
		return "int64"
	}
	return "string"
}

// Prepare implements Preparer: every shard is written whole before any
// is renamed into place.
func (s *tfrecordSink) Prepare() error {
	// Once, before the files are closed: Commit prepares again, after
	// other sinks may have committed, when a refusal would leave the
	// outputs part committed.
	if !s.checked {
		s.checked = true
		if err := s.alone(tempSweeper{}); err != nil {
			return err
		}
	}
	for i, w := range s.writers {
		if w == nil {
			continue
		}
		s.writers[i] = nil
		if err := w.Close(); err != nil {
			return err
		}
		if err := s.files[i].prepare(); err != nil {
			return err
		}
	}
	return nil
}

func (s *tfrecordSink) Commit() error {
	if err := s.Prepare(); err != nil {
		return err
	}
	return commitAll(s.files)
}

func (s *tfrecordSink) Abort() error {
	var errs []error
	for _, f := range s.files {
		errs = append(errs, f.abort())
	}
	return errors.Join(errs...)
}

// ToExample converts sample fields to a tf.train.Example: integers and
// bools to int64 lists, floats to float lists, strings and bytes to bytes
// lists. A list of numbers and bools is a float list if any element is a
// float and an int64 list otherwise; a list of strings and bytes is a
// bytes list; an empty list is a feature with no list set, an empty list
// of any dtype to a reader. Tensors are flattened (row-major); uint8
// tensors are written as one bytes value holding the raw buffer, the
// compact form images take.
func ToExample(fields map[string]any) (*example.Example, error) { return toExample(fields, nil) }

// toExample is ToExample with the fields that are batched booleans.
func toExample(fields map[string]any, bools map[string]bool) (*example.Example, error) {
	ex := &example.Example{Features: make(map[string]*example.Feature, len(fields))}
	for k, v := range fields {
		if t, ok := v.(*tensor.Tensor); ok && (bools[k] || t.Booleans) && t.DType == tensor.Uint8 {
			ints := make([]int64, len(t.Data))
			for i, b := range t.Data {
				ints[i] = int64(b)
			}
			ex.Features[k] = &example.Feature{Kind: example.KindInt64, Ints: ints}
			continue
		}
		f, err := toFeature(v)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		ex.Features[k] = f
	}
	return ex, nil
}

func toFeature(v any) (*example.Feature, error) {
	switch x := v.(type) {
	case int64:
		return &example.Feature{Kind: example.KindInt64, Ints: []int64{x}}, nil
	case bool:
		return &example.Feature{Kind: example.KindInt64, Ints: []int64{boolInt64(x)}}, nil
	case float64:
		f, err := narrow(x, -1)
		if err != nil {
			return nil, err
		}
		return &example.Feature{Kind: example.KindFloat, Floats: []float32{f}}, nil
	case string:
		return &example.Feature{Kind: example.KindBytes, Bytes: [][]byte{[]byte(x)}}, nil
	case []byte:
		return &example.Feature{Kind: example.KindBytes, Bytes: [][]byte{x}}, nil
	case [][]byte:
		return &example.Feature{Kind: example.KindBytes, Bytes: x}, nil
	case []string:
		b := make([][]byte, len(x))
		for i, s := range x {
			b[i] = []byte(s)
		}
		return &example.Feature{Kind: example.KindBytes, Bytes: b}, nil
	case *tensor.Tensor:
		switch x.DType {
		case tensor.Uint8:
			return &example.Feature{Kind: example.KindBytes, Bytes: [][]byte{x.Data}}, nil
		case tensor.Int32, tensor.Int64:
			out := make([]int64, x.Len())
			for i := range out {
				out[i] = x.IntAt(i)
			}
			return &example.Feature{Kind: example.KindInt64, Ints: out}, nil
		case tensor.Float32:
			return &example.Feature{Kind: example.KindFloat, Floats: append([]float32(nil), x.Float32()...)}, nil
		case tensor.Float64:
			out := make([]float32, x.Len())
			for i, f := range x.Float64() {
				var err error
				if out[i], err = narrow(f, i); err != nil {
					return nil, err
				}
			}
			return &example.Feature{Kind: example.KindFloat, Floats: out}, nil
		}
	case []any:
		return listFeature(x)
	}
	return nil, fmt.Errorf("%s cannot be written as a feature: a feature is one flat list of int64s, floats or bytes", featureWord(v))
}

// listFeature writes a list as the one flat list a feature holds. Whole
// numbers in JSON and in expression literals are ints, so [10, 20.5, 30,
// 40] is one list of coordinates, not a mistake: one float makes the whole
// list a float_list, as tf.train.Feature(float_list=...) would take it. A
// bool is 0 or 1, as a bool field is, so booleans mix with numbers too.
//
// An empty list has no element to say its kind, and the same key may hold
// floats in the next record (a bbox list empty for an image without
// boxes): it is a feature with no list set, which TensorFlow's VarLen
// parsing and parse_example read as an empty list of whatever dtype they
// declare, where an empty int64_list read as float32 fails.
func listFeature(x []any) (*example.Feature, error) {
	if len(x) == 0 {
		return &example.Feature{Kind: example.KindNone}, nil
	}
	num, text, float := -1, -1, false
	for i, e := range x {
		switch e.(type) {
		case int64, bool:
		case float64:
			float = true
		case string, []byte:
			if text < 0 {
				text = i
			}
			continue
		default:
			return nil, fmt.Errorf("%s in a list cannot be written as a feature: a feature is one flat list of int64s, floats or bytes", featureWord(e))
		}
		if num < 0 {
			num = i
		}
	}
	f := &example.Feature{}
	switch {
	case num >= 0 && text >= 0:
		return nil, fmt.Errorf("a list of numbers and strings cannot be written as a feature (element %d is a number, element %d a string): a feature is one flat list of int64s, floats or bytes", num, text)
	case text >= 0:
		f.Kind = example.KindBytes
		f.Bytes = make([][]byte, len(x))
		for i, e := range x {
			switch y := e.(type) {
			case string:
				f.Bytes[i] = []byte(y)
			case []byte:
				f.Bytes[i] = y
			}
		}
	case float:
		f.Kind = example.KindFloat
		f.Floats = make([]float32, len(x))
		for i, e := range x {
			switch y := e.(type) {
			case int64:
				f.Floats[i] = float32(y)
			case float64:
				var err error
				if f.Floats[i], err = narrow(y, i); err != nil {
					return nil, err
				}
			case bool:
				f.Floats[i] = float32(boolInt64(y))
			}
		}
	default:
		f.Kind = example.KindInt64
		f.Ints = make([]int64, len(x))
		for i, e := range x {
			switch y := e.(type) {
			case int64:
				f.Ints[i] = y
			case bool:
				f.Ints[i] = boolInt64(y)
			}
		}
	}
	return f, nil
}

// narrow is f as a float_list holds it, a float32: rounded, and refused
// where a finite f would become an infinity (1e39 was read back as inf,
// unseen; a user test). Element i of a list or tensor is named; -1 is a
// scalar.
func narrow(f float64, i int) (float32, error) {
	g := float32(f)
	if !overflows32(f) {
		return g, nil
	}
	what := fmt.Sprintf("%g is", f)
	if i >= 0 {
		what = fmt.Sprintf("element %d, %g, is", i, f)
	}
	return 0, fmt.Errorf("%s beyond float32's range (±%g), and a float_list holds float32s: it would be written as %v; scale it in a map, or write it as an int or a string", what, float32(math.MaxFloat32), g)
}

// overflows32 reports whether a finite f becomes an infinity as a
// float32: a float_list value, a float32 feature's default.
func overflows32(f float64) bool {
	return math.IsInf(float64(float32(f)), 0) && !math.IsInf(f, 0)
}

// boolInt64 is a bool as a feature holds it: an Example has no bool list,
// and tf.train.Feature users write bools as int64 0 and 1.
func boolInt64(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// featureWord names what a feature cannot hold as a spec's author knows it.
func featureWord(v any) string {
	switch v.(type) {
	case []any, []string, [][]byte:
		return "a list"
	case *tensor.Tensor:
		return "a tensor"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("a value of Go type %T", v)
}
