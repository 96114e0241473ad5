// Package cli implements the piperun command line: apply, validate, plan,
// bench, inspect, cache (ls, info, prune), schema and version. It wires spec, plan, engine and stages
// together and owns exit codes, logging and progress display.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// Exit codes, as DESIGN.md §3 fixes them.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	ExitInvalid = 3
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func exit(code int, err error) error { return &exitError{code: code, err: err} }

// problemsError is a spec's errors, printed on stderr when found; a
// report, which has no "above", carries them whole (Problems).
type problemsError struct {
	file     string
	problems []string
	// what, when set, replaces the count in the message.
	what string
}

func (e *problemsError) Error() string {
	if e.what != "" {
		return e.file + ": " + e.what
	}
	n := len(e.problems)
	return fmt.Sprintf("%s: %d problem%s (above)", e.file, n, plural(n))
}

// Problems is the diagnostics, one per line.
func (e *problemsError) Problems() string { return strings.Join(e.problems, "\n") }

// Version is set at build time with -ldflags "-X github.com/piperun/piperun/cli.Version=...".
var Version = ""

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

type globals struct {
	logFormat string
	logLevel  string
	stdout    io.Writer
	// stderr is the console: log lines and messages go through it so that
	// apply's live progress lines stay below them.
	stderr   *console
	log      *zap.Logger
	registry *stages.Registry
}

// Main runs the CLI with args (without the program name) and returns the
// process exit code. It gives the process one P more than Go's default
// (spareProcs), which Run, for tests in a shared process, does not.
func Main(args []string, stdout, stderr io.Writer) int {
	setProcs()
	// SIGHUP too: a closed terminal or a dropped ssh session ended the run
	// at once, its temporary files left and no report written. Not under
	// nohup, which ignores it: Notify would undo that.
	sigs := []os.Signal{syscall.SIGTERM}
	if !signal.Ignored(os.Interrupt) {
		// A job a shell started in the background ignores Ctrl-C; so does
		// the run, as for SIGHUP under nohup.
		sigs = append(sigs, os.Interrupt)
	}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := notifyContext(sigs...)
	defer stop()
	return Run(ctx, args, stdout, stderr)
}

// Run is Main with a caller-supplied context, for tests.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: &console{w: stderr, cols: widthOf(stderr)}, registry: stages.Default()}
	root := &cobra.Command{
		Use:   "piperun",
		Short: "Run machine-learning input pipelines declared in YAML",
		Long: "piperun runs ML input pipelines (list files → read TFRecords → parse → decode and augment →\n" +
			"cache → shuffle → batch → prefetch) declared in a YAML spec, as a DAG of goroutine stages\n" +
			"on every core, inside a hard memory budget.",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			l, err := newLogger(g.logFormat, g.logLevel, g.stderr)
			if err != nil {
				return exit(ExitUsage, err)
			}
			g.log = l
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return exit(ExitUsage, err) })
	root.AddCommand(applyCmd(g), validateCmd(g), planCmd(g), benchCmd(g), schemaCmd(g), inspectCmd(g), versionCmd(g), cacheCmd(g))
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if g.log != nil {
		g.log.Sync()
	}
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			g.printError(ee.err)
		}
		return ee.code
	}
	// Cobra's own errors (unknown command, bad args) are usage errors.
	g.printError(err)
	return ExitUsage
}

func newLogger(format, level string, w io.Writer) (*zap.Logger, error) {
	// Only the levels the help names: zap also takes fatal, which hid
	// warnings such as the seed to repeat a run.
	lvl, ok := map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "warn": zapcore.WarnLevel, "error": zapcore.ErrorLevel}[level]
	if !ok {
		return nil, fmt.Errorf("--log-level must be debug, info, warn or error, got %q", level)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "text":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05")
		ec.CallerKey = ""
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), lvl)), nil
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return exit(ExitUsage, fmt.Errorf("%s: expected %s, got %d arguments (see --help)", cmd.Name(), what, len(args)))
		}
		return nil
	}
}

// load reads and validates a spec, printing its diagnostics; it returns an
// exit error with ExitInvalid when the spec has errors.
func (g *globals) load(file string, set []string, environment bool) (*spec.Spec, error) {
	sp, diags := spec.Load(file, spec.Options{Catalog: g.registry, Set: set, Environment: environment})
	return g.loaded(file, sp, diags)
}

// loaded prints a loaded spec's diagnostics and returns it, or an exit
// error with ExitInvalid when it has errors.
func (g *globals) loaded(file string, sp *spec.Spec, diags spec.Diagnostics) (*spec.Spec, error) {
	for _, d := range diags {
		g.printDiag(d)
	}
	if sp == nil || diags.HasErrors() {
		// The problems are printed above; naming validate here would send
		// a user of --set to a command that, without it, finds none.
		pe := &problemsError{file: file}
		for _, d := range diags.Errors() {
			pe.problems = append(pe.problems, d.String())
		}
		return nil, exit(ExitInvalid, pe)
	}
	return sp, nil
}

// printError writes the error a command ends with to stderr: "piperun:
// …", or a log entry under --log-format json, also when the flags failed
// to parse before the logger was made.
func (g *globals) printError(err error) {
	if g.logFormat != "json" {
		fmt.Fprintln(g.stderr, "piperun:", err)
		return
	}
	l := g.log
	if l == nil {
		if l, _ = newLogger("json", "error", g.stderr); l == nil {
			fmt.Fprintln(g.stderr, "piperun:", err)
			return
		}
	}
	l.Error(err.Error())
	l.Sync()
}

// printDiag writes a spec problem to stderr: as a line of text, or as a
// log entry under --log-format json, so that every line is JSON there.
func (g *globals) printDiag(d spec.Diagnostic) {
	if g.logFormat != "json" || g.log == nil {
		fmt.Fprintln(g.stderr, d.String())
		return
	}
	log := g.log.Error
	if d.Severity == spec.SevWarning {
		log = g.log.Warn
	}
	fields := []zap.Field{zap.String("file", d.Pos.File), zap.Int("line", d.Pos.Line), zap.Int("column", d.Pos.Col), zap.String("path", d.Path)}
	if d.Pos.Set != "" {
		fields = append(fields, zap.String("set", d.Pos.Set))
	}
	log(d.Message, fields...)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func schemaCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of pipeline specs (the committed schema.json)",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := spec.JSONSchema(g.registry)
			if err != nil {
				return exit(ExitFailed, err)
			}
			_, err = fmt.Fprintf(g.stdout, "%s\n", b)
			return err
		},
	}
}

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(g.stdout, "piperun %s\n", version())
			return nil
		},
	}
}

// setFlag is the repeatable --set flag. It refuses an override without a
// path and an "=" when the flags are parsed, a usage error (exit 2) like
// any other malformed flag, before the spec is read.
type setFlag struct{ sets *[]string }

func (f setFlag) String() string { return strings.Join(*f.sets, " ") }

func (f setFlag) Type() string { return "path=value" }

func (f setFlag) Set(s string) error {
	if key, _, ok := strings.Cut(s, "="); !ok || key == "" {
		return fmt.Errorf("expected path=value, e.g. stages.decode.parallelism=4, got %q", s)
	}
	*f.sets = append(*f.sets, s)
	return nil
}

// addSetFlag adds --set to cmd, collecting the overrides in sets.
func addSetFlag(cmd *cobra.Command, sets *[]string, usage string) {
	cmd.Flags().Var(setFlag{sets}, "set", usage)
}
