//go:build unix

package stages

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// mayReplace reports why this process may not rename a file over path
// though it can write its folder: in a sticky folder (as /tmp is) only
// the file's owner, the folder's, or root may. Found committing a set of
// shards in a shared folder: the rename of one failed after others had
// replaced theirs.
func mayReplace(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return nil // a new file, or one the rename will say more of
	}
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil || dir.Mode()&os.ModeSticky == 0 {
		return nil
	}
	fs, ok1 := st.Sys().(*syscall.Stat_t)
	ds, ok2 := dir.Sys().(*syscall.Stat_t)
	euid := os.Geteuid()
	if !ok1 || !ok2 || euid == 0 || int(fs.Uid) == euid || int(ds.Uid) == euid {
		return nil
	}
	return fmt.Errorf("%s belongs to user %d, and in a sticky folder (as /tmp is) only its owner or the folder's may replace it: this run is user %d; remove it, or write elsewhere", path, fs.Uid, euid)
}
