package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/piperun/piperun/cache"
	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

func cacheCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "List, inspect and prune on-disk caches",
		Long: "Each argument is a cache directory (a cache stage's dir:) or a spec file, whose cache\n" +
			"stages' directories are used.",
	}
	var format string
	ls := &cobra.Command{
		Use:   "ls DIR|SPEC...",
		Short: "List caches: fingerprint, pipeline, stage, samples, size, complete, partial, damaged or unreadable and in use, last used",
		Args:  minArgs(1, "a cache directory or spec"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := g.caches(args)
			if err != nil {
				return err
			}
			// A prune that died leaves its folder renamed aside, out of
			// the listing, but on the disk (118 MB unseen).
			if dirs, err := g.cacheDirs(args); err == nil {
				for _, d := range dirs {
					for _, l := range cache.Leftovers(d) {
						fmt.Fprintf(g.stderr, "piperun: %s: left by a cache prune that did not finish; the next cache prune %s removes it\n", l, d)
					}
				}
			}
			// A damaged cache is listed like the others and the listing
			// succeeds: it is an inventory, and damage is a state of one
			// cache, as an unhealthy container is to "docker ps". Why it
			// is damaged, and the way out, go to stderr, where a script
			// reading stdout is not disturbed and a person still sees it.
			// So does why a manifest could not be read at all, which
			// says nothing about the cache: no prune removes it.
			for _, m := range ms {
				if m.Damaged != "" {
					fmt.Fprintln(g.stderr, "piperun:", m.damage())
				}
				if m.Unreadable != "" {
					fmt.Fprintf(g.stderr, "piperun: cache %s: %s\n", filepath.Join(m.dir, m.Fingerprint), unreadableWords(m.Manifest))
				}
			}
			if format == "json" {
				return writeJSON(g.stdout, ms)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FINGERPRINT\tPIPELINE\tSTAGE\tSAMPLES\tSIZE\tSTATE\tLAST USED\tDIR")
			for _, m := range ms {
				pipeline, stage, samples, size := dash(m.Pipeline), dash(m.Stage), "-", "-"
				if !m.unread() {
					samples, size = strconv.FormatInt(m.Samples, 10), spec.ByteSize(m.Bytes).String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Fingerprint, pipeline, stage, samples,
					size, m.state(), m.LastUsed.Local().Format("2006-01-02 15:04:05"), filepath.Join(m.dir, m.Fingerprint))
			}
			return tw.Flush()
		},
	}
	ls.Flags().StringVar(&format, "format", "text", "text or json")
	info := &cobra.Command{
		Use:   "info DIR|SPEC FINGERPRINT",
		Short: "Show one cache's manifest (a fingerprint prefix is enough)",
		Args:  exactArgs(2, "a cache directory or spec, and a fingerprint"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := g.caches(args[:1])
			if err != nil {
				return err
			}
			var hits []dirManifest
			for _, m := range ms {
				if strings.HasPrefix(m.Fingerprint, args[1]) {
					hits = append(hits, m)
				}
			}
			switch len(hits) {
			case 0:
				return exit(ExitFailed, fmt.Errorf("no cache with fingerprint %q in %s", args[1], args[0]))
			case 1:
				return writeJSON(g.stdout, hits[0])
			}
			return exit(ExitFailed, fmt.Errorf("fingerprint prefix %q is ambiguous: %d caches match", args[1], len(hits)))
		},
	}
	var olderThan age
	var keepLast int
	var damaged bool
	prune := &cobra.Command{
		Use:   "prune DIR|SPEC... [--older-than D] [--keep-last N] [--damaged]",
		Short: "Remove caches last used longer ago than --older-than, keeping the --keep-last most recent, and damaged caches; caches in use are never removed",
		Long: "Remove caches last used longer ago than --older-than, keeping the --keep-last most recent.\n" +
			"Damaged caches (a manifest that does not parse, a store a run could not open or read) are\n" +
			"removed by every prune, whatever their age, and count for none of --keep-last; --damaged\n" +
			"alone removes only them. Caches in use by a piperun process are never removed, nor are\n" +
			"caches whose manifest cannot be read (permissions, an I/O error): \"cache ls\" shows them\n" +
			"unreadable.",
		Args: minArgs(1, "a cache directory or spec"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ageSet, keepSet := cmd.Flags().Changed("older-than"), cmd.Flags().Changed("keep-last")
			if !ageSet && !keepSet && !damaged {
				return exit(ExitUsage, fmt.Errorf("prune: give --older-than and/or --keep-last, or --damaged (prune removes nothing by default)"))
			}
			if olderThan < 0 || keepLast < 0 {
				return exit(ExitUsage, fmt.Errorf("prune: --older-than and --keep-last cannot be negative"))
			}
			limit := time.Duration(olderThan)
			if !ageSet && !keepSet {
				limit = math.MaxInt64 // --damaged alone: no healthy cache is old enough
			} else if !ageSet {
				limit = 0 // --keep-last alone: every cache beyond the last N
			}
			dirs, err := g.cacheDirs(args)
			if err != nil {
				return err
			}
			var errs []error
			for _, d := range dirs {
				// Prune keeps caches whose manifest it cannot read; say so,
				// as it says of those in use.
				var unreadable []cache.Manifest
				if ms, err := cache.List(d); err == nil {
					for _, m := range ms {
						if m.Unreadable != "" {
							unreadable = append(unreadable, m)
						}
					}
				}
				// Killed half-way, a cache would be left half removed: the first
				// signal waits for the prune.
				done := stopsGracefully()
				removed, inUse, err := cache.Prune(d, limit, keepLast, time.Now())
				done()
				for _, m := range removed {
					if m.Damaged != "" {
						fmt.Fprintf(g.stdout, "removed %s%s: damaged: %s\n", filepath.Join(d, m.Fingerprint), whose(m, ""), m.Damaged)
						continue
					}
					fmt.Fprintf(g.stdout, "removed %s (%s/%s, %d samples, %s)\n", filepath.Join(d, m.Fingerprint), m.Pipeline, m.Stage, m.Samples, spec.ByteSize(m.Bytes))
				}
				for _, m := range inUse {
					fmt.Fprintf(g.stdout, "kept %s%s: in use by another piperun process\n", filepath.Join(d, m.Fingerprint), whose(m, "damaged"))
				}
				for _, m := range unreadable {
					fmt.Fprintf(g.stdout, "kept %s: %s\n", filepath.Join(d, m.Fingerprint), unreadableWords(m))
				}
				if len(removed) == 0 && len(inUse) == 0 && len(unreadable) == 0 && err == nil {
					fmt.Fprintf(g.stdout, "%s: nothing to remove\n", d)
				}
				// One directory's failure leaves the others to prune.
				if err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) > 0 {
				return exit(ExitFailed, errors.Join(errs...))
			}
			return nil
		},
	}
	prune.Flags().Var(&olderThan, "older-than", "remove caches last used longer ago than this, e.g. 7d or 36h")
	// Unset means no age limit; "0s" would read as a limit that removes all.
	prune.Flags().Lookup("older-than").DefValue = ""
	prune.Flags().IntVar(&keepLast, "keep-last", 0, "always keep this many most recently used caches per directory")
	prune.Flags().BoolVar(&damaged, "damaged", false, "remove damaged caches (every prune does); alone, remove only them")
	// rm and its kin are what a user types for prune.
	prune.SuggestFor = []string{"rm", "remove", "delete", "clean", "purge"}
	cmd.AddCommand(ls, info, prune)
	// Without a Run of its own cobra printed the help for `cache rm DIR`
	// and exited 0, so a script calling it seemed to succeed; `piperun foo`
	// is a usage error, and so is this.
	cmd.SuggestionsMinimumDistance = 1 // "lss" is ls; "rm" is not
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		if len(args) == 0 {
			return exit(ExitUsage, fmt.Errorf("cache needs a command: %s or %s", strings.Join(names[:len(names)-1], ", "), names[len(names)-1]))
		}
		msg := fmt.Sprintf("unknown command %q for %q (its commands: %s", args[0], cmd.CommandPath(), strings.Join(names, ", "))
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return exit(ExitUsage, errors.New(msg+")"))
	}
	return cmd
}

// dirManifest is a manifest with the directory it was found in.
type dirManifest struct {
	cache.Manifest
	dir string
	// use and pids tell whether processes hold the cache now.
	use  cache.Use
	pids []int
}

// MarshalJSON adds the directory and the cache's users to the manifest's
// JSON.
func (d dirManifest) MarshalJSON() ([]byte, error) {
	type plain cache.Manifest
	return jsonMarshal(struct {
		plain
		Dir  string    `json:"dir"`
		Use  cache.Use `json:"in_use,omitempty"`
		PIDs []int     `json:"pids,omitempty"`
	}{plain(d.Manifest), filepath.Join(d.dir, d.Fingerprint), d.use, d.pids})
}

// state is the STATE column: complete, partial, damaged or unreadable,
// and how it is in use.
func (d dirManifest) state() string {
	s := "partial"
	switch {
	case d.Unreadable != "":
		s = "unreadable"
	case d.Damaged != "":
		s = "damaged"
	case d.Complete:
		s = "complete"
		// What its fill lost, where the manifest recorded any.
		var skips []string
		for _, stage := range slices.Sorted(maps.Keys(d.SkippedWhenFilled)) {
			if k := d.SkippedWhenFilled[stage]; k > 0 {
				skips = append(skips, fmt.Sprintf("%s %d", stage, k))
			}
		}
		if len(skips) > 0 {
			s += " (skipped when filled: " + strings.Join(skips, ", ") + ")"
		}
	}
	switch d.use {
	case cache.Writing:
		s += fmt.Sprintf(", being written (pid %d)", d.pids[0])
	case cache.Reading:
		s += fmt.Sprintf(", being read (%d %s)", len(d.pids), noun(int64(len(d.pids)), "process", "processes"))
	}
	return s
}

// unread reports whether the cache's manifest could not be read, so that
// its counts are unknown rather than 0.
func (d dirManifest) unread() bool {
	return d.Unreadable != "" || d.Damaged != "" && d.Created.IsZero()
}

// unreadableWords say why the manifest m (Manifest.Unreadable) could not
// be read, and that prune keeps the cache for it.
func unreadableWords(m cache.Manifest) string {
	return "its manifest cannot be read (" + m.Unreadable + "); prune keeps it"
}

// damage is the error telling why the cache is damaged and the way out.
func (d dirManifest) damage() error {
	return &cache.DamagedError{Dir: filepath.Join(d.dir, d.Fingerprint), Reason: d.Damaged}
}

// whose is the cache's pipeline and stage in parentheses, followed by
// the word damaged when the cache is damaged and the caller passes it (a
// line that names the damage itself passes ""). A cache whose manifest
// could not be read has no pipeline or stage: with nothing to say, whose
// is empty.
func whose(m cache.Manifest, damaged string) string {
	var parts []string
	if m.Pipeline != "" || m.Stage != "" {
		parts = append(parts, m.Pipeline+"/"+m.Stage)
	}
	if m.Damaged != "" && damaged != "" {
		parts = append(parts, damaged)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// dash stands in for an unknown pipeline or stage.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return exit(ExitUsage, fmt.Errorf("%s: expected %s (see --help)", cmd.Name(), what))
		}
		return nil
	}
}

// cacheDirs turns arguments into cache directories: a spec stands for the
// dirs of its cache stages.
func (g *globals) cacheDirs(args []string) ([]string, error) {
	var dirs []string
	for _, a := range args {
		if !strings.HasSuffix(a, ".yaml") && !strings.HasSuffix(a, ".yml") {
			// A directory named outright must exist (a spec's may not
			// yet: its first run makes it).
			fi, err := os.Stat(a)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil, exit(ExitFailed, fmt.Errorf("cache directory %s does not exist", a))
			case err != nil:
				return nil, exit(ExitFailed, fmt.Errorf("cache directory: %w", err))
			case !fi.IsDir():
				return nil, exit(ExitFailed, fmt.Errorf("%s is not a cache directory (or a spec ending in .yaml)", a))
			}
			dirs = append(dirs, a)
			continue
		}
		sp, err := g.load(a, nil, false)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, st := range sp.Stages {
			if c, ok := st.Config.(*stages.CacheConfig); ok && c.Dir != "" {
				dirs = append(dirs, sp.Resolve(c.Dir))
				n++
			}
		}
		if n == 0 {
			return nil, exit(ExitFailed, fmt.Errorf("%s has no cache stage with a dir", a))
		}
	}
	return dirs, nil
}

func (g *globals) caches(args []string) ([]dirManifest, error) {
	dirs, err := g.cacheDirs(args)
	if err != nil {
		return nil, err
	}
	var out []dirManifest
	for _, d := range dirs {
		ms, err := cache.List(d)
		if err != nil {
			return nil, exit(ExitFailed, err)
		}
		for _, m := range ms {
			use, pids, err := cache.Users(d, m.Fingerprint)
			if err != nil {
				g.log.Warn("cache users", zap.Error(err))
			}
			out = append(out, dirManifest{Manifest: m, dir: d, use: use, pids: pids})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastUsed.After(out[j].LastUsed) })
	return out, nil
}

// age is a --older-than value: a Go duration, or a number of days ("7d"),
// which is how people say how old a cache is.
type age time.Duration

func (a *age) String() string { return time.Duration(*a).String() }
func (a *age) Type() string   { return "duration" }

func (a *age) Set(s string) error {
	if d, ok := strings.CutSuffix(s, "d"); ok && !strings.Contains(d, "_") {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || math.IsInf(n, 0) || math.IsNaN(n) || math.Abs(n) > 1e5 {
			return fmt.Errorf("want a number of days up to 100000 (7d) or a duration (36h), got %q", s)
		}
		*a = age(n * 24 * float64(time.Hour))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a number of days (7d) or a duration (36h), got %q", s)
	}
	*a = age(d)
	return nil
}
