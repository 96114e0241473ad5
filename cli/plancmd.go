package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/piperun/piperun/plan"
	"github.com/piperun/piperun/spec"
)

func planCmd(g *globals) *cobra.Command {
	var format string
	var set []string
	var probeN int64
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Show the compiled DAG: stages, parallelism, buffers and memory shares",
		Long: `Show the compiled DAG: stages, parallelism, buffers and memory shares.

The text table's columns:
  PAR     goroutines running the stage (parallelism, resolved)
  BUFFER  samples the stage itself holds (a shuffle's buffer, a batch's size,
          a prefetch); HELD/ASKED where a shuffle's samples outgrow its half
          of the budget and the run shrinks it
  SAMPLE  bytes of one output sample: ? unknown before the run, ~ measured
          by --probe
  SHARE   bytes the stage must be able to hold to make progress: its buffer
          of input samples and one output sample; >= where sizes of strings
          and bytes are known only at run time (--probe N measures them)
  OUTPUT  the schema of the stage's output samples
The last line totals the shares, with memory stages reserve for their own
use (an on-disk cache, a serve sink's window), against the budget; the queues use
what is left. A plan whose buffers do not fit is shown, then rejected (exit
3) as validate rejects it, and --probe is not run on it.

--format dot and mermaid draw the DAG alone: each stage's name, type,
parallelism (×N) and buffer; the sizes, shares and schemas are the text
table's.`,
		Args: exactArgs(1, "one spec file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "dot" && format != "mermaid" {
				return exit(ExitUsage, fmt.Errorf("--format must be text, dot or mermaid, got %q", format))
			}
			if probeN < 0 {
				return exit(ExitUsage, fmt.Errorf("--probe must not be negative, got %d", probeN))
			}
			sp, err := g.load(args[0], set, false)
			if err != nil {
				return err
			}
			p, err := plan.Compile(sp, g.registry, plan.Options{})
			if err != nil {
				return exit(ExitInvalid, err)
			}
			var probeErr error
			if probeN > 0 && fits(p) {
				avg, err := probe(cmd.Context(), g, p, probeN)
				if err != nil {
					// The plan is still shown, as far as it is known: its
					// shares may say why the probe's run was stuck (a
					// re-test got an empty stdout).
					probeErr = exit(ExitFailed, err)
				} else {
					p.ApplyProbe(avg)
				}
			} else if probeN > 0 {
				// A run of buffers that do not fit stalls: the probe hung
				// and failed "stuck", and the plan that explains why was
				// never shown.
				g.printDiag(spec.Diagnostic{Pos: spec.Pos{File: args[0]}, Severity: spec.SevWarning,
					Message: "--probe was not run: the buffers do not fit the budget even as far as they are known, and a run of them would stall"})
			}
			switch format {
			case "dot":
				p.Dot(g.stdout)
			case "mermaid":
				p.Mermaid(g.stdout)
			default:
				p.Text(g.stdout)
			}
			if probeErr != nil {
				return probeErr
			}
			// The plan is still shown, since its shares are what explain
			// a misfit; but a spec validate rejects is invalid here too.
			return checkFit(g, p, args[0])
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, dot or mermaid")
	addSetFlag(cmd, &set, "override a spec value, path=value (repeatable)")
	cmd.Flags().Int64Var(&probeN, "probe", 0, "run the pipeline on N samples per sink to measure sample sizes the spec cannot tell (writes no output)")
	return cmd
}

// fits reports whether the plan's buffers fit its budget as far as the
// sizes are known before a run: errors, not the warnings of a shuffle the
// run shrinks.
func fits(p *plan.Plan) bool {
	for _, f := range p.Fit() {
		if !f.Warning {
			return false
		}
	}
	return true
}
