package tensor

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// hugePage is the size of an x86-64 / arm64 transparent huge page.
const hugePage = 2 << 20

// hugeAdvice is whether AdviseHuge asks for huge pages: 0 until
// ProbeHugePages has measured (ask, as before the probe existed), then
// 1 (ask) or 2 (do not).
var hugeAdvice atomic.Int32

// AdviseHuge asks the kernel to back the 2 MiB blocks holding a fresh
// buffer b with transparent huge pages, unless ProbeHugePages has run and
// did not find them the cheaper (or found 4 KiB pages cheap enough not to
// try them). Tensor buffers are hundreds of
// kilobytes to tens of megabytes, first touched page by page; in some
// virtual machines each 4 KiB page fault costs 10–20 µs, which for a fresh
// 19 MiB batch is more than the copy that fills it. With THP in "madvise"
// mode (the common default) the Go runtime does not ask for huge pages
// itself, and it maps the heap in 4 MiB chunks, so the whole aligned block
// around b is mapped. A block whose pages are already touched stays as it
// is. Errors are ignored: the hint is an optimisation only.
func AdviseHuge(b []byte) {
	if len(b) == 0 || hugeAdvice.Load() == 2 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	beg := p &^ (hugePage - 1)
	end := (p + uintptr(len(b)) + hugePage - 1) &^ (hugePage - 1)
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, beg, end-beg, syscall.MADV_HUGEPAGE)
}

var probe struct {
	sync.Once
	huge, small time.Duration
	ok          bool
}

// ProbeHugePages measures, once per process, what a first write costs on
// fresh 4 KiB pages, and, if that is dear, on a transparent huge page; it
// makes AdviseHuge ask for huge pages only if they were measured and found
// the cheaper. Both costs are per MiB. The answer depends on the machine
// and on the moment, not on the code. On one host of this project's
// 2-vCPU kind 4 KiB faults cost 2.5 ms per MiB and huge pages 1.1–1.7. On
// another, a Firecracker guest with free page reporting, the kernel hands
// free 2 MiB blocks back to the host, so a huge page is most often one the
// host must fault in again, 2.4–2.7 ms/MiB, against 0.4 for 4 KiB pages
// taken from memory the guest still holds. Only just after another
// process freed its huge pages are they cheap there (0.15 ms/MiB for the
// first, and then again 5 ms/MiB for W1's 19 MiB batch buffer, faulted in
// while both decoders waited): so one cheap huge page says little, and
// where 4 KiB pages cost under cheapSmall huge pages cannot save much and
// are not tried. The probe costs 1–5 ms, on a goroutine of its own while
// the run starts, and writes 512 KiB of fresh memory, 2.5 MiB where it
// tries a huge page.
func ProbeHugePages() (huge, small time.Duration, ok bool) {
	probe.Do(func() {
		probe.huge, probe.small, probe.ok = probePages()
		switch {
		case !probe.ok:
		case probe.huge > 0 && probe.huge < probe.small:
			hugeAdvice.Store(1)
		default:
			hugeAdvice.Store(2)
		}
	})
	return probe.huge, probe.small, probe.ok
}

// cheapSmall is the first-write cost per MiB of 4 KiB pages under which
// huge pages are not tried. They could save at most that
// (36 ms of CPU over W1's 24 MiB of fresh buffers), and in the Firecracker
// guest, where 4 KiB pages cost 0.4–1.1 ms/MiB by this probe, one that
// looked cheap cost 5 ms/MiB a moment later.
const cheapSmall = 1500 * time.Microsecond

// probePages times the first write to every 4 KiB page of a fresh 512 KiB
// advised MADV_NOHUGEPAGE, and, if that cost cheapSmall a MiB or more, to
// an aligned 2 MiB block advised MADV_HUGEPAGE (huge is 0 if not); both
// are returned per MiB. Every page the probe writes is fresh memory the
// run does not use, which costs what the probe measures (at W1's start,
// first writes took 13 % of the CPU), so it writes no more 4 KiB pages
// than it needs: 128 faults are enough to tell the hosts apart (0.4 ms/MiB
// on some, 2.5 on others).
func probePages() (huge, small time.Duration, ok bool) {
	if syscall.Getpagesize() != 4096 {
		return 0, 0, false // 16 or 64 KiB pages: other sizes, another trade
	}
	const smallBytes = 512 << 10
	m, err := syscall.Mmap(-1, 0, 2*hugePage+smallBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, 0, false
	}
	defer func() { _ = syscall.Munmap(m) }()
	off := int((hugePage - uintptr(unsafe.Pointer(&m[0]))%hugePage) % hugePage)
	h, s := m[off:off+hugePage], m[off+hugePage:off+hugePage+smallBytes]
	if syscall.Madvise(s, syscall.MADV_NOHUGEPAGE) != nil {
		return 0, 0, false
	}
	// The probe runs while the run's first stages start, on as many
	// threads as cores or more: a wall clock would count the time it was
	// preempted. So it counts this thread's CPU time, in which the kernel's
	// fault handling (and the host's, in a guest) is included.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	touch := func(b []byte) (time.Duration, bool) { // per MiB
		t0, ok0 := threadCPU()
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		t1, ok1 := threadCPU()
		return (t1 - t0) * (1 << 20) / time.Duration(len(b)), ok0 && ok1 && t1 > t0
	}
	if small, ok = touch(s); !ok {
		return 0, 0, false
	}
	if small < cheapSmall || syscall.Madvise(h, syscall.MADV_HUGEPAGE) != nil {
		return 0, small, true
	}
	if huge, ok = touch(h); !ok {
		return 0, 0, false
	}
	return huge, small, true
}

// threadCPU returns the CPU time the calling thread has used; ok is false
// if the clock cannot be read (a seccomp filter).
func threadCPU() (d time.Duration, ok bool) {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
