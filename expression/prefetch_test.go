package expression_test

import (
	"slices"
	"testing"

	"github.com/piperun/piperun/expression"
	"github.com/piperun/piperun/sample"
)

// TestFilesRead: the fields an expression passes straight to read_file,
// fused decodes included, and no name bound by let or path computed
// from fields.
func TestFilesRead(t *testing.T) {
	in := sample.Schema{Fields: []sample.Field{
		{Name: "path", Type: sample.TString}, {Name: "a", Type: sample.TString},
		{Name: "b", Type: sample.TString}, {Name: "label", Type: sample.TInt},
	}}
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{`read_file(path)`, []string{"path"}},
		{`decode_image(read_file(path), 3) | resize(224, 224) | to_float()`, []string{"path"}},
		{`decode_image(read_file(path), 3) | random_resized_crop(224, 224) | flip_left_right(0.5)`, []string{"path"}},
		{`len(read_file(a)) + len(read_file(b)) + len(read_file(a))`, []string{"a", "b"}},
		{`let p = a; read_file(p)`, nil},
		{`read_file(a + ".jpg")`, nil},
		{`label + 1`, nil},
	} {
		p, err := expression.Default().Compile(tc.src, in, sample.Any)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		if got := p.FilesRead(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: FilesRead() = %q, want %q", tc.src, got, tc.want)
		}
	}
}
