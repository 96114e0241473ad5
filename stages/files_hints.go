package stages

// This file holds what validate says of a files pattern that matches
// nothing, or files this process cannot read.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/piperun/piperun/spec"
)

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
		var broken, dirs, denied, temps []string
		for _, m := range raw {
			st, err := os.Stat(m)
			switch {
			case err == nil && st.Mode().IsRegular() && tempName.MatchString(filepath.Base(m)):
				temps = append(temps, m)
			case errors.Is(err, fs.ErrPermission):
				// Listed by a folder that cannot be searched: no
				// broken link, as it was called.
				denied = append(denied, m)
			case err != nil:
				broken = append(broken, m)
			case st.IsDir():
				dirs = append(dirs, m)
			}
		}
		if len(denied) > 0 {
			in := filepath.Dir(denied[0])
			if len(denied) == len(raw) && filepath.Dir(denied[len(denied)-1]) == in {
				return msg + fmt.Sprintf("; folder %s lists %d names but none can be looked up (permission denied): it needs execute (search) permission", in, len(denied))
			}
			msg += fmt.Sprintf("; %d %s (such as %s) in a folder that cannot be searched: it needs execute (search) permission", len(denied), oneOrMany(len(denied), "name cannot be looked up", "names cannot be looked up"), denied[0])
		}
		if len(temps) == len(raw) {
			return msg + fmt.Sprintf("; %d %s, %s of an unfinished piperun write, passed over (above)", len(raw), oneOrMany(len(raw), "name matches", "names match"), oneOrMany(len(raw), "a temporary file", "all temporary files"))
		}
		msg += fmt.Sprintf("; %d %s, none a regular file", len(raw), oneOrMany(len(raw), "name matches", "names match"))
		if len(temps) > 0 {
			msg += fmt.Sprintf(" but %d %s of an unfinished piperun write, passed over (above)", len(temps), oneOrMany(len(temps), "temporary file", "temporary files"))
		}
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
