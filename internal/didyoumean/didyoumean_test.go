package didyoumean

import (
	"fmt"
	"testing"
)

func TestClosest(t *testing.T) {
	names := []string{"discard", "map", "range", "resize", "to_float", "write_jsonl"}
	for _, tc := range []struct{ got, want string }{
		{"dscard", "discard"},
		{"MAP", "map"}, // three edits, one word in another case
		{"To_Float", "to_float"},
		{"tofloat", "to_float"},
		{"resiz", "resize"},
		{"rnage", "range"}, // a swap is two edits
		{"mapp", "map"},
		{"filter", ""}, // nothing near: no guess
		{"", ""},       // map is three edits away: too far
		{"write_json", "write_jsonl"},
	} {
		if got := Closest(tc.got, names); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.got, got, tc.want)
		}
	}
}

func TestDistanceCounts(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"map", "MAP", 3}, {"resiz", "resize", 1}, {"ab", "ba", 2},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func ExampleClosest() {
	types := []string{"batch", "discard", "files", "map", "shuffle"}
	fmt.Println(Closest("shufle", types))
	fmt.Println(Closest("Files", types))
	fmt.Printf("%q\n", Closest("interleave", types))
	// Output:
	// shuffle
	// files
	// ""
}
