package stages

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStickyFolderRefusesAnotherUsersFile: in a sticky folder (as /tmp
// is) only a file's owner, or the folder's, may rename over it, so an
// output there that belongs to another user is refused by validate's
// check and by the commit's preparation, before any shard of a set is
// renamed; one of this user's own, or a new one, is fine.
func TestStickyFolderRefusesAnotherUsersFile(t *testing.T) {
	dir := filepath.Join(openTempDir(t), "shared")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	theirs, mine, fresh := filepath.Join(dir, "theirs.jsonl"), filepath.Join(dir, "mine.jsonl"), filepath.Join(dir, "new.jsonl")
	for _, p := range []string{theirs, mine} {
		if err := os.WriteFile(p, []byte("{}\n"), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(mine, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var errTheirs, errTheirsPrep, errMine, errFresh error
	if !asUser(t, 65534, func() {
		errTheirs = checkWritable(theirs)
		errTheirsPrep = replaceable(theirs)
		errMine = checkWritable(mine)
		errFresh = checkWritable(fresh)
	}) {
		t.Skip("cannot act as user 65534 here")
	}
	want := theirs + " belongs to user 0, and in a sticky folder (as /tmp is) only its owner or the folder's may replace it: this run is user 65534; remove it, or write elsewhere"
	for _, err := range []error{errTheirs, errTheirsPrep} {
		if err == nil || err.Error() != want {
			t.Errorf("another user's file: %v\nwant %s", err, want)
		}
	}
	if errMine != nil || errFresh != nil {
		t.Errorf("this user's file: %v; a new one: %v; want both fine", errMine, errFresh)
	}
}
