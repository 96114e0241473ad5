package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/piperun/piperun/engine"
	"github.com/piperun/piperun/gpu"
	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

func applyCmd(g *globals) *cobra.Command {
	var set []string
	var reportPath, progress, gpuMode string
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Compile a spec and run it to its sinks",
		Long: "apply validates the spec, compiles it into a DAG of goroutine stages and runs it.\n" +
			"Exit 0 on success, 1 when the run fails or is interrupted, 2 on usage errors, 3 for an invalid spec.\n" +
			"On a terminal it shows a live progress line per sink; otherwise it logs progress periodically.",
		Args: exactArgs(1, "one spec file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if progress != "auto" && progress != "always" && progress != "never" {
				return exit(ExitUsage, fmt.Errorf("--progress must be auto, always or never, got %q", progress))
			}
			if err := reportFlag(cmd, &reportPath); err != nil {
				return err
			}
			if gpuMode != "auto" && gpuMode != "off" {
				return exit(ExitUsage, fmt.Errorf("--gpu must be auto or off, got %q", gpuMode))
			}

			// A CI job reads the report to learn why a run failed, also one
			// that never started (an invalid spec, a cache in use): it gets
			// a report with ok false and the reason, never an older file.
			failed := func(err error, p *plan.Plan) error {
				if reportPath == "" {
					return err
				}
				rep := &engine.Report{Error: err.Error(), Sinks: map[string]engine.SinkReport{}, Skipped: map[string]int64{}, Stages: map[string]engine.StageReport{}}
				if pe := (*problemsError)(nil); errors.As(err, &pe) {
					rep.Error = pe.Problems()
				}
				if p != nil {
					rep.MemoryBudgetBytes, rep.Seed, rep.SeedRandom, rep.Rewrites = p.Memory, &p.Seed, p.SeedRandom, p.Rewrites
				}
				writeFailureReport(g, reportPath, args[0], rep)
				return err
			}
			sp, err := g.load(args[0], set, true)
			if err != nil {
				return failed(err, nil)
			}
			// A report that cannot be written would fail the run only after
			// its outputs were committed.
			if reportPath != "" {
				if err := checkReportPath(reportPath, sp); err != nil {
					return exit(ExitUsage, err)
				}
			}
			p, err := plan.Compile(sp, g.registry, plan.Options{})
			if err != nil {
				return failed(exit(ExitInvalid, err), nil)
			}
			if err := checkFit(g, p, args[0]); err != nil {
				return failed(err, p)
			}
			g.log.Info("starting", zap.String("pipeline", sp.Name), zap.Uint64("seed", p.Seed), zap.Bool("seed_random", p.SeedRandom),
				zap.Int("epochs", sp.Epochs), zap.String("memory", spec.ByteSize(p.Memory).String()), zap.Int("workers", p.Workers))
			for _, r := range p.Rewrites {
				g.log.Info("rewritten: "+r.Why, zap.String("stage", r.Stage), zap.Strings("past", r.Past), zap.Bool("same_order", r.SameOrder))
			}
			defer tuneMemory(p.Memory)()
			start := time.Now()
			var stoppedAt atomic.Int64 // since start, once interrupted
			// Said at once: stopping can take a while (a sample being
			// decoded, a commit under way), and a second signal is the way
			// out of a stage stuck in a system call (Main).
			said := make(chan struct{})
			unwatch := context.AfterFunc(cmd.Context(), func() {
				defer close(said)
				stoppedAt.Store(int64(max(1, time.Since(start))))
				g.log.Warn("interrupted: stopping (interrupt again to quit at once; the next run removes the temporary files left)")
			})
			// AfterFunc's stop does not wait for a call under way, whose
			// line could then come after apply's last (and race with a
			// caller of Run reading stderr). Stopped as the run ends, before
			// stoppedAt is read: an interrupt just after the engine's last
			// step then gets its note, before the summary.
			endWatch := sync.OnceFunc(func() {
				if !unwatch() {
					<-said
				}
			})
			defer endWatch()
			defer stopsGracefully()()
			run, err := engine.Start(cmd.Context(), p, engine.Options{Registry: g.registry, Log: g.log})
			if err != nil {
				return failed(exit(ExitFailed, err), p)
			}
			stopGPU := watchGPU(g, gpuMode)
			tty := progress == "always" || (progress == "auto" && isTerminal(g.stderr))
			watch(run, g, tty, sp.Epochs)
			rep, runErr := run.Wait()
			ended := time.Since(start) // on stoppedAt's clock: the engine's starts later
			endWatch()
			feeds := serveFeeds(sp, rep)
			rep.GPU = stopGPU(feeds)
			interrupted := errors.Is(runErr, context.Canceled)
			if interrupted {
				msg := "no output was committed"
				for _, st := range sp.Stages {
					if st.Type == "serve" {
						// Its batches went out as they came; what it can
						// promise is that the trainer knows the stream is cut.
						msg += "; a trainer connected to a serve stage at that moment, if any, is told the stream was cut (no end of stream)"
						break
					}
				}
				at := time.Duration(stoppedAt.Load())
				if at == 0 { // cancelled other than by a signal
					at = ended
				}
				runErr = fmt.Errorf("interrupted at %.1fs, stopped at %.1fs; %s", at.Seconds(), max(at, ended).Seconds(), msg)
				rep.Error = runErr.Error()
				// An endless run ends this way, and its totals were only
				// in --report (a soak test).
				var got []string
				for _, name := range rep.SinkNames() {
					sr := rep.Sinks[name]
					got = append(got, fmt.Sprintf("sink %q had received %d samples (%d whole epochs)", name, sr.Samples, sr.Epochs))
				}
				if len(got) > 0 {
					g.log.Info("before the stop, " + strings.Join(got, "; "))
				}
			} else if runErr == nil && stoppedAt.Load() > 0 {
				// The outputs were being committed: they are whole, and
				// stopping half-way would have left them mixed.
				g.log.Warn("the interrupt came as the outputs were being committed: the run finished, and they are whole")
			}
			if err := reportOrFail(g, reportPath, rep, runErr); err != nil {
				return err
			}
			if runErr != nil {
				skipHint(g, sp, runErr)
				if rep.SeedRandom && seedMatters(sp) {
					// A failed run is the one most worth repeating.
					g.log.Warn(seedWords(*rep.Seed), zap.Uint64("seed", *rep.Seed))
				}
				return exit(ExitFailed, runErr)
			}
			summary(g, rep, feeds, seedMatters(sp))
			return nil
		},
	}
	addSetFlag(cmd, &set, "override a spec value, path=value, e.g. --set resources.memory=1GiB --set stages.decode.parallelism=4 (repeatable)")
	cmd.Flags().StringVar(&reportPath, "report", "", "write a JSON report of the run to this file")
	cmd.Flags().StringVar(&progress, "progress", "auto", "progress display: auto (live on a terminal), always or never")
	cmd.Flags().StringVar(&gpuMode, "gpu", "auto", "watch the NVIDIA GPUs through NVML during the run and say whether a process on them starved: auto (where the driver is) or off")
	return cmd
}

// GPUInterval is how often apply reads the GPUs: NVML's utilization
// covers a sample period of 1/6 s to 1 s, so a faster pace only repeats it.
const GPUInterval = 500 * time.Millisecond

// watchGPU starts the NVML monitor for a run (mode auto) and returns the
// function that stops it, waiting at most gpu.StopWait for a read in
// progress, and sums up what it saw, told what the run's serve sinks saw
// (gpu.Summary.Attribute): an unavailable summary with --gpu off, and
// (with a debug log line) where NVML cannot be used.
func watchGPU(g *globals, mode string) func([]gpu.Feed) *gpu.Summary {
	if mode == "off" {
		// Said in the report, so that its reader does not take a missing
		// gpu key for a run that forgot to look.
		return func([]gpu.Feed) *gpu.Summary { return gpu.Unavailable(errors.New("not watched (--gpu off)")) }
	}
	src, err := gpu.Open()
	if err != nil {
		g.log.Debug("gpu monitor off", zap.Error(err))
		return func([]gpu.Feed) *gpu.Summary { return gpu.Unavailable(err) }
	}
	m, err := gpu.NewMonitor(src)
	if err != nil {
		src.Close()
		g.log.Warn("gpu monitor off", zap.Error(err))
		return func([]gpu.Feed) *gpu.Summary { return gpu.Unavailable(err) }
	}
	w := m.Watch(GPUInterval)
	return func(feeds []gpu.Feed) *gpu.Summary {
		// Bounded: an NVML call hung on a GPU in a bad state must not
		// keep a finished run from its report.
		s, err := w.Stop(gpu.StopWait)
		if err != nil {
			g.log.Warn("gpu monitor", zap.Error(err))
		}
		s.Attribute(feeds)
		g.log.Info("gpu: " + s.Verdict)
		return s
	}
}

// serveFeeds lists what the run's serve sinks saw after their first
// sample went out: a trainer on the GPU takes its input from them. A sink
// still waiting to send its first (no trainer came) has nothing to say.
func serveFeeds(sp *spec.Spec, rep *engine.Report) []gpu.Feed {
	var feeds []gpu.Feed
	for _, st := range sp.Stages {
		if sr, ok := rep.Sinks[st.Name]; ok && st.Type == "serve" && sr.ActiveS > 0 {
			feeds = append(feeds, gpu.Feed{Sink: st.Name, WaitedShare: sr.WaitedShare})
		}
	}
	return feeds
}

// checkFit prints the ways p's buffers do not fit its memory budget, and
// fails with ExitInvalid if any is more than a warning.
func checkFit(g *globals, p *plan.Plan, file string) error {
	diags := p.Diagnostics(true)
	for _, d := range diags {
		g.printDiag(d)
	}
	if diags.HasErrors() {
		// A report gets the numbers too (problemsError), not just "above".
		what := "the pipeline's buffers do not fit in resources.memory"
		if p.MemoryDefault {
			what = "the pipeline's buffers do not fit in the default memory budget"
		}
		pe := &problemsError{file: file, what: what}
		for _, d := range diags.Errors() {
			pe.problems = append(pe.problems, d.String())
		}
		return exit(ExitInvalid, pe)
	}
	return nil
}

// MemoryHeadroom is the least Go's soft memory limit allows beyond the
// budget: decoder scratch buffers, the runtime and the GC's own slack. A
// budget over 512 MiB gets a quarter of itself, what decodes in flight may
// hold (imageops.DecodeMemoryFor). (Badger's
// share is reserved inside the budget.) Measured on full-resolution photo
// decoding: 128 MiB keeps peak RSS within budget + 150 MiB at the same
// speed as a looser limit (bench/RESULTS.md).
const MemoryHeadroom = 128 << 20

func isTerminal(w io.Writer) bool {
	if c, ok := w.(*console); ok {
		w = c.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// watch shows progress until the run ends: a live line per sink on a
// terminal, a plain log line every 10 seconds elsewhere.
func watch(run *engine.Run, g *globals, tty bool, epochs int) {
	every := 10 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var rates recentRates
	for {
		select {
		case <-run.Done():
			if tty {
				g.stderr.ClearProgress()
			}
			return
		case <-t.C:
		}
		rep := run.Progress()
		if tty {
			var lines []string
			for _, name := range rep.SinkNames() {
				rate := rates.add(name, rep.ElapsedS, rep.Sinks[name].Samples)
				lines = append(lines, progressLine(name, rep.Sinks[name], rep.ElapsedS, epochs, rate))
			}
			g.stderr.Progress(lines)
			continue
		}
		for _, name := range rep.SinkNames() {
			rate := rates.add(name, rep.ElapsedS, rep.Sinks[name].Samples)
			fields := []zap.Field{zap.String("sink", name), zap.Int64("samples", rep.Sinks[name].Samples),
				zap.String("rate", fmt.Sprintf("%.0f/s", rate)),
				zap.Duration("elapsed", time.Duration(rep.ElapsedS*float64(time.Second)).Round(time.Second))}
			if rep.Sinks[name].Idle {
				fields = append(fields, zap.Bool("waiting_for_trainer", true))
			}
			g.log.Info("progress", fields...)
		}
	}
}

// rateWindow is the span the progress rate is measured over. The rate
// since the start hides a slowdown late in a long run: after a day, a
// halving of throughput would barely move it (a soak test).
const rateWindow = 10.0 // seconds

// recentRates keeps each sink's recent counts, to tell its rate over the
// last rateWindow.
type recentRates struct {
	seen map[string][]countAt
}

type countAt struct {
	at float64 // seconds since the start
	n  int64
}

// add records sink name's count n at elapsed and returns its rate over
// the last rateWindow: from the latest count at least that old, or from
// the start while the run is younger.
func (r *recentRates) add(name string, elapsed float64, n int64) float64 {
	if r.seen == nil {
		r.seen = map[string][]countAt{}
	}
	pts := r.seen[name]
	if pts == nil {
		pts = []countAt{{0, 0}}
	}
	pts = append(pts, countAt{elapsed, n})
	// The counts are read on a ticker whose ticks come a little early or
	// late: the count rateWindow back may be one read a millisecond too
	// late to be that old, and the rate came from twice the window (a
	// review). A tenth of the window is slack enough.
	i := 0
	for i+1 < len(pts) && pts[i+1].at <= elapsed-rateWindow*0.9 {
		i++
	}
	pts = append(pts[:0], pts[i:]...)
	r.seen[name] = pts
	from := pts[0]
	if elapsed <= from.at {
		return 0
	}
	return float64(n-from.n) / (elapsed - from.at)
}

func progressLine(name string, s engine.SinkReport, elapsed float64, epochs int, rate float64) string {
	// A long name pushed the figures past a narrow terminal's edge, where
	// the line is cut (a re-test: "a_sink_with_a_long_name_for_width
	// 1689600 samples 33…"): the name gives way, not the figures.
	if r := []rune(name); len(r) > 16 {
		name = string(r[:15]) + "…"
	}
	line := fmt.Sprintf("%-12s %10d %-7s %9.0f/s  %s", name, s.Samples, noun(s.Samples, "sample", "samples"), rate, fmtDur(elapsed))
	if s.Batches > 0 {
		line += fmt.Sprintf("  %d %s", s.Batches, noun(s.Batches, "batch", "batches"))
	}
	// The total is known once a whole epoch has passed through the sink.
	if epochs > 0 && s.PerEpoch > 0 && rate > 0 {
		left := float64(s.PerEpoch*int64(epochs)-s.Samples) / rate
		line += fmt.Sprintf("  epoch %d/%d  ETA %s", min(int(s.Epochs)+1, epochs), epochs, fmtDur(max(left, 0)))
	}
	if s.Idle {
		// Else the rate only falls, with no word of why.
		line += "  waiting for a trainer"
	}
	return line
}

// noun returns one when n is 1 and many otherwise: "1 batch", "3 batches".
func noun(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func fmtDur(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	return fmt.Sprintf("%d:%02d:%02d", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// seedMatters reports whether anything in sp draws from the seed: with
// nothing random, "random seed N (--set seed=N repeats the run)" is noise.
func seedMatters(sp *spec.Spec) bool {
	for _, st := range sp.Stages {
		if stages.IsRandom(st) {
			return true
		}
	}
	return false
}

func summary(g *globals, rep *engine.Report, feeds []gpu.Feed, seedMatters bool) {
	var parts []string
	for _, name := range rep.SinkNames() {
		s := rep.Sinks[name]
		p := fmt.Sprintf("%s: %d %s", name, s.Samples, noun(s.Samples, "sample", "samples"))
		if s.Batches > 0 {
			p += fmt.Sprintf(" in %d %s", s.Batches, noun(s.Batches, "batch", "batches"))
		}
		for _, f := range feeds {
			if f.Sink == name {
				// Whether the pipeline kept its trainer fed, GPU or not:
				// the trainer waits about as long as its sink does.
				p += fmt.Sprintf(", waiting for the pipeline %.0f%% of the time", 100*f.WaitedShare)
			}
		}
		parts = append(parts, p)
	}
	for _, stage := range slices.Sorted(maps.Keys(rep.Skipped)) {
		parts = append(parts, fmt.Sprintf("skipped %d in %s", rep.Skipped[stage], stage))
	}
	// A cache an earlier run filled stands for the stages above it, which
	// skip nothing now: what they skipped then is lost all the same.
	for _, name := range slices.Sorted(maps.Keys(rep.Caches)) {
		if p := filledSkips(name, rep.Caches[name]); p != "" {
			parts = append(parts, p)
		}
	}
	// Before the summary, so that it stays the last line.
	for _, name := range rep.SinkNames() {
		if rep.Sinks[name].Samples == 0 {
			// Not an error (tf.data gives an empty dataset too, and
			// on_error: skip asks for skips), but an empty input file, a
			// filter that passes nothing or a skip of every sample is
			// worth a word on a run that otherwise looks fine.
			msg := fmt.Sprintf("sink %q got no samples", name)
			if len(rep.Skipped) > 0 {
				msg += " (samples were skipped: see the skip warnings above and the summary)"
			}
			g.log.Warn(msg, zap.String("stage", name))
		}
	}
	line := fmt.Sprintf("done in %.2fs; %s; peak memory %s of %s", rep.ElapsedS, strings.Join(parts, "; "), spec.ByteSize(rep.PeakMemoryBytes), spec.ByteSize(rep.MemoryBudgetBytes))
	fields := []zap.Field{zap.Float64("elapsed_s", rep.ElapsedS), zap.Int64("peak_memory_bytes", rep.PeakMemoryBytes)}
	if rep.SeedRandom && rep.Seed != nil && seedMatters {
		// The starting line says it too, but not under --log-level warn,
		// and a run worth repeating needs it.
		line += "; " + seedWords(*rep.Seed)
		fields = append(fields, zap.Uint64("seed", *rep.Seed))
	}
	if g.logFormat == "json" {
		// A log collector reading JSON lines would choke on a plain one.
		g.log.Info(line, fields...)
	} else {
		fmt.Fprintln(g.stderr, line)
	}
}

// seedWords says a random seed and how to run with it again.
func seedWords(seed uint64) string {
	return fmt.Sprintf("random seed %d (--set seed=%d repeats the run)", seed, seed)
}

// filledSkips is the summary's part for a cache that an earlier run
// filled and whose stages above skipped samples then: "from cache c: 2
// skipped in decode, 1 in read when it was filled"; "" for any other.
func filledSkips(name string, c stages.CacheStats) string {
	if !c.FilledBefore {
		return ""
	}
	var counts []string
	for _, stage := range slices.Sorted(maps.Keys(c.SkippedWhenFilled)) {
		if k := c.SkippedWhenFilled[stage]; k > 0 {
			if len(counts) == 0 {
				counts = append(counts, fmt.Sprintf("%d skipped in %s", k, stage))
			} else {
				counts = append(counts, fmt.Sprintf("%d in %s", k, stage))
			}
		}
	}
	if len(counts) == 0 {
		return ""
	}
	return fmt.Sprintf("from cache %s: %s when it was filled", name, strings.Join(counts, ", "))
}

// checkReportPath reports why a report could not be written to path: it
// is the spec or an output of one of its stages, a directory, or in a
// directory that cannot be made or written. It makes the directory, as a
// sink does, and creates nothing else but a probe it removes.
func checkReportPath(path string, sp *spec.Spec) error {
	if err := checkReportTarget(path, sp.File); err != nil {
		return err
	}
	abs, _ := filepath.Abs(path)
	// Keys follow links, as the report and the sinks do: a link to an
	// output not yet written let the report replace a sink's lines.
	if st, ok := sp.Outputs()[spec.OutputKey(abs)]; ok {
		if target, _ := stages.OutputPath(abs); target != abs {
			return fmt.Errorf("--report %s leads to what stage %q writes", path, st)
		}
		return fmt.Errorf("--report %s is what stage %q writes", path, st)
	}
	if err := stages.MkdirAll(filepath.Dir(path)); err != nil {
		if pe := (*os.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("--report %s cannot be written: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".probe-*")
	if err != nil {
		return fmt.Errorf("--report %s cannot be written: %w", path, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// errEmptyReport refuses --report "": a variable left empty in a CI job
// wrote no report, and the run said nothing of it.
var errEmptyReport = errors.New("--report must name a file, got an empty path")

// errStdoutReport refuses --report -, which wrote a file named "-".
var errStdoutReport = errors.New("--report - would write a file named -: name a file (a report does not go to stdout)")

// checkReportTarget is what checkReportPath can check without a loaded
// spec: a report must not replace the spec file (a failure report of a
// spec that does not load once did), a directory, a device, a pipe or a
// socket (it replaced /dev/full with a plain file), or a file that holds
// anything but an earlier report: it replaced an input file the run had
// just read. A link is followed, as a sink's is.
func checkReportTarget(path, specFile string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("--report %s: %w", path, err)
	}
	sf, _ := filepath.Abs(specFile)
	if spec.OutputKey(abs) == spec.OutputKey(sf) {
		return fmt.Errorf("--report %s is the spec itself", path)
	}
	target, err := stages.OutputPath(abs)
	if err != nil {
		return fmt.Errorf("--report %w", err)
	}
	// A link OutputPath cannot follow by name (/dev/stdout leads to
	// /proc/self/fd/1, whose target is "pipe:[N]"): what it opens to.
	if st, err := os.Stat(abs); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		return fmt.Errorf("--report %s is not a regular file: a report is written aside and renamed onto its path; write to a file", path)
	}
	if spec.OutputKey(target) == spec.OutputKey(sf) {
		return fmt.Errorf("--report %s leads to the spec itself", path)
	}
	if !replaceableReport(target) {
		return fmt.Errorf("--report %s holds something other than a piperun report, and a report replaces the file it names: name a new file, or remove this one", path)
	}
	return nil
}

// replaceableReport reports whether the file at path may be replaced by
// a report: absent, empty, or a JSON object with an "ok" key, which
// every report of apply and bench has.
func replaceableReport(path string) bool {
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		return true // absent, or unreadable: writing says what is wrong
	}
	if st.Size() > 64<<20 {
		return false // no report is that long
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	_, ok := m["ok"]
	return ok
}

// writeFailureReport writes rep, the report of a run that failed before
// it began, to path unless path is the spec file or a directory; it logs
// why it wrote nothing.
func writeFailureReport(g *globals, path, specFile string, rep any) {
	err := checkReportTarget(path, specFile)
	if err == nil {
		err = writeReport(path, rep)
	}
	if err != nil {
		g.log.Error("write report", zap.Error(err))
	}
}

// reportFlag checks --report before anything runs, and cleans it: ".."
// read as text, as a sink reads its path, so that the checks and the
// write agree on one file (yl/../../out/a.jsonl, yl a link, was checked as
// ../out/a.jsonl and renamed through yl onto a sink's output).
func reportFlag(cmd *cobra.Command, path *string) error {
	switch {
	case cmd.Flags().Changed("report") && *path == "":
		return exit(ExitUsage, errEmptyReport)
	case *path == "-":
		return exit(ExitUsage, errStdoutReport)
	case *path == "":
		return nil
	}
	if err := stages.FileName(*path); err != nil {
		return exit(ExitUsage, fmt.Errorf("--report: %w", err))
	}
	*path = filepath.Clean(*path)
	return nil
}

// reportOrFail writes rep to path, where one was asked for; a run that
// succeeded fails when its report cannot be written, as a CI job would
// read none (bench logged it and exited 0). A failed run keeps its own
// error.
func reportOrFail(g *globals, path string, rep any, runErr error) error {
	if path == "" {
		return nil
	}
	if err := writeReport(path, rep); err != nil {
		g.log.Error("write report", zap.Error(err))
		if runErr == nil {
			return exit(ExitFailed, err)
		}
	}
	return nil
}

// writeReport writes the report aside and renames it, so a reader never
// sees half a report.
func writeReport(path string, rep any) error {
	// Through a link to its target, as checkReportTarget checked it.
	path, err := stages.OutputPath(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	dir := filepath.Dir(path)
	// Made here too, not only by checkReportPath: a spec that does not
	// load never gets that far, and its report says why.
	if err := stages.MkdirAll(dir); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(f.Name())
	if err := writeJSON(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("report: %w", err)
	}
	// CreateTemp makes 0600 files; a report is an ordinary output, read by
	// whoever collects it (CI, another user), as write_jsonl's are.
	if err := f.Chmod(stages.OutputMode(path)); err != nil {
		f.Close()
		return fmt.Errorf("report: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return os.Rename(f.Name(), path)
}

// skipHint tells a run that failed on one sample how to go on past such
// samples, where the stage can: a damaged JPEG among a million should not
// cost a user a search through the docs.
func skipHint(g *globals, sp *spec.Spec, err error) {
	var se *engine.StageError
	if !errors.As(err, &se) || se.Sample == "" || errors.Is(err, context.Canceled) {
		return
	}
	if t, ok := g.registry.Lookup(se.Type); !ok || !t.OnError {
		return
	}
	for _, st := range sp.Stages {
		if st.Name == se.Stage && !st.Skip() {
			g.log.Info(fmt.Sprintf("to skip such samples and count them in the report instead of stopping, set on_error: skip on stage %q", se.Stage))
			return
		}
	}
}
