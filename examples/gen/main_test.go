package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"image/jpeg"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/piperun/piperun/example"
	"github.com/piperun/piperun/tfrecord"
)

// committed is where the generated dataset lives in the repository.
var committed = filepath.Join("..", "data")

// TestCommittedDataIsReproducible regenerates the dataset and compares it
// with the committed files byte for byte. If it fails after a Go upgrade
// (image/jpeg output changed), rerun `go run ./examples/gen` and commit.
func TestCommittedDataIsReproducible(t *testing.T) {
	tmp := t.TempDir()
	files, err := generate(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != trainShard+1+folderPerClass*len(classes) {
		t.Errorf("generated %d files", len(files))
	}
	for _, name := range files {
		got, err := os.ReadFile(filepath.Join(tmp, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(committed, filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("%s: not committed: %v", name, err)
			continue
		}
		if sha256.Sum256(got) != sha256.Sum256(want) {
			t.Errorf("%s: regenerated file differs from the committed one (%d vs %d bytes)", name, len(got), len(want))
		}
	}
	// Nothing stale is left in the committed tree.
	for _, sub := range []string{"shapes", "shapes-folder"} {
		err := filepath.WalkDir(filepath.Join(committed, sub), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(committed, path)
			if !slices.Contains(files, filepath.ToSlash(rel)) {
				t.Errorf("%s is committed but not generated", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDatasetContents reads the validation shard back as a pipeline would
// and checks the features and the ImageFolder copies.
func TestDatasetContents(t *testing.T) {
	r, c, err := tfrecord.Open(filepath.Join(committed, "shapes", "val-00000-of-00001.tfrecord"), tfrecord.None, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	perClass := make([]int, len(classes))
	copies := 0
	for i := 0; ; i++ {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ex, err := example.Unmarshal(rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		label := ex.Features["image/class/label"].Ints[0]
		text := string(ex.Features["image/class/text"].Bytes[0])
		if label < 0 || int(label) >= len(classes) || classes[label] != text {
			t.Fatalf("record %d: label %d text %q", i, label, text)
		}
		perClass[label]++
		enc := ex.Features["image/encoded"].Bytes[0]
		img, err := jpeg.Decode(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if b := img.Bounds(); b.Dx() != size || b.Dy() != size ||
			ex.Features["image/height"].Ints[0] != size || ex.Features["image/width"].Ints[0] != size {
			t.Fatalf("record %d: image %v", i, b)
		}
		// Files in the ImageFolder tree are the same bytes as the record.
		folder, err := os.ReadFile(filepath.Join(committed, "shapes-folder", text, fmt.Sprintf("%03d.jpg", i)))
		if err == nil {
			copies++
			if !bytes.Equal(folder, enc) {
				t.Errorf("record %d: ImageFolder copy differs", i)
			}
		}
	}
	if r.Index() != valCount {
		t.Errorf("%d validation records, want %d", r.Index(), valCount)
	}
	if copies != folderPerClass*len(classes) {
		t.Errorf("%d ImageFolder copies, want %d", copies, folderPerClass*len(classes))
	}
	for l, n := range perClass {
		if n < folderPerClass {
			t.Errorf("class %s has only %d validation images", classes[l], n)
		}
	}
}
