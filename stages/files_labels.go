package stages

// This file holds labels: from_dir, ImageFolder's class indices.

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// labelPattern is what one pattern matched, for labels: from_dir.
type labelPattern struct {
	pattern string   // as written
	abs     string   // resolved
	files   []string // its matches
}

// labelProblem says why labels: from_dir cannot label what a pattern
// matched (err), or warns of it.
type labelProblem struct {
	err bool
	msg string
}

// folderLabels is the ImageFolder labelling of the files matched.
type folderLabels struct {
	files   []string // the files labelled, sorted
	labels  []int32  // each file's label, an index into classes
	classes []string // every class, sorted by name
}

// patternRoot splits a slash-separated pattern into the folder it starts
// from, its segments before the first with a wildcard ("." or "/" when
// none, its folder when it has no wildcard), and the rest.
func patternRoot(p string) (root, rest string) {
	segs := strings.Split(p, "/")
	n := 0
	for n < len(segs)-1 && !hasMeta(segs[n]) {
		n++
	}
	root = strings.Join(segs[:n], "/")
	switch {
	case root == "" && strings.HasPrefix(p, "/"):
		root = "/"
	case root == "":
		root = "."
	}
	return root, strings.Join(segs[n:], "/")
}

// joinPattern appends a slash-separated tail to a pattern's root.
func joinPattern(root, tail string) string {
	switch root {
	case ".":
		return tail
	case "/":
		return "/" + tail
	}
	return strings.TrimSuffix(root, "/") + "/" + tail
}

// imageFolder labels the files that pats matched as torchvision's
// ImageFolder does: a pattern's root is the folder it starts from (its
// path before the first wildcard); every folder directly in a root is a
// class, and a file's class is the one of them it sits in, at any depth
// below. With several patterns the classes are those of all their roots
// together, sorted; a file matched by several takes its class from the
// first that gives it one. A file that sits directly in the root of every
// pattern that matched it has no class: it is left out with a warning, or
// an error when it is all a pattern matched. A class folder that holds no
// file matched is an error, as in ImageFolder: it would take a label.
func imageFolder(pats []labelPattern) (*folderLabels, []labelProblem) {
	type rootInfo struct {
		first  int             // the first pattern starting from it
		pats   []int           // every pattern starting from it
		has    map[string]bool // class folders holding a file a pattern of this root matched
		active bool            // it gave a file its class
	}
	fl := &folderLabels{}
	class := map[string]string{} // file to class name
	roots := map[string]*rootInfo{}
	var order []string // roots in the order of their first pattern
	absRoot := make([]string, len(pats))
	for i, lp := range pats {
		r, _ := patternRoot(filepath.ToSlash(lp.abs))
		r = filepath.Clean(filepath.FromSlash(unescapeGlob(r)))
		absRoot[i] = r
		ri := roots[r]
		if ri == nil {
			ri = &rootInfo{first: i, has: map[string]bool{}}
			roots[r] = ri
			order = append(order, r)
		}
		ri.pats = append(ri.pats, i)
		prefix := r + string(filepath.Separator)
		if strings.HasSuffix(r, string(filepath.Separator)) {
			prefix = r
		}
		for _, f := range lp.files {
			rel, ok := strings.CutPrefix(f, prefix)
			if !ok {
				var err error
				if rel, err = filepath.Rel(r, f); err != nil {
					continue
				}
			}
			cls, _, nested := strings.Cut(filepath.ToSlash(rel), "/")
			if !nested || cls == ".." || cls == "." {
				continue
			}
			ri.has[cls] = true
			if _, ok := class[f]; !ok {
				class[f] = cls
				fl.files = append(fl.files, f)
				ri.active = true
			}
		}
	}
	sort.Strings(fl.files)
	var problems []labelProblem
	told := map[string]bool{} // files left out, said once
	for i, lp := range pats {
		wroot, rest := patternRoot(filepath.ToSlash(lp.pattern))
		var out []string
		labelled := false
		for _, f := range lp.files {
			if _, ok := class[f]; ok {
				labelled = true
			} else if !told[f] {
				told[f] = true
				out = append(out, f)
			}
		}
		if len(out) == 0 {
			continue
		}
		suggest := joinPattern(wroot, "*/"+rest)
		if !labelled {
			also := ""
			if up := path.Dir(wroot); wroot != "." && wroot != "/" && up != wroot && !strings.HasSuffix(wroot, "..") {
				also = fmt.Sprintf(", or %s if %s is itself one class's folder", joinPattern(up, "*/"+rest), path.Base(wroot))
			}
			problems = append(problems, labelProblem{err: true, msg: fmt.Sprintf("every file pattern %q matches sits directly in %s, the folder it starts from, so none has a class: a file's class is the folder directly in %s that holds it (%s, torchvision's ImageFolder layout); match files in class folders (%s%s), or drop labels: from_dir",
				lp.pattern, absRoot[i], absRoot[i], filepath.Join(absRoot[i], "<class>", "…"), suggest, also)})
			continue
		}
		which, verb, it := fmt.Sprintf("1 file (%s)", out[0]), "sits", "it"
		if len(out) > 1 {
			which, verb, it = fmt.Sprintf("%d files (such as %s)", len(out), out[0]), "sit", "them"
		}
		problems = append(problems, labelProblem{msg: fmt.Sprintf("%s that pattern %q matches %s directly in %s, the folder it starts from, outside the class folders: labels: from_dir leaves %s out, as torchvision's ImageFolder does (a file's class is the folder directly in %s that holds it); match the class folders' files only (%s) not to list %s",
			which, lp.pattern, verb, absRoot[i], it, absRoot[i], suggest, it)})
	}
	classes := map[string]bool{}
	for _, f := range fl.files {
		classes[class[f]] = true
	}
	for _, r := range order {
		ri := roots[r]
		if !ri.active {
			continue
		}
		entries, err := os.ReadDir(r)
		if err != nil {
			problems = append(problems, labelProblem{err: true, msg: fmt.Sprintf("listing the class folders: %v", err)})
			continue
		}
		var empty, links []string
		for _, e := range entries {
			dir := e.IsDir()
			if e.Type()&fs.ModeSymlink != 0 {
				// A symlink to a folder is a class, as in ImageFolder
				// (os.scandir's is_dir follows it).
				if st, err := os.Stat(filepath.Join(r, e.Name())); err == nil && st.IsDir() {
					dir = true
					links = append(links, e.Name())
				}
			}
			if !dir {
				continue
			}
			classes[e.Name()] = true
			if !ri.has[e.Name()] {
				empty = append(empty, e.Name())
			}
		}
		if len(empty) == 0 {
			continue
		}
		names, verb, them := "class folder "+empty[0], "holds", "it"
		if len(empty) > 1 {
			names, verb, them = "class folders "+listNames(empty, 10), "hold", "them"
		}
		matched := fmt.Sprintf("that pattern %q matches", pats[ri.first].pattern)
		if len(ri.pats) > 1 {
			matched = "that the patterns starting there match"
		}
		msg := fmt.Sprintf("%s in %s %s no file %s: every folder directly in %s is a class, numbered in sorted order as torchvision's ImageFolder does, so an empty one would take a label (ImageFolder refuses such a tree too); put files in %s, or move %s out of %s",
			names, r, verb, matched, r, them, them, r)
		for _, name := range empty {
			if strings.HasPrefix(name, ".") {
				msg += "; a hidden folder is a class too, as in ImageFolder"
				break
			}
		}
		for _, name := range empty {
			if !slices.Contains(links, name) {
				continue
			}
			for _, i := range ri.pats {
				p := filepath.ToSlash(pats[i].pattern)
				if strings.Contains(p, "**") {
					wroot, _ := patternRoot(p)
					msg += fmt.Sprintf("; %s is a symlinked folder, which ** does not follow: match it with a pattern without ** (%s)", name, joinPattern(wroot, "*/"+path.Base(p)))
					break
				}
			}
			break
		}
		problems = append(problems, labelProblem{err: true, msg: msg})
	}
	fl.classes = make([]string, 0, len(classes))
	for c := range classes {
		fl.classes = append(fl.classes, c)
	}
	// Byte order is code point order, Python's sorted() on the names.
	sort.Strings(fl.classes)
	index := make(map[string]int32, len(fl.classes))
	for i, c := range fl.classes {
		index[c] = int32(i)
	}
	fl.labels = make([]int32, len(fl.files))
	for i, f := range fl.files {
		fl.labels[i] = index[class[f]]
	}
	return fl, problems
}

// listNames writes names as "a, b and c", the first most of them and how
// many more.
func listNames(names []string, most int) string {
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
