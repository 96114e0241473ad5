package stages

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// atomicFile is written beside its final path under a hidden temporary
// name and renamed into place only on commit, so readers never see a
// partial output, whatever happens to the run.
type atomicFile struct {
	final string
	tmp   *os.File
	w     *bufio.Writer
	// prepared says the file is written, synced and closed, waiting only
	// for its rename.
	prepared bool
}

func createAtomic(path string) (*atomicFile, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create output: %w", err)
	}
	return &atomicFile{final: path, tmp: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (a *atomicFile) Write(p []byte) (int, error) { return a.w.Write(p) }

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
		err = a.tmp.Chmod(0o644)
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
	a.tmp = nil
	return err
}

// replaceable reports why a file could not be renamed onto path: a
// directory there (rename's "file exists" would not say so).
func replaceable(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	return nil
}

// abort removes the temporary file.
func (a *atomicFile) abort() error {
	if a.tmp == nil {
		return nil
	}
	var err error
	if !a.prepared {
		err = a.tmp.Close()
	}
	err = errors.Join(err, os.Remove(a.tmp.Name()))
	a.tmp = nil
	return err
}

// checkWritable reports whether files can be created in path's directory,
// creating nothing but a probe that it removes.
func checkWritable(path string) error { return checkDirFor(path, "output directory") }

// checkDirFor is checkWritable naming the directory as what (a socket's
// directory is not an output directory).
func checkDirFor(path, what string) error {
	if err := replaceable(path); err != nil {
		return err
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
				if d != dir {
					return fmt.Errorf("%s %s cannot be made in %s: %w", what, dir, d, err)
				}
				return fmt.Errorf("%s %s is not writable: %w", what, d, err)
			}
			f.Close()
			os.Remove(f.Name())
			return nil
		}
		if !os.IsNotExist(err) || filepath.Dir(d) == d {
			return fmt.Errorf("%s %s: %w", what, dir, err)
		}
	}
}
