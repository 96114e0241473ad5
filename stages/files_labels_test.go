package stages_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/piperun/piperun/spec"
	"github.com/piperun/piperun/stages"
)

// makeTree creates entries under dir: "a/b.jpg" a file, "a/" an empty
// folder, "a/l -> target" a symlink (target relative to the link's folder).
func makeTree(t *testing.T, dir string, entries []string) {
	t.Helper()
	for _, e := range entries {
		p, target, link := strings.Cut(e, " -> ")
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case link:
			err = os.Symlink(filepath.FromSlash(target), full)
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		default:
			err = os.WriteFile(full, []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestFromDirIsImageFolder: labels: from_dir labels a tree as
// torchvision's ImageFolder (0.14) does: a file's class is the folder
// directly below the pattern's root that holds it, at any depth; the
// classes are every folder there, hidden or symlinked ones too, sorted as
// Python's sorted() (code points: "Zebra" before "apple", "10" before
// "9"); a class folder with no file matched is an error, as it is in
// ImageFolder ("Found no valid file for the classes B_empty,
// empty_class"), and so is a pattern whose files all sit in its root
// ("Couldn't find any class folder"); files beside the class folders are
// left out with a warning, as ImageFolder leaves them out. The labels
// and errors were checked against torchvision's DatasetFolder on the same
// trees. Found by a new-user test: "apple/nested/y.JPEG" was class
// "nested", a class of its own that shifted the labels after it; empty
// class folders were passed over in silence.
func TestFromDirIsImageFolder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tree     []string
		patterns []string
		more     string // more settings of the stage
		at       string // the spec's folder in the tree, "" for its top
		// want is "path label class_name" per file, in path order, or the
		// diagnostics ("warning: ..." or the error), ROOT for the case's
		// folder.
		want, diags string
	}{
		{
			name: "nested, hidden, symlinked file, sorted by code point",
			tree: []string{"root/Zebra/z1.JPEG", "root/Zebra/z2.JPEG", "root/apple/a1.JPEG", "root/apple/nested/a2.JPEG",
				"root/apple/nested/deeper/a3.JPEG", "root/banana/b1.JPEG", "root/_under/u.JPEG", "root/10/t.JPEG", "root/9/n.JPEG",
				"root/cherry/c1.JPEG", "root/cherry/link.JPEG -> ../banana/b1.JPEG", "root/.hidden/h.JPEG", "root/Éclair/e.JPEG"},
			patterns: []string{"root/**/*.JPEG"},
			// torchvision: classes ['.hidden', '10', '9', 'Zebra', '_under', 'apple', 'banana', 'cherry', 'Éclair'].
			want: `root/.hidden/h.JPEG 0 .hidden
root/10/t.JPEG 1 10
root/9/n.JPEG 2 9
root/Zebra/z1.JPEG 3 Zebra
root/Zebra/z2.JPEG 3 Zebra
root/_under/u.JPEG 4 _under
root/apple/a1.JPEG 5 apple
root/apple/nested/a2.JPEG 5 apple
root/apple/nested/deeper/a3.JPEG 5 apple
root/banana/b1.JPEG 6 banana
root/cherry/c1.JPEG 7 cherry
root/cherry/link.JPEG 7 cherry
root/Éclair/e.JPEG 8 Éclair`,
		},
		{
			name:     "empty class folders",
			tree:     []string{"root/B_empty/", "root/empty_class/readme.txt", "root/apple/a.JPEG"},
			patterns: []string{"root/**/*.JPEG"},
			// torchvision: Found no valid file for the classes B_empty, empty_class.
			diags: `class folders B_empty and empty_class in ROOT/root hold no file that pattern "root/**/*.JPEG" matches: every folder directly in ROOT/root is a class, numbered in sorted order as torchvision's ImageFolder does, so an empty one would take a label (ImageFolder refuses such a tree too); put files in them, or move them out of ROOT/root`,
		},
		{
			name:     "a hidden empty folder",
			tree:     []string{"root/.ipynb_checkpoints/", "root/cat/c.jpg"},
			patterns: []string{"root/*/*.jpg"},
			diags:    `class folder .ipynb_checkpoints in ROOT/root holds no file that pattern "root/*/*.jpg" matches: every folder directly in ROOT/root is a class, numbered in sorted order as torchvision's ImageFolder does, so an empty one would take a label (ImageFolder refuses such a tree too); put files in it, or move it out of ROOT/root; a hidden folder is a class too, as in ImageFolder`,
		},
		{
			name:     "flat folder",
			tree:     []string{"flat/a.JPEG", "flat/b.JPEG"},
			patterns: []string{"flat/*.JPEG"},
			// torchvision: Couldn't find any class folder in flat.
			diags: `every file pattern "flat/*.JPEG" matches sits directly in ROOT/flat, the folder it starts from, so none has a class: a file's class is the folder directly in ROOT/flat that holds it (ROOT/flat/<class>/…, torchvision's ImageFolder layout); match files in class folders (flat/*/*.JPEG, or */*.JPEG if flat is itself one class's folder), or drop labels: from_dir`,
		},
		{
			name:     "files beside the class folders",
			tree:     []string{"root/MANIFEST.tsv", "root/cat/c.jpg", "root/dog/d.jpg"},
			patterns: []string{"root/**"},
			// torchvision: classes ['cat', 'dog'], MANIFEST.tsv not a sample.
			diags: `warning: 1 file (ROOT/root/MANIFEST.tsv) that pattern "root/**" matches sits directly in ROOT/root, the folder it starts from, outside the class folders: labels: from_dir leaves it out, as torchvision's ImageFolder does (a file's class is the folder directly in ROOT/root that holds it); match the class folders' files only (root/*/**) not to list it`,
			want: `root/cat/c.jpg 0 cat
root/dog/d.jpg 1 dog`,
		},
		{
			name:     "symlinked class folder",
			tree:     []string{"data/cat/c.jpg", "other/dogs/d.jpg", "data/dog -> ../other/dogs"},
			patterns: []string{"data/*/*.jpg"},
			// torchvision: classes ['cat', 'dog'].
			want: `data/cat/c.jpg 0 cat
data/dog/d.jpg 1 dog`,
		},
		{
			// ** does not follow a symlinked folder (ImageFolder does).
			name:     "symlinked class folder under **",
			tree:     []string{"data/cat/c.jpg", "other/dogs/d.jpg", "data/dog -> ../other/dogs"},
			patterns: []string{"data/**/*.jpg"},
			diags:    `class folder dog in ROOT/data holds no file that pattern "data/**/*.jpg" matches: every folder directly in ROOT/data is a class, numbered in sorted order as torchvision's ImageFolder does, so an empty one would take a label (ImageFolder refuses such a tree too); put files in it, or move it out of ROOT/data; dog is a symlinked folder, which ** does not follow: match it with a pattern without ** (data/*/*.jpg)`,
		},
		{
			// A pattern cannot pick some classes: the others would still
			// be numbered.
			name:     "a pattern that leaves a class out",
			tree:     []string{"root/cat/c.jpg", "root/dog/d.jpg"},
			patterns: []string{"root/c*/*.jpg"},
			// torchvision: Found no valid file for the classes dog.
			diags: `class folder dog in ROOT/root holds no file that pattern "root/c*/*.jpg" matches: every folder directly in ROOT/root is a class, numbered in sorted order as torchvision's ImageFolder does, so an empty one would take a label (ImageFolder refuses such a tree too); put files in it, or move it out of ROOT/root`,
		},
		{
			// Two roots: each file's class is from its own pattern's root,
			// the classes are both roots' together, sorted.
			name:     "two roots",
			tree:     []string{"r1/cat/1.jpg", "r1/dog/1.jpg", "r2/bird/1.jpg", "r2/cat/2.jpg"},
			patterns: []string{"r1/*/*.jpg", "r2/**/*.jpg"},
			want: `r1/cat/1.jpg 1 cat
r1/dog/1.jpg 2 dog
r2/bird/1.jpg 0 bird
r2/cat/2.jpg 1 cat`,
		},
		{
			// Classes are counted before sharding: every rank agrees.
			name:     "a shard, shuffled",
			tree:     []string{"r/a/1.jpg", "r/b/1.jpg", "r/b/2.jpg", "r/c/1.jpg"},
			patterns: []string{"r/*/*.jpg"},
			more:     ", shuffle: true, shard: {index: 1, count: 2}",
			want: `r/b/1.jpg 1 b
r/c/1.jpg 2 c`,
		},
		{
			// Two patterns of one root are one ImageFolder tree.
			name:     "one root, two patterns",
			tree:     []string{"root/cat/1.jpg", "root/dog/2.png", "root/bird/3.gif"},
			patterns: []string{"root/*/*.jpg", "root/*/*.png"},
			diags:    `class folder bird in ROOT/root holds no file that the patterns starting there match: every folder directly in ROOT/root is a class, numbered in sorted order as torchvision's ImageFolder does, so an empty one would take a label (ImageFolder refuses such a tree too); put files in it, or move it out of ROOT/root`,
		},
		{
			// A file another pattern gives a class is not left out.
			name:     "a root file of one pattern, classed by another",
			tree:     []string{"data/cat/1.jpg", "data/dog/2.jpg"},
			patterns: []string{"data/cat/*.jpg", "data/*/*.jpg"},
			want: `data/cat/1.jpg 0 cat
data/dog/2.jpg 1 dog`,
		},
		{
			name:     "class folders named one by one",
			tree:     []string{"data/cat/1.jpg", "data/dog/2.jpg"},
			patterns: []string{"data/cat/*.jpg", "data/dog/*.jpg"},
			diags: `every file pattern "data/cat/*.jpg" matches sits directly in ROOT/data/cat, the folder it starts from, so none has a class: a file's class is the folder directly in ROOT/data/cat that holds it (ROOT/data/cat/<class>/…, torchvision's ImageFolder layout); match files in class folders (data/cat/*/*.jpg, or data/*/*.jpg if cat is itself one class's folder), or drop labels: from_dir
every file pattern "data/dog/*.jpg" matches sits directly in ROOT/data/dog, the folder it starts from, so none has a class: a file's class is the folder directly in ROOT/data/dog that holds it (ROOT/data/dog/<class>/…, torchvision's ImageFolder layout); match files in class folders (data/dog/*/*.jpg, or data/*/*.jpg if dog is itself one class's folder), or drop labels: from_dir`,
		},
		{
			// The spec's own folder is taken literally: a spec in "sp[1]"
			// read "sp1"'s files.
			name: "a spec folder with wildcard characters",
			tree: []string{"sp[1]/data/cat/a.jpg", "sp[1]/data/dog/b.jpg", "sp1/data/cat/other.jpg", "sp1/data/bird/x.jpg",
				"sp*/data/ant/y.jpg"},
			at:       "sp[1]",
			patterns: []string{"data/*/*.jpg", "data/**/*.jpg"},
			want: `sp[1]/data/cat/a.jpg 0 cat
sp[1]/data/dog/b.jpg 1 dog`,
		},
		{
			name:     "a spec folder with a star, under **",
			tree:     []string{"sp*/data/ant/y.jpg", "spx/data/cat/a.jpg"},
			at:       "sp*",
			patterns: []string{"data/**/*.jpg"},
			want:     `sp*/data/ant/y.jpg 0 ant`,
		},
		{
			// An escaped bracket is no wildcard: the root is "photos
			// [2024]", whose folders are the classes; every file was
			// class "photos [2024]".
			name:     "an escaped bracket in the root",
			tree:     []string{"photos [2024]/cat/a.jpg", "photos [2024]/dog/b.jpg"},
			patterns: []string{`photos \[2024\]/*/*.jpg`, `photos \[2024\]/**/*.jpg`},
			want: `photos [2024]/cat/a.jpg 0 cat
photos [2024]/dog/b.jpg 1 dog`,
		},
		{
			// A root that is a symlink to a folder is walked (data ->
			// /mnt/dataset); ** found nothing there.
			name:     "a symlinked root under **",
			tree:     []string{"d/cat/a.jpg", "d/dog/b.jpg", "g/dlink -> ../d"},
			patterns: []string{"g/dlink/**/*.jpg"},
			want: `g/dlink/cat/a.jpg 0 cat
g/dlink/dog/b.jpg 1 dog`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			makeTree(t, dir, tc.tree)
			specDir := filepath.Join(dir, filepath.FromSlash(tc.at))
			var pats []string
			for _, p := range tc.patterns {
				pats = append(pats, "'"+p+"'")
			}
			src := fmt.Sprintf("version: 1\nname: f\nstages:\n  - {name: f, type: files, patterns: [%s], labels: from_dir%s}\n  - {name: out, type: discard}\n", strings.Join(pats, ", "), tc.more)
			reg := stages.Default()
			_, diags := spec.Parse(filepath.Join(specDir, "f.yaml"), []byte(src), spec.Options{Catalog: reg, Environment: true})
			var got []string
			for _, d := range diags {
				// Less the position and the field.
				msg := strings.SplitN(d.String(), ": ", 2)[1]
				msg = strings.Replace(msg, "stages[0].labels: ", "", 1)
				got = append(got, strings.ReplaceAll(msg, dir, "ROOT"))
			}
			if g := strings.Join(got, "\n"); g != tc.diags {
				t.Errorf("validate:\n got %s\nwant %s", g, tc.diags)
			}

			// Built without the checks (a Go caller, or a tree changed
			// since): the same errors and warnings, and the labels.
			sp, _ := spec.Parse(filepath.Join(specDir, "f.yaml"), []byte(src), spec.Options{Catalog: reg})
			if sp == nil {
				t.Fatal("no spec")
			}
			core, logs := observer.New(zap.WarnLevel)
			typ, _ := reg.Type("files")
			built, err := typ.Build(&stages.Env{Spec: sp, Stage: sp.Stages[0], Log: zap.New(core)}, sp.Stages[0].Config)
			var warned []string
			for _, e := range logs.All() {
				warned = append(warned, "warning: "+strings.ReplaceAll(e.Message, dir, "ROOT"))
			}
			if err != nil {
				warned = append(warned, strings.ReplaceAll(err.Error(), dir, "ROOT"))
			}
			// Said with what it is about, outside validate's stages[0].labels.
			var want []string
			for _, l := range strings.Split(tc.diags, "\n") {
				if w, ok := strings.CutPrefix(l, "warning: "); ok {
					want = append(want, "warning: labels: from_dir: "+w)
				} else if l != "" {
					want = append(want, "labels: from_dir: "+l)
				}
			}
			if g := strings.Join(warned, "\n"); g != strings.Join(want, "\n") {
				t.Errorf("build:\n got %s\nwant %s", g, strings.Join(want, "\n"))
			}
			if err != nil {
				if tc.want != "" {
					t.Errorf("want labels, got %v", err)
				}
				return
			}
			src2 := built.(stages.Source)
			if err := src2.Open(context.Background(), 0); err != nil {
				t.Fatal(err)
			}
			var rows []string
			for {
				s, err := src2.Next(context.Background())
				if errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				rel, _ := filepath.Rel(dir, s.Fields["path"].(string))
				rows = append(rows, fmt.Sprintf("%s %d %s", filepath.ToSlash(rel), s.Fields["label"], s.Fields["class_name"]))
			}
			sort.Strings(rows) // a shuffled order
			if g := strings.Join(rows, "\n"); g != tc.want {
				t.Errorf("labels:\n got %s\nwant %s", g, tc.want)
			}
		})
	}
}

// TestFromDirOnTheExampleTree: examples/data/shapes-folder, which
// examples/pipelines/image_folder.yaml reads, is labelled as
// torchvision's ImageFolder labels it (class_to_idx {'circle': 0,
// 'cross': 1, 'square': 2, 'triangle': 3}, 100 files), the labels of the
// TFRecords it was cut from.
func TestFromDirOnTheExampleTree(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "examples", "data", "shapes-folder"))
	if err != nil {
		t.Fatal(err)
	}
	src := "version: 1\nname: f\nstages:\n  - {name: f, type: files, pattern: '" + filepath.ToSlash(root) + "/**/*.jpg', labels: from_dir}\n  - {name: out, type: discard}\n"
	reg := stages.Default()
	sp, diags := spec.Parse("f.yaml", []byte(src), spec.Options{Catalog: reg, Environment: true})
	if len(diags) > 0 || sp == nil {
		t.Fatalf("validate: %v", diags)
	}
	typ, _ := reg.Type("files")
	built, err := typ.Build(&stages.Env{Spec: sp, Stage: sp.Stages[0], Log: zap.NewNop()}, sp.Stages[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	s := built.(stages.Source)
	if err := s.Open(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"circle": 0, "cross": 1, "square": 2, "triangle": 3}
	n := 0
	for {
		smp, err := s.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		p, cls, label := smp.Fields["path"].(string), smp.Fields["class_name"].(string), smp.Fields["label"].(int64)
		if filepath.Base(filepath.Dir(p)) != cls || want[cls] != label {
			t.Errorf("%s: label %d class_name %q", p, label, cls)
		}
	}
	if n != 100 {
		t.Errorf("%d files, want 100", n)
	}
}
