//go:build cgo && linux

package gpu

/*
#cgo CFLAGS: -D_GNU_SOURCE
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

// NVML's signatures, with its opaque device handle as a void pointer and
// its return codes as an int (nvmlReturn_t is an enum).
typedef int (*handle_by_index_fn)(unsigned int index, void **device);
typedef int (*running_processes_fn)(void *device, unsigned int *count, void *infos);

// find looks name up in the process's global scope, where go-nvml's
// dlopen (RTLD_GLOBAL) put the driver's library.
static void *find(const char *name) { return dlsym(RTLD_DEFAULT, name); }

// count_processes asks for the device's compute processes with a count of
// 0 and no buffer: NVML then only counts them, so a driver whose entries
// are larger than the header's has nowhere to write them.
static int count_processes(void *by_index, void *processes, unsigned int index, unsigned int *count) {
	void *device = NULL;
	int ret = ((handle_by_index_fn)by_index)(index, &device);
	if (ret != 0) {
		return ret;
	}
	*count = 0;
	return ((running_processes_fn)processes)(device, count, NULL);
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// processCounter counts a device's compute processes through NVML's
// count-only call. go-nvml's GetComputeRunningProcesses passes a buffer of
// 24-byte entries (nvmlProcessInfo_t), starting with room for one, to
// nvmlDeviceGetComputeRunningProcesses_v3; drivers 535.43 to 535.86 and
// 535.104 write 32-byte entries there (go-nvml issue #75), 8 bytes past
// the buffer per process, on every reading. The count is all a Reading
// needs.
type processCounter struct {
	byIndex, processes unsafe.Pointer
}

// findProcessCounter looks up the driver's functions; the library must be
// loaded (nvml Init), and stay so while the counter is used.
func findProcessCounter() (*processCounter, error) {
	var c processCounter
	for _, f := range []struct {
		to    *unsafe.Pointer
		names []string
	}{
		{&c.byIndex, []string{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}},
		{&c.processes, []string{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses"}},
	} {
		for _, name := range f.names {
			cname := C.CString(name)
			*f.to = C.find(cname)
			C.free(unsafe.Pointer(cname))
			if *f.to != nil {
				break
			}
		}
		if *f.to == nil {
			return nil, fmt.Errorf("nvml has no %s", f.names[0])
		}
	}
	return &c, nil
}

// count returns how many compute processes use the device of that index.
func (c *processCounter) count(index int) (int, nvml.Return) {
	var n C.uint
	ret := nvml.Return(C.count_processes(c.byIndex, c.processes, C.uint(index), &n))
	// ERROR_INSUFFICIENT_SIZE is the answer with processes running: n is
	// the room they would need.
	if ret == nvml.SUCCESS || ret == nvml.ERROR_INSUFFICIENT_SIZE {
		return int(n), nvml.SUCCESS
	}
	return 0, ret
}
