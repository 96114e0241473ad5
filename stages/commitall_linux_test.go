package stages

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommitAllCopiesWhatItCannotLink: where no hard link can be made to
// a file a set replaces (another user's, under fs.protected_hardlinks),
// it is copied aside before any rename, so a rename that then fails still
// puts the whole set back. A re-test found two of four shards replaced
// and their old contents gone: the link was tried shard by shard, as
// each was renamed, and failed unseen until the rollback needed it.
func TestCommitAllCopiesWhatItCannotLink(t *testing.T) {
	if b, _ := os.ReadFile("/proc/sys/fs/protected_hardlinks"); strings.TrimSpace(string(b)) != "1" {
		t.Skip("fs.protected_hardlinks is off: links to another user's files are made")
	}
	dir := filepath.Join(openTempDir(t), "out")
	mustOK(t, os.Mkdir(dir, 0o777))
	mustOK(t, os.Chmod(dir, 0o777)) // not sticky: renaming over root's files is allowed
	paths := make([]string, 4)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("s-%05d", i))
		mustOK(t, os.WriteFile(paths[i], []byte(fmt.Sprintf("old %d", i)), 0o644))
	}
	if b, err := exec.Command("chattr", "+i", paths[2]).CombinedOutput(); err != nil {
		t.Skipf("cannot make a file immutable here (chattr +i): %v: %s", err, b)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", paths[2]).Run() })
	var err error
	if !asUser(t, 65534, func() {
		files := make([]*atomicFile, len(paths))
		for i, p := range paths {
			f, cerr := createAtomic(p)
			if cerr != nil {
				err = cerr
				return
			}
			fmt.Fprintf(f, "new %d", i)
			files[i] = f
		}
		err = commitAll(files)
		for _, f := range files {
			f.abort()
		}
	}) {
		t.Skip("cannot act as user 65534 here")
	}
	if err == nil || !strings.Contains(err.Error(), "no output was replaced") {
		t.Errorf("commit: %v; want the rename of s-00002 refused and the set undone", err)
	}
	for i, p := range paths {
		if b, rerr := os.ReadFile(p); rerr != nil || string(b) != fmt.Sprintf("old %d", i) {
			t.Errorf("%s holds %q (%v), want the earlier run's", p, b, rerr)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("left %v", left)
	}
}
