package expression

import (
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of the file at path in the page cache.
func resident(t *testing.T, path string) (in, all int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Munmap(m) }()
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	for _, v := range vec {
		in += int(v & 1)
	}
	return in, len(vec)
}

// TestPrefetchFile: a photo-sized file dropped from the page cache is back
// in it after PrefetchFile, without anything reading it (the kernel reads
// at least 128 KiB ahead); a missing file and a FIFO are left alone.
func TestPrefetchFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "photo.jpg")
	if err := os.WriteFile(path, make([]byte, 110<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	f.Close()
	if in, _ := resident(t, path); in > 0 {
		t.Skipf("%s: the kernel kept %d pages after POSIX_FADV_DONTNEED (tmpfs?): nothing to prefetch here", path, in)
	}
	PrefetchFile(path)
	deadline := time.Now().Add(5 * time.Second)
	for {
		in, all := resident(t, path)
		if in == all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pages in the page cache 5 s after PrefetchFile", in, all)
		}
		time.Sleep(time.Millisecond)
	}
	PrefetchFile(filepath.Join(dir, "missing.jpg"))
	// A FIFO with no writer: opening it for reading would block without
	// O_NONBLOCK, and is not tried at all.
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { PrefetchFile(fifo); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("PrefetchFile of a FIFO with no writer did not return in 5 s")
	}
}

// BenchmarkPrefetchFile is what PrefetchFile costs a file already in the
// page cache (the warm case, where it buys nothing): W1's photo is 110 KB.
func BenchmarkPrefetchFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "photo.jpg")
	if err := os.WriteFile(path, make([]byte, 110<<10), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		PrefetchFile(path)
	}
}
