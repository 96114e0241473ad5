package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
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
		Short: "List caches: fingerprint, pipeline, stage, samples, size, complete or partial and in use, last used",
		Args:  minArgs(1, "a cache directory or spec"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ms, err := g.caches(args)
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(g.stdout, ms)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "FINGERPRINT\tPIPELINE\tSTAGE\tSAMPLES\tSIZE\tSTATE\tLAST USED\tDIR")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.Fingerprint, m.Pipeline, m.Stage, m.Samples,
					spec.ByteSize(m.Bytes), m.state(), m.LastUsed.Local().Format("2006-01-02 15:04:05"), filepath.Join(m.dir, m.Fingerprint))
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
	prune := &cobra.Command{
		Use:   "prune DIR|SPEC... [--older-than D] [--keep-last N]",
		Short: "Remove caches last used longer ago than --older-than, keeping the --keep-last most recent; caches in use are never removed",
		Args:  minArgs(1, "a cache directory or spec"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("older-than") && !cmd.Flags().Changed("keep-last") {
				return exit(ExitUsage, fmt.Errorf("prune: give --older-than and/or --keep-last (prune removes nothing by default)"))
			}
			if olderThan < 0 || keepLast < 0 {
				return exit(ExitUsage, fmt.Errorf("prune: --older-than and --keep-last cannot be negative"))
			}
			dirs, err := g.cacheDirs(args)
			if err != nil {
				return err
			}
			for _, d := range dirs {
				removed, inUse, err := cache.Prune(d, time.Duration(olderThan), keepLast, time.Now())
				for _, m := range removed {
					fmt.Fprintf(g.stdout, "removed %s (%s/%s, %d samples, %s)\n", filepath.Join(d, m.Fingerprint), m.Pipeline, m.Stage, m.Samples, spec.ByteSize(m.Bytes))
				}
				for _, m := range inUse {
					fmt.Fprintf(g.stdout, "kept %s (%s/%s): in use by another piperun process\n", filepath.Join(d, m.Fingerprint), m.Pipeline, m.Stage)
				}
				if len(removed) == 0 && len(inUse) == 0 && err == nil {
					fmt.Fprintf(g.stdout, "%s: nothing to remove\n", d)
				}
				if err != nil {
					return exit(ExitFailed, err)
				}
			}
			return nil
		},
	}
	prune.Flags().Var(&olderThan, "older-than", "remove caches last used longer ago than this, e.g. 7d or 36h")
	// Unset means no age limit; "0s" would read as a limit that removes all.
	prune.Flags().Lookup("older-than").DefValue = ""
	prune.Flags().IntVar(&keepLast, "keep-last", 0, "always keep this many most recently used caches per directory")
	cmd.AddCommand(ls, info, prune)
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

// state is the STATE column: complete or partial, and how it is in use.
func (d dirManifest) state() string {
	s := "partial"
	if d.Complete {
		s = "complete"
	}
	switch d.use {
	case cache.Writing:
		s += fmt.Sprintf(", being written (pid %d)", d.pids[0])
	case cache.Reading:
		s += fmt.Sprintf(", being read (%d %s)", len(d.pids), noun(int64(len(d.pids)), "process", "processes"))
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
