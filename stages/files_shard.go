package stages

// This file holds the files stage's sharding: the shard a process reads,
// from its config or the launcher's environment, and validate's checks of
// what N processes running one spec would do.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/invopop/jsonschema"
	"github.com/piperun/piperun/spec"
	"go.yaml.in/yaml/v3"
)

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
			return at(v, "shard.%s: expected an integer, got %s", k.Value, spec.Describe(v))
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
	props.Set("index", &jsonschema.Schema{Type: "integer", Minimum: "0", Description: "This process's shard, 0 to count-1."})
	props.Set("count", &jsonschema.Schema{Type: "integer", Minimum: "1", Description: "How many shards the files are split into, one a process."})
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
