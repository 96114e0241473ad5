package stages

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/piperun/piperun/spec"
)

// atomicFile is written beside its final path under a hidden temporary
// name and renamed into place only on commit, so readers never see a
// partial output, whatever happens to the run.
type atomicFile struct {
	final string
	tmp   *os.File
	w     *bufio.Writer
	// prepared says the file is written, synced and closed, waiting only
	// for its rename; committed, that it was renamed.
	prepared, committed bool
	// made are the directories created for it, deepest first: an abort
	// removes those left empty, so a failed run leaves no trace.
	made []string
	// lock holds the temporary file's flock until it is renamed or
	// removed (lockTemp).
	lock *os.File
}

// unlock drops the temporary file's flock.
func (a *atomicFile) unlock() {
	if a.lock != nil {
		a.lock.Close()
		a.lock = nil
	}
}

func createAtomic(path string) (*atomicFile, error) {
	return createAtomicSwept(path, tempSweeper{})
}

// createAtomicSwept is createAtomic with the folder listings of sweep,
// which a sink writing many files shares among them.
func createAtomicSwept(path string, sweep tempSweeper) (*atomicFile, error) {
	path, err := OutputPath(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	var made []string
	for d := dir; filepath.Dir(d) != d; d = filepath.Dir(d) {
		_, err := os.Lstat(d)
		if _, ours := madeDirs.Load(d); err == nil && !ours || err != nil && !os.IsNotExist(err) {
			break
		}
		// Made now, or by another file of this process (two sinks into
		// one new directory): whichever aborts last removes it.
		madeDirs.Store(d, true)
		made = append(made, d)
	}
	if err := MkdirAll(dir); err != nil {
		removeEmpty(made) // those it made before it failed
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	sweep.removeStale(path)
	f, err := os.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%d-*", filepath.Base(path), os.Getpid()))
	// Another run that made the same new folder and failed removes it
	// once empty, as this one would: between the two calls above. Made
	// again, it holds this file, which keeps it (a test of concurrent
	// runs: 2 of 80 pairs lost the healthy run).
	for try := 0; errors.Is(err, os.ErrNotExist) && try < 3; try++ {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%d-*", filepath.Base(path), os.Getpid()))
		}
	}
	if err != nil {
		removeEmpty(made)
		return nil, fmt.Errorf("create output: %w", err)
	}
	return &atomicFile{final: path, tmp: f, w: bufio.NewWriterSize(f, 1<<20), made: made, lock: lockTemp(f.Name())}, nil
}

// madeDirs are the output directories this process made, by path.
var madeDirs sync.Map

// removeEmpty removes the directories in dirs, deepest first, that are
// empty; one that holds anything (another sink's file) stays.
func removeEmpty(dirs []string) {
	for _, d := range dirs {
		if os.Remove(d) == nil { // fails on a directory that is not empty
			madeDirs.Delete(d)
		}
	}
}

// forget drops dirs from madeDirs: they hold a committed output now, and
// a later run of this process that finds them there did not make them.
func forget(dirs []string) {
	for _, d := range dirs {
		madeDirs.Delete(d)
	}
}

func (a *atomicFile) Write(p []byte) (int, error) { return a.w.Write(p) }

// tempSweeper holds the listings of the folders removeStale looked in,
// so that a sink's many files (shards) list their folder once: 4000 shards
// listed it 4000 times, 12 s before the run began.
type tempSweeper map[string][]os.DirEntry

// readDir lists a folder for tempSweeper; a test counts the calls.
var readDir = os.ReadDir

// removeStale removes the temporary files of earlier runs writing path
// that were killed (kill -9, the OOM killer) before they could: their
// names carry the writer's process ID, and no process has it now. A run
// writing the same path at this moment keeps its file. (Names from before
// the ID was in them parse as IDs beyond any process's, and go too.) A
// folder's listing is taken once: files made after it are this process's
// or a live one's, which stay anyway.
func (sw tempSweeper) removeStale(path string) {
	prefix := "." + filepath.Base(path) + ".tmp-"
	dir := filepath.Dir(path)
	ents, ok := sw[dir]
	if !ok {
		ents, _ = readDir(dir)
		sw[dir] = ents
	}
	for _, e := range ents {
		full := filepath.Join(dir, e.Name())
		if pid := writerOf(e, prefix); pid > 0 && pid != os.Getpid() && !tempHeld(full, pid) {
			os.Remove(full)
		}
	}
}

// writerOf is the process ID in the name of a temporary file that prefix
// (".NAME.tmp-") begins, or 0 for another file.
func writerOf(e os.DirEntry, prefix string) int {
	rest, ok := strings.CutPrefix(e.Name(), prefix)
	if !ok || !e.Type().IsRegular() {
		return 0
	}
	pidText, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// otherWriter returns another live process writing one of paths and its
// temporary file there, or 0: two runs writing one set of shards at once
// each renamed its files into place, and the set held some of each,
// samples duplicated and lost, both runs exiting 0 (a test of concurrent
// runs, 2 pairs of 25). sw's listings are taken fresh.
func (sw tempSweeper) otherWriter(paths []string) (pid int, path, tmp string) {
	for _, p := range paths {
		dir := filepath.Dir(p)
		ents, ok := sw[dir]
		if !ok {
			ents, _ = readDir(dir)
			sw[dir] = ents
		}
		prefix := "." + filepath.Base(p) + ".tmp-"
		for _, e := range ents {
			full := filepath.Join(dir, e.Name())
			if pid := writerOf(e, prefix); pid > 0 && pid != os.Getpid() && tempHeld(full, pid) {
				return pid, p, full
			}
		}
	}
	return 0, "", ""
}

// prepare does all that commit can fail at but the rename: it flushes,
// syncs and closes the file, and checks that the final name can take it.
// After a failure the temporary file is gone.
func (a *atomicFile) prepare() error {
	if a.tmp == nil || a.prepared {
		return nil
	}
	err := a.w.Flush()
	if err == nil {
		// CreateTemp makes 0600 files; outputs are ordinary data files.
		err = a.tmp.Chmod(OutputMode(a.final))
	}
	if err == nil {
		err = a.tmp.Sync()
	}
	if cerr := a.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = replaceable(a.final)
	}
	if err != nil {
		os.Remove(a.tmp.Name())
		a.tmp = nil
		return err
	}
	a.prepared = true
	return nil
}

// commit renames the prepared file into place (preparing it first if need be).
func (a *atomicFile) commit() error {
	if err := a.prepare(); err != nil || a.tmp == nil {
		return err
	}
	err := os.Rename(a.tmp.Name(), a.final)
	if err != nil {
		os.Remove(a.tmp.Name())
	}
	a.unlock()
	a.tmp = nil
	if a.committed = err == nil; a.committed {
		forget(a.made)
	}
	return err
}

// commitAll renames files into place in order, all or none: where one
// fails to commit (an immutable file, a file of another user in a sticky
// folder), the files renamed before it are put back as they were, from
// what was kept aside of them before the first rename (a hard link, or a
// copy where none can be made), or removed where there were none. So a
// set of shards stays whole, the earlier run's or this one's; only a kill
// in the milliseconds between renames can leave it mixed.
func commitAll(files []*atomicFile) error {
	kept := make([]replaced, len(files))
	// Everything is kept aside first: tried as each file was renamed, a
	// link refused (another user's file under protected_hardlinks) went
	// unseen until a rollback needed it (a re-test: two of four shards
	// replaced for good).
	defer func() {
		for _, r := range kept {
			r.drop()
		}
	}()
	for i, f := range files {
		if err := f.prepare(); err != nil {
			return err
		}
		kept[i].f = f
		if f.tmp == nil || len(files) == 1 {
			continue
		}
		if st, err := os.Lstat(f.final); err == nil && st.Mode().IsRegular() {
			var err error
			if kept[i].old, kept[i].lock, err = keepAside(f.final); err != nil {
				if kept[i].old, kept[i].lock, err = copyAside(f.final, st.Mode()); err != nil {
					return fmt.Errorf("commit: keep %s aside, to put it back should a later rename fail: %w", f.final, err)
				}
			}
		}
	}
	for i, f := range files {
		if f.tmp == nil {
			continue
		}
		if err := f.commit(); err != nil {
			return undoAll(kept[:i], err)
		}
		kept[i].renamed = true
	}
	return nil
}

// copyAside is keepAside for a file no hard link can be made to: a copy,
// of the same mode.
func copyAside(path string, mode os.FileMode) (string, *os.File, error) {
	dir, base := filepath.Split(path)
	in, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer in.Close()
	out, err := os.CreateTemp(dir, fmt.Sprintf(".%s.tmp-%d-*", base, os.Getpid()))
	if err != nil {
		return "", nil, err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(mode.Perm())
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return "", nil, err
	}
	return out.Name(), lockTemp(out.Name()), nil
}

// keepAside makes a hard link to the file at path, named as a temporary
// file of this process is (.NAME.tmp-PID-N) and locked as one, for
// commitAll to put back: a files stage passes over one that a killed
// commit leaves (named otherwise, a review read it as an extra shard),
// the next run writing path removes it, and no run removes it while this
// one lives (the lock), as rollback may need it.
func keepAside(path string) (string, *os.File, error) {
	dir, base := filepath.Split(path)
	for try := 0; ; try++ {
		old := filepath.Join(dir, fmt.Sprintf(".%s.tmp-%d-%d", base, os.Getpid(), rand.Uint32()))
		err := os.Link(path, old)
		if err == nil {
			return old, lockTemp(old), nil
		}
		if !errors.Is(err, os.ErrExist) || try == 100 {
			return "", nil, err
		}
	}
}

// replaced is a file commitAll renamed into place, and how to undo that.
type replaced struct {
	f *atomicFile
	// old is what was kept aside of the file it replaces (keepAside or
	// copyAside), held by lock, or "" where there was none.
	old  string
	lock *os.File
	// renamed says commitAll renamed f into place.
	renamed bool
}

// drop removes what was kept aside of the replaced file, which is no
// longer needed.
func (r *replaced) drop() {
	if r.old != "" {
		os.Remove(r.old)
		r.old = ""
	}
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
}

// undo puts back the file r's rename replaced, or removes the new one
// where there was none before it.
func (r *replaced) undo() error {
	if r.old == "" {
		return os.Remove(r.f.final)
	}
	if err := os.Rename(r.old, r.f.final); err != nil {
		return fmt.Errorf("%w (what it replaced is kept as %s)", err, r.old)
	}
	return nil
}

// undoAll puts back the files done replaced, last first, after err.
func undoAll(done []replaced, err error) error {
	if len(done) == 0 {
		return err
	}
	var failed []error
	n := 0
	for i := len(done) - 1; i >= 0; i-- {
		r := &done[i]
		if !r.renamed {
			continue
		}
		n++
		if uerr := r.undo(); uerr != nil {
			// What was kept aside stays, holding what was replaced, for
			// whoever reads the error.
			r.old = ""
			failed = append(failed, uerr)
			continue
		}
		r.old = "" // renamed back, or there was none
		r.renamed, r.f.committed = false, false
	}
	switch {
	case n == 0:
		return err
	case len(failed) == 0:
		what := fmt.Sprintf("the %d files renamed before it were", n)
		if n == 1 {
			what = "the file renamed before it was"
		}
		return fmt.Errorf("%w (no output was replaced: %s undone)", err, what)
	}
	return fmt.Errorf("%w; %d of the %d files renamed before it could not be put back, and hold this run's data: %w",
		err, len(failed), n, errors.Join(failed...))
}

// replaceable reports why an output could not be renamed onto path.
func replaceable(path string) error {
	p, err := OutputPath(path)
	if err != nil {
		return err
	}
	return mayReplace(p)
}

// maxSymlinks bounds the links OutputPath follows, as the kernel's ELOOP.
const maxSymlinks = 40

// OutputPath returns the file an output at path is renamed onto: path
// itself, or the file a symbolic link there points to, so that the link's
// target is written and the link kept, as `cp` and a shell's `>` do. It
// refuses a path that holds anything but a regular file: renaming over a
// directory fails, and over a named pipe, a socket or a device (/dev/null)
// it would replace the node with a plain file, for every other user of it.
func OutputPath(path string) (string, error) {
	p := path
	for hops := 0; ; hops++ {
		st, err := os.Lstat(p)
		if err != nil {
			// Absent, or unreadable: creating the file says what is wrong.
			return p, nil
		}
		m := st.Mode()
		what := p
		if p != path {
			what = fmt.Sprintf("%s (the target of %s)", p, path)
		}
		switch {
		case isFD(p):
			// /dev/stdout leads through /proc/self/fd/1 to whatever the
			// shell opened: a log appended to (>> run.log) was replaced by
			// the sink's lines, its earlier contents lost.
			return "", fmt.Errorf("%s is one of this process's open files (its standard output, say), not a file to write whole: write to a file", what)
		case m&os.ModeSymlink != 0:
			if hops == maxSymlinks {
				return "", fmt.Errorf("%s: too many levels of symbolic links", path)
			}
			t, err := os.Readlink(p)
			if err != nil {
				return "", fmt.Errorf("read link %s: %w", p, err)
			}
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(p), t)
			}
			p = t
		case m.IsDir():
			return "", fmt.Errorf("%s is a directory", what)
		case !m.IsRegular():
			return "", fmt.Errorf("%s is %s, not a regular file: an output is written aside and renamed onto its path, which would replace it; write to a file", what, nodeKind(m))
		default:
			return p, nil
		}
	}
}

// maxName is the longest file name most file systems take (ext4, XFS,
// APFS, NTFS: 255 bytes).
const maxName = 255

// FileName refuses an output path that names a folder ("out/", "out/.")
// or whose name, with the temporary file's beside it, is longer than a
// file system takes: both passed validate, and the run wrote a file named
// after the folder, or failed at its first sample.
func FileName(p string) error {
	s := filepath.ToSlash(p)
	if strings.HasSuffix(s, "/") || strings.HasSuffix(s, "/.") || strings.HasSuffix(s, "/..") || s == "." || s == ".." {
		return fmt.Errorf("path %q names a folder, not a file", p)
	}
	// ".NAME.tmp-PID-RANDOM": a pid of up to 7 digits, 10 random ones.
	if base, extra := filepath.Base(p), len("..tmp--")+7+10; len(base)+extra > maxName {
		return fmt.Errorf("file name %q is %d bytes, more than the %d the run can use (the file is written aside, as .NAME.tmp-PID-N, within %d)", base, len(base), maxName-extra, maxName)
	}
	return nil
}

// OutputMode is the mode an output written aside and renamed onto path
// takes, as a shell's > gives it: the mode of the file it replaces, or
// 0666 less the process's umask. Always 0644, it made a file kept 0660
// readable by everyone, and ignored a umask of 077.
func OutputMode(path string) os.FileMode {
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return st.Mode().Perm()
	}
	return os.FileMode(0o666 &^ umask)
}

// isFD reports whether p names one of the process's file descriptors
// (/dev/stdout, /dev/fd/N, /proc/self/fd/N).
func isFD(p string) bool {
	switch filepath.Clean(p) {
	case "/dev/stdin", "/dev/stdout", "/dev/stderr":
		return true
	}
	for _, d := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/", fmt.Sprintf("/proc/%d/fd/", os.Getpid())} {
		if strings.HasPrefix(filepath.Clean(p), d) {
			return true
		}
	}
	return false
}

// nodeKind names a file mode that is not a regular file's.
func nodeKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file"
}

// abort removes the temporary file, and the directories made for it
// that it leaves empty.
func (a *atomicFile) abort() error {
	if a.committed {
		return nil
	}
	var err error
	if a.tmp != nil {
		if !a.prepared {
			err = a.tmp.Close()
		}
		err = errors.Join(err, os.Remove(a.tmp.Name()))
		a.tmp = nil
	}
	a.unlock()
	removeEmpty(a.made)
	a.made = nil
	return err
}

// MkdirAll is os.MkdirAll for an output's folder, saying why where a link
// on the way leads nowhere: os.MkdirAll says only "file exists" there.
func MkdirAll(dir string) error {
	err := os.MkdirAll(dir, 0o755)
	if err != nil {
		if link, why, ok := danglingLink(dir); ok {
			return fmt.Errorf("%s %s", link, why)
		}
	}
	return err
}

// danglingLink finds, in dir or a folder above it, a symbolic link that
// leads nowhere, and says why: the end of its chain does not exist, or
// the chain loops.
func danglingLink(dir string) (link, why string, ok bool) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if st, err := os.Lstat(d); err == nil && st.Mode()&os.ModeSymlink != 0 {
			if w := linkNowhere(d); w != "" {
				return d, w, true
			}
		}
		if filepath.Dir(d) == d {
			return "", "", false
		}
	}
}

// linkNowhere says why the link at p leads nowhere ("is a link to x,
// which does not exist"), naming the end of a chain of links, or is ""
// where it leads somewhere.
func linkNowhere(p string) string {
	_, err := os.Stat(p)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return "is a loop of symbolic links"
	case !os.IsNotExist(err):
		return ""
	}
	first, _ := os.Readlink(p)
	end := spec.FollowLinks(p)
	if shown := filepath.Join(filepath.Dir(p), first); shown != end && filepath.Clean(first) != end {
		return fmt.Sprintf("is a link to %s, which leads to %s, which does not exist", first, end)
	}
	return fmt.Sprintf("is a link to %s, which does not exist", first)
}

// checkWritable reports whether files can be created in path's directory,
// creating nothing but a probe that it removes.
func checkWritable(path string) error {
	path, err := OutputPath(path)
	if err != nil {
		return err
	}
	if err := checkDirFor(path, "output directory"); err != nil {
		return err
	}
	return mayReplace(path)
}

// checkDirFor reports whether files can be created in path's directory,
// naming the directory as what (a socket's directory is not an output
// directory), and that path is no directory.
func checkDirFor(path, what string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	dir := filepath.Dir(path)
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a directory", d)
			}
			f, err := os.CreateTemp(d, ".piperun-probe-*")
			if err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err // the probe's random name means nothing to the user
				}
				if errors.Is(err, syscall.ENOENT) {
					// An existing directory that says "no such file" to a
					// new one is a pseudo file system such as /proc.
					err = errors.New("it takes no new files")
				}
				if d != dir {
					return fmt.Errorf("%s %s cannot be made in %s: %w", what, dir, d, err)
				}
				return fmt.Errorf("%s %s is not writable: %w", what, d, err)
			}
			f.Close()
			os.Remove(f.Name())
			return nil
		}
		// Absent, or under a file (ENOTDIR): look further up, where the
		// loop names the file that is no directory. Not past a link that
		// leads nowhere: the folder cannot be made there.
		if st, lerr := os.Lstat(d); lerr == nil && st.Mode()&os.ModeSymlink != 0 {
			if w := linkNowhere(d); w != "" {
				return fmt.Errorf("%s %s cannot be made: %s %s", what, dir, d, w)
			}
		}
		if !os.IsNotExist(err) && !errors.Is(err, syscall.ENOTDIR) || filepath.Dir(d) == d {
			return fmt.Errorf("%s %s: %w", what, dir, err)
		}
	}
}
