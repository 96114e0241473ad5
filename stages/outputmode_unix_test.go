//go:build unix

package stages

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOutputsTakeTheModeAShellWouldGive: an output replacing a file keeps
// that file's mode, and a new one gets 0666 less the umask, as `>` does.
// Every output was 0644: a file kept 0660 became readable by everyone,
// and a umask of 077 was ignored.
func TestOutputsTakeTheModeAShellWouldGive(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.jsonl")
	mustOK(t, os.WriteFile(kept, []byte("old\n"), 0o600))
	mustOK(t, os.Chmod(kept, 0o660))
	old := umask
	t.Cleanup(func() { umask = old })
	for _, tc := range []struct {
		name  string
		umask uint32
		want  os.FileMode
	}{
		{"kept.jsonl", 0o077, 0o660},
		{"new022.jsonl", 0o022, 0o644},
		{"new077.jsonl", 0o077, 0o600},
		{"new002.jsonl", 0o002, 0o664},
	} {
		umask = tc.umask
		p := filepath.Join(dir, tc.name)
		f, err := createAtomic(p)
		mustOK(t, err)
		_, err = f.Write([]byte("new\n"))
		mustOK(t, err)
		mustOK(t, f.commit())
		st, err := os.Stat(p)
		mustOK(t, err)
		if got := st.Mode().Perm(); got != tc.want {
			t.Errorf("%s with umask %03o: mode %04o, want %04o", tc.name, tc.umask, got, tc.want)
		}
	}
}
