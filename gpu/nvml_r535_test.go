//go:build cgo && linux

package gpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// fakeR535 is a libnvidia-ml.so.1 with four devices, as an R535 driver
// that overruns go-nvml's process buffer would answer: device 3 may not be
// opened (a cgroup's device limit), and devices 0, 1 and 2 run 0, 1 and 3
// compute processes.
const fakeR535 = `
#include <stdio.h>
#include <string.h>

enum { SUCCESS = 0, INVALID_ARGUMENT = 2, NO_PERMISSION = 4, INSUFFICIENT_SIZE = 7, UNKNOWN = 999 };

typedef struct { unsigned int index; } device;
typedef struct { unsigned long long total, free, used; } memory;
typedef struct { unsigned int gpu, memory; } utilization;
// R535's process entry: 32 bytes, where nvml.h's nvmlProcessInfo_t, and
// so go-nvml's buffer, has 24.
typedef struct { unsigned int pid; unsigned long long used_memory; unsigned int gpu_instance, compute_instance; unsigned long long extra; } process_r535;

static device devices[3] = {{0}, {1}, {2}};
static const unsigned int processes[3] = {0, 1, 3};

int nvmlInit_v2(void) { return SUCCESS; }
int nvmlShutdown(void) { return SUCCESS; }

const char *nvmlErrorString(int ret) {
	switch (ret) {
	case NO_PERMISSION: return "Insufficient Permissions";
	case UNKNOWN: return "Unknown Error";
	}
	return "fake error";
}

int nvmlDeviceGetCount_v2(unsigned int *count) { *count = 4; return SUCCESS; }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device **d) {
	if (index == 3) return NO_PERMISSION;
	if (index > 3) return INVALID_ARGUMENT;
	*d = &devices[index];
	return SUCCESS;
}

int nvmlDeviceGetName(device *d, char *name, unsigned int length) {
	snprintf(name, length, "Fake R535 GPU %u", d->index);
	return SUCCESS;
}

int nvmlDeviceGetUUID(device *d, char *uuid, unsigned int length) {
	snprintf(uuid, length, "GPU-fake-%u", d->index);
	return SUCCESS;
}

int nvmlDeviceGetMemoryInfo(device *d, memory *m) {
	m->total = 80ULL << 30;
	m->used = (d->index + 1ULL) << 30;
	m->free = m->total - m->used;
	return SUCCESS;
}

int nvmlDeviceGetUtilizationRates(device *d, utilization *u) {
	u->gpu = 10 * (d->index + 1);
	u->memory = 5;
	return SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v3(device *d, unsigned int *count, process_r535 *infos) {
	unsigned int n = processes[d->index];
	if (infos != NULL) {
		// R535 would write n process_r535 entries here, 8 bytes past
		// each 24-byte one the caller made room for. Refusing keeps the
		// test's heap whole and makes its counts wrong.
		fprintf(stderr, "fake nvml: given a buffer for %u processes\n", *count);
		return UNKNOWN;
	}
	if (*count < n) {
		*count = n;
		return INSUFFICIENT_SIZE;
	}
	*count = n;
	return SUCCESS;
}
`

// TestCountOnlyOnAnR535Driver opens a fake driver (fakeR535, built with
// gcc) through go-nvml as Open does, and reads it: names, UUIDs and memory
// of the three devices it opens, the fourth listed without them and read
// as the error NVML gave for it, and the compute processes (0, 1 and 3)
// counted without a buffer, which the fake refuses. It runs in a child
// process: go-nvml's calls stay bound to the first library that answered
// them for the process's life, so a real driver read after the fake's
// closed (TestOpenOnThisMachine on a GPU machine) would call into it.
func TestCountOnlyOnAnR535Driver(t *testing.T) {
	if lib := os.Getenv("PIPERUN_FAKE_NVML"); lib != "" {
		readFakeR535(t, lib)
		return
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the fake NVML library with")
	}
	dir := loadableDir(t)
	src := filepath.Join(dir, "fake_nvml.c")
	if err := os.WriteFile(src, []byte(fakeR535), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libnvidia-ml.so.1")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-Wall", "-Werror", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestCountOnlyOnAnR535Driver$", "-test.v")
	child.Env = append(os.Environ(), "PIPERUN_FAKE_NVML="+lib)
	out, err := child.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestCountOnlyOnAnR535Driver") {
		t.Fatalf("the child reading the fake driver: %v\n%s", err, out)
	}
}

// loadableDir is a directory for the fake library that dlopen can map:
// the test's own, unless it is on a noexec mount (as /tmp may be), then
// one under the module's git-ignored bench/out.
func loadableDir(t *testing.T) string {
	const noexec = 0x8 // ST_NOEXEC
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Flags&noexec == 0 {
		return dir
	}
	out := filepath.Join("..", "bench", "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(out, "fake-nvml-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func readFakeR535(t *testing.T, lib string) {
	src, err := openLibrary(nvml.New(nvml.WithLibraryPath(lib)))
	if err != nil {
		t.Fatal(err)
	}
	devices, err := src.Devices()
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, Name: "Fake R535 GPU 0", UUID: "GPU-fake-0", MemoryTotal: 80 << 30},
		{Index: 1, Name: "Fake R535 GPU 1", UUID: "GPU-fake-1", MemoryTotal: 80 << 30},
		{Index: 2, Name: "Fake R535 GPU 2", UUID: "GPU-fake-2", MemoryTotal: 80 << 30},
		{Index: 3},
	}
	if len(devices) != len(want) {
		t.Fatalf("devices %+v\nwant %+v", devices, want)
	}
	for i, tc := range []struct {
		reading Reading
		err     string
	}{
		{Reading{Utilization: 10, MemoryUsed: 1 << 30, Processes: 0}, ""},
		{Reading{Utilization: 20, MemoryUsed: 2 << 30, Processes: 1}, ""},
		{Reading{Utilization: 30, MemoryUsed: 3 << 30, Processes: 3}, ""},
		{Reading{}, "open device: Insufficient Permissions"},
	} {
		if devices[i] != want[i] {
			t.Errorf("device %d: %+v, want %+v", i, devices[i], want[i])
		}
		r, err := src.Read(i)
		if got := errString(err); r != tc.reading || got != tc.err {
			t.Errorf("gpu %d: %+v, error %q; want %+v, %q", i, r, got, tc.reading, tc.err)
		}
	}
	m, err := NewMonitor(src)
	if err != nil {
		t.Fatal(err)
	}
	m.Sample()
	const verdict = "starving: gpu 1 (Fake R535 GPU 1) under 50% busy in 1 of 1 readings while a process used it, 20% on average then and " +
		"gpu 2 (Fake R535 GPU 2) under 50% busy in 1 of 1 readings while a process used it, 30% on average then; " +
		"it waited for input, or its work is too small to keep it busy; could not read gpu 3: open device: Insufficient Permissions"
	if s := m.Summary(); s.Verdict != verdict {
		t.Errorf("verdict %q\nwant %q", s.Verdict, verdict)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
