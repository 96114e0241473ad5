package bytesize

import "testing"

// TestFormat: sizes in the largest binary unit that keeps them short, to
// two decimals, as specs, plans and errors print them.
func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 1048580: "1MiB",
		3 << 30: "3GiB", 1<<40 + 1<<39: "1.5TiB", 1 << 50: "1024TiB",
	} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{1048580: "1.01MiB", 1 << 20: "1MiB", 1023: "1023B", 1025: "1.01KiB"} {
		if got := FormatAtLeast(n); got != want {
			t.Errorf("FormatAtLeast(%d) = %q, want %q", n, got, want)
		}
	}
}
