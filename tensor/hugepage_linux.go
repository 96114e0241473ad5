package tensor

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of an x86-64 / arm64 transparent huge page.
const hugePage = 2 << 20

// AdviseHuge asks the kernel to back the 2 MiB blocks holding a fresh
// buffer b with transparent huge pages. Tensor buffers are hundreds of
// kilobytes to tens of megabytes, first touched page by page; in a virtual
// machine each 4 KiB page fault can cost 10–20 µs, which for a fresh
// 19 MiB batch is more than the copy that fills it. With THP in "madvise"
// mode (the common default) the Go runtime does not ask for huge pages
// itself, and it maps the heap in 4 MiB chunks, so the whole aligned block
// around b is mapped. A block whose pages are already touched stays as it
// is. Errors are ignored: the hint is an optimisation only.
func AdviseHuge(b []byte) {
	if len(b) == 0 {
		return
	}
	p := uintptr(unsafe.Pointer(&b[0]))
	beg := p &^ (hugePage - 1)
	end := (p + uintptr(len(b)) + hugePage - 1) &^ (hugePage - 1)
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, beg, end-beg, syscall.MADV_HUGEPAGE)
}
