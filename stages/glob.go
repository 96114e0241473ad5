package stages

// This file holds the files stage's glob, with ** for any depth.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

func checkGlob(p string) error {
	// Read as written, before a Join drops the slash: "data/*/" matched the
	// files in data, where a shell and Python's glob match its folders.
	if q := filepath.ToSlash(p); len(q) > 1 && strings.HasSuffix(q, "/") {
		return fmt.Errorf("pattern %q ends with /, which matches folders, not files: match the files in them with %s*", p, q)
	}
	// Resolving the pattern cleans "d/*/." to "d/*" and "d/*/../x" to
	// "d/x", through the wildcard, which a shell reads otherwise.
	wild := false
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if (seg == "." || seg == "..") && wild {
			return fmt.Errorf("pattern %q has %s after a wildcard, which would be read as if the folder before it were named: write . and .. only after folders named in full", p, seg)
		}
		wild = wild || hasMeta(seg)
	}
	for _, seg := range strings.Split(filepath.ToSlash(p), "/") {
		if seg == "**" {
			continue
		}
		if _, err := filepath.Match(seg, ""); err != nil {
			return fmt.Errorf("bad pattern %q: %w", p, err)
		}
	}
	return nil
}

// hasMeta reports whether a pattern holds a wildcard that is not escaped.
func hasMeta(p string) bool {
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// unescapeGlob is the path a pattern without wildcards names: its
// escapes removed (the spec's folder is escaped into every pattern).
func unescapeGlob(p string) string {
	if !strings.Contains(p, `\`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			i++
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// Glob returns the files matching pattern, where a "**" segment matches
// any number of directories. Directories themselves are not returned.
func Glob(pattern string) ([]string, error) {
	if err := checkGlob(pattern); err != nil {
		return nil, err
	}
	if !strings.Contains(pattern, "**") {
		m, err := globAll(pattern)
		if err != nil {
			return nil, err
		}
		return regularFiles(m), nil
	}
	// Walk from the longest prefix without wildcards.
	segs := strings.Split(filepath.ToSlash(pattern), "/")
	root := []string{}
	for _, s := range segs {
		if hasMeta(s) {
			break
		}
		root = append(root, s)
	}
	base := unescapeGlob(strings.Join(root, "/"))
	if base == "" {
		base = "."
		if strings.HasPrefix(pattern, "/") {
			base = "/"
		}
	}
	rest := segs[len(root):]
	var out []string
	// The walk follows no symlink, but the root's own is followed (a
	// trailing separator makes its Lstat read the target): data ->
	// /mnt/dataset is common, and following the folder named cannot loop
	// (** found nothing there). Only a folder's: on a
	// file, file/** matches the file, as before.
	start := filepath.FromSlash(base)
	if st, err := os.Stat(start); err == nil && st.IsDir() && !strings.HasSuffix(start, string(filepath.Separator)) {
		start += string(filepath.Separator)
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && os.IsNotExist(err) {
				return filepath.SkipAll
			}
			// A folder listed but not searched: its entries cannot be
			// opened, and the error named the entry, not the folder.
			if _, serr := os.Lstat(p); errors.Is(serr, fs.ErrPermission) && p != start {
				return fmt.Errorf("folder %s needs execute (search) permission for this process: %w", filepath.Dir(p), fs.ErrPermission)
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(filepath.FromSlash(base), p)
		if matchSegs(rest, strings.Split(filepath.ToSlash(rel), "/")) {
			out = append(out, p)
		}
		return nil
	})
	sort.Strings(out)
	// As with a plain pattern, only what opens as a regular file: not a
	// broken symlink, which the walk lists like a file.
	return regularFiles(out), err
}

// globAll is filepath.Glob of a pattern without "**", directories and
// all, that reads every literal segment as a path, the prefix and those
// after a wildcard alike: a folder named there need not be listed, only
// searched, as a spec's folder escaped into every pattern ("sp\[1]") was,
// below a parent that lets no one list it, and as the shell reads
// data/a/*/c/*.jsonl where data/a/b may be searched but not listed
// (filepath.Glob lists it, and matched nothing).
func globAll(pattern string) ([]string, error) {
	segs := strings.Split(filepath.ToSlash(pattern), "/")
	k := 0
	for k < len(segs) && !hasMeta(segs[k]) {
		k++
	}
	base := unescapeGlob(strings.Join(segs[:k], "/"))
	switch {
	case k == len(segs):
		if _, err := os.Lstat(base); err != nil {
			return nil, nil
		}
		return []string{filepath.FromSlash(base)}, nil
	case base == "" && k > 0: // the root: "/*"
		base = "/"
	case base == "":
		base = "."
	}
	for _, s := range segs[k:] {
		if _, err := path.Match(s, ""); err != nil {
			return nil, err
		}
	}
	var out []string
	globFrom(filepath.FromSlash(base), segs[k:], &out)
	return out, nil
}

// globFrom appends to out what the segments segs match below dir: a
// wildcard segment by listing dir, a literal one by looking its name up.
// As filepath.Glob, it passes over what it cannot read.
func globFrom(dir string, segs []string, out *[]string) {
	seg, last := segs[0], len(segs) == 1
	if !hasMeta(seg) {
		p := filepath.Join(dir, unescapeGlob(seg))
		if last {
			if _, err := os.Lstat(p); err == nil {
				*out = append(*out, p)
			}
		} else if st, err := os.Stat(p); err == nil && st.IsDir() {
			globFrom(p, segs[1:], out)
		}
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if ok, _ := path.Match(seg, e.Name()); !ok {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if last {
			*out = append(*out, p)
		} else if st, err := os.Stat(p); err == nil && st.IsDir() {
			globFrom(p, segs[1:], out)
		}
	}
}

func regularFiles(m []string) []string {
	out := m[:0]
	for _, p := range m {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			out = append(out, p)
		}
	}
	return out
}

// globMatches reports whether the file at path, both absolute, matches
// pattern as the files stage reads it (** for any depth).
func globMatches(pattern, path string) bool {
	return matchSegs(strings.Split(filepath.ToSlash(filepath.Clean(pattern)), "/"), strings.Split(filepath.ToSlash(filepath.Clean(path)), "/"))
}

func matchSegs(pat, name []string) bool {
	if len(pat) == 0 {
		return len(name) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(name); i++ {
			if matchSegs(pat[1:], name[i:]) {
				return true
			}
		}
		return false
	}
	if len(name) == 0 {
		return false
	}
	ok, _ := filepath.Match(pat[0], name[0])
	return ok && matchSegs(pat[1:], name[1:])
}
