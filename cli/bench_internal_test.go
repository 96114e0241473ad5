package cli

import "testing"

// TestOrderKey: what bench compares across epochs is where a sample came
// from, without what changes every epoch.
func TestOrderKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"data/train-0.tfrecord record 17", "data/train-0.tfrecord record 17"},
		{"sample 3 (epoch 1)", "sample 3"},
		{"batch 4 (epoch 2) of a.tfrecord record 0 … b.tfrecord record 9", "a.tfrecord record 0 … b.tfrecord record 9"},
		{"batch 0 (epoch 1) of sample 0 (epoch 1) … sample 3 (epoch 1)", "sample 0 … sample 3"},
	} {
		if got := orderKey(tc.in); got != tc.want {
			t.Errorf("orderKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestShuffleCheck: the verdict for each way epochs can follow each other.
func TestShuffleCheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fixed     string
		epochs    [][]string
		same, pos int
		verdict   string
	}{
		{"one epoch", "", [][]string{{"a", "b"}, nil}, 0, 0, "one epoch: nothing to compare"},
		{"same order", "", [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}}, 6, 6,
			"every epoch comes in the same order: add a shuffle stage (it reshuffles each epoch unless reshuffle_each_epoch: false), or shuffle: true on a files source"},
		{"same order, told so", "s", [][]string{{"a", "b"}, {"a", "b"}}, 2, 2,
			`every epoch comes in the same order: shuffle "s" has reshuffle_each_epoch: false`},
		{"mostly", "", [][]string{{"a", "b", "c", "d"}, {"a", "b", "c", "x"}}, 3, 4,
			"epochs come in much the same order (3 of 4 places hold the sample of the epoch before)"},
		{"reshuffled", "", [][]string{{"a", "b", "c", "d"}, {"b", "a", "c", "d"}, {"d", "c", "a", "b"}}, 2, 8,
			"reshuffled every epoch (2 of 8 places hold the sample of the epoch before)"},
		{"a shorter last epoch", "", [][]string{{"a", "b", "c"}, {"c", "a"}}, 0, 2,
			"reshuffled every epoch (0 of 2 places hold the sample of the epoch before)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shuffleCheck(tc.epochs, tc.fixed)
			if got.Same != tc.same || got.Positions != tc.pos || got.Verdict != tc.verdict {
				t.Errorf("got %+v\nwant same %d of %d, %q", got, tc.same, tc.pos, tc.verdict)
			}
		})
	}
}

// TestGitHubProperty: a file name in a workflow command's property is
// escaped where a comma or colon would end it (re-test: a,b:c.yaml).
func TestGitHubProperty(t *testing.T) {
	for in, want := range map[string]string{
		"a,b:c.yaml":      "a%2Cb%3Ac.yaml",
		"plain/spec.yaml": "plain/spec.yaml",
		"100%\nnew.yaml":  "100%25%0Anew.yaml",
		"C:\\dir\\x.yaml": "C%3A\\dir\\x.yaml",
	} {
		if got := ghProperty(in); got != want {
			t.Errorf("ghProperty(%q) = %q, want %q", in, got, want)
		}
	}
}
