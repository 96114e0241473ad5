package cli

import (
	"context"
	"fmt"
	"go.uber.org/zap"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
)

func validateCmd(g *globals) *cobra.Command {
	var format string
	var noEnv bool
	var set []string
	var probeN int64
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check specs: schema, DAG, expression types, memory fit and (unless --no-environment) inputs and outputs",
		Long: "validate checks each spec without running it and prints every problem as\n" +
			"file:line:col: path: message. Exit 0 when clean, 1 when any spec has problems, 2 on usage errors.\n" +
			"--no-environment skips checks that need the data and output directories (for CI machines).",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exit(ExitUsage, fmt.Errorf("validate: expected at least one spec file"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			switch format {
			case "text", "json", "github":
			default:
				return exit(ExitUsage, fmt.Errorf("--format must be text, json or github, got %q", format))
			}
			if probeN < 0 {
				return exit(ExitUsage, fmt.Errorf("--probe must not be negative, got %d", probeN))
			}
			var all spec.Diagnostics
			for _, f := range args {
				all = append(all, validateFile(cmd.Context(), g, f, set, !noEnv, probeN)...)
			}
			switch format {
			case "json":
				out := all
				if out == nil {
					out = spec.Diagnostics{}
				}
				if err := writeJSON(g.stdout, out); err != nil {
					return exit(ExitFailed, err)
				}
			case "github":
				for _, d := range all {
					level := "error"
					if d.Severity == spec.SevWarning {
						level = "warning"
					}
					msg := d.Message
					if d.Path != "" {
						msg = d.Path + ": " + msg
					}
					where := fmt.Sprintf("file=%s,line=%d,col=%d", ghProperty(d.Pos.File), d.Pos.Line, d.Pos.Col)
					if d.Pos.Line == 0 { // no place in the file: an override, or the file as a whole
						where = "file=" + ghProperty(d.Pos.File)
					}
					if d.Pos.Set != "" {
						msg = "--set " + d.Pos.Set + ": " + msg
					}
					fmt.Fprintf(g.stdout, "::%s %s,title=piperun validate::%s\n", level, where, ghEscape(msg))
				}
			default:
				for _, d := range all {
					fmt.Fprintln(g.stdout, d.String())
				}
				n := len(all.Errors())
				line := fmt.Sprintf("%d spec%s valid", len(args), plural(len(args)))
				if n > 0 {
					line = fmt.Sprintf("%d problem%s", n, plural(n))
				}
				// Warnings do not fail validate, but a count that leaves
				// out lines printed above reads as a miscount.
				if w := len(all) - n; w > 0 {
					line += fmt.Sprintf(", %d warning%s", w, plural(w))
				}
				if g.logFormat == "json" { // every line on stderr is JSON there
					g.log.Info(line, zap.Int("problems", n))
				} else {
					fmt.Fprintln(g.stderr, line)
				}
			}
			if all.HasErrors() {
				return exit(1, nil)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, json or github (workflow annotations)")
	cmd.Flags().BoolVar(&noEnv, "no-environment", false, "skip checks of input files and output directories")
	addSetFlag(cmd, &set, "override a spec value, path=value (repeatable)")
	cmd.Flags().Int64Var(&probeN, "probe", 0, "also run each pipeline on N samples per sink to measure sample sizes, and check the memory fit with them (writes no output)")
	return cmd
}

// validateFile runs every check on one spec, including the memory fit that
// needs a plan, and returns the problems in the order of the lines they
// point at, as a compiler lists them; those that point at no line (the
// spec as a whole) come last, in the order found, and the note that the
// fit was not checked after them: it follows from the others, and read
// first, above a typo, it was the noise a newcomer saw first.
func validateFile(ctx context.Context, g *globals, file string, set []string, environment bool, probeN int64) spec.Diagnostics {
	diags := checkFile(ctx, g, file, set, environment, probeN)
	sort.SliceStable(diags, func(i, j int) bool {
		if x, y := diags[i].Message == fitNotChecked, diags[j].Message == fitNotChecked; x != y {
			return y
		}
		a, b := diags[i].Pos, diags[j].Pos
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return diags
}

// fitNotChecked is the warning of a spec whose errors keep its memory fit
// from being checked.
const fitNotChecked = "the memory fit was not checked: it needs the spec's errors fixed first"

// checkFile is validateFile before the problems are put in line order: the
// spec's own first, then its memory fit, then the machine's.
func checkFile(ctx context.Context, g *globals, file string, set []string, environment bool, probeN int64) spec.Diagnostics {
	sp, diags := spec.Load(file, spec.Options{Catalog: g.registry, Set: set, Environment: environment})
	if sp == nil {
		return diags
	}
	if diags.HasErrors() {
		// A spec with errors of its own cannot be planned, so its fit is
		// not known: say so, or a fixed typo would bring a surprise.
		// At resources.memory where the spec sets it; "the problems
		// above" meant nothing in JSON.
		notChecked := spec.Diagnostic{Pos: sp.PosOf("resources.memory"), Path: "resources.memory", Severity: spec.SevWarning,
			Message: fitNotChecked}
		if !environment {
			return append(diags, notChecked)
		}
		// Problems of the machine alone (a pattern matching no file, an
		// output directory that cannot be written) leave the spec whole:
		// its memory fit is checked too, so that one run of validate lists
		// every problem, as for the spec checked without the machine.
		bare, structural := spec.Load(file, spec.Options{Catalog: g.registry, Set: set})
		if bare == nil || structural.HasErrors() {
			return append(diags, notChecked)
		}
		if probeN > 0 {
			diags = append(diags, spec.Diagnostic{Pos: spec.Pos{File: file}, Severity: spec.SevWarning,
				Message: "--probe was not run: it needs the problems above fixed first"})
		}
		sp, probeN = bare, 0
	}
	p, err := plan.Compile(sp, g.registry, plan.Options{})
	if err != nil {
		return append(diags, spec.Diagnostic{Pos: spec.Pos{File: file}, Message: err.Error(), Severity: spec.SevError})
	}
	if probeN > 0 && environment && !fits(p) {
		// A run of buffers that do not fit stalls: the probe would fail
		// "stuck" after its wait, where the fit's own message says why.
		diags = append(diags, spec.Diagnostic{Pos: spec.Pos{File: file}, Severity: spec.SevWarning,
			Message: "--probe was not run: the buffers do not fit the budget even as far as they are known, and a run of them would stall"})
		probeN = 0
	}
	if probeN > 0 && environment {
		avg, err := probe(ctx, g, p, probeN)
		if err != nil {
			return append(diags, spec.Diagnostic{Pos: spec.Pos{File: file}, Message: err.Error(), Severity: spec.SevError})
		}
		p.ApplyProbe(avg)
	}
	return append(diags, p.Diagnostics(environment)...)
}

// ghProperty escapes a workflow command's property value, where a comma
// or a colon would end it.
func ghProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

func ghEscape(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}
