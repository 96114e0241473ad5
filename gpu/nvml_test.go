//go:build cgo && linux

package gpu

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// TestNVMLSourceOnAMockDGX reads go-nvml's mock of a DGX H200 (eight
// GPUs, where CI has no driver; TestOpenOnThisMachine reads a real one
// where there is) through the NVML adapter: device names and memory from the mock's
// configuration, utilization and processes from functions set per device.
func TestNVMLSourceOnAMockDGX(t *testing.T) {
	lib := dgxh200.New()
	for i, d := range lib.Devices {
		dev := d.(*server.Device)
		util := uint32(10 * (i + 1))
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: util, Memory: util / 2}, nvml.SUCCESS
		}
		procs := []nvml.ProcessInfo{}
		if i%2 == 0 {
			procs = append(procs, nvml.ProcessInfo{Pid: 4242, UsedGpuMemory: 1 << 30})
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs, nvml.SUCCESS }
	}
	lib.Devices[7].(*server.Device).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST
	}
	m := monitorOn(t, lib)
	m.Sample()
	s := m.Summary()
	if len(s.Devices) != 8 {
		t.Fatalf("%d devices, want 8", len(s.Devices))
	}
	d0 := s.Devices[0]
	if d0.Name != "NVIDIA H200 141GB HBM3e" || d0.UUID == "" || d0.MemoryTotalBytes == 0 || d0.UtilizationMeanPct != 10 || d0.UsedReadings != 1 {
		t.Errorf("gpu 0: %+v", d0)
	}
	if d1 := s.Devices[1]; d1.UtilizationMeanPct != 20 || d1.UsedReadings != 0 {
		t.Errorf("gpu 1 (no process): %+v", d1)
	}
	if s.ReadErrors != 1 || s.LastReadError != "gpu 7: utilization: ERROR_GPU_IS_LOST" {
		t.Errorf("read errors %d, last %q", s.ReadErrors, s.LastReadError)
	}
	// GPUs 0 and 2 are used and under half busy; 4 (50%) and 6 (70%) are
	// used and fed; the odd ones run no process.
	want := "starving: gpu 0 (NVIDIA H200 141GB HBM3e) under 50% busy in 1 of 1 readings while a process used it, 10% on average then and gpu 2 (NVIDIA H200 141GB HBM3e) under 50% busy in 1 of 1 readings while a process used it, 30% on average then; it waited for input, or its work is too small to keep it busy; could not read gpu 7 (NVIDIA H200 141GB HBM3e): utilization: ERROR_GPU_IS_LOST"
	if !s.Starving || s.Verdict != want {
		t.Errorf("verdict %q\nwant %q", s.Verdict, want)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

// monitorOn opens a Monitor over lib through the NVML adapter.
func monitorOn(t *testing.T, lib nvml.Interface) *Monitor {
	t.Helper()
	src, err := FromNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMonitor(src)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMIGGivesNoUtilization: NVML gives no utilization for a device
// that does not support it (ERROR_NOT_SUPPORTED: an older GeForce, a
// Jetson, a GPU in MIG mode); the read says so, wrapping ErrNotSupported,
// and a summary of such devices says none could be read instead of "no
// process used a gpu".
func TestMIGGivesNoUtilization(t *testing.T) {
	lib := dgxh200.New()
	lib.Devices = lib.Devices[:2]
	for _, d := range lib.Devices {
		d.(*server.Device).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
		}
	}
	m := monitorOn(t, lib)
	src := m.src
	if _, err := src.Read(0); !errors.Is(err, ErrNotSupported) {
		t.Errorf("read: %v, want ErrNotSupported", err)
	}
	m.Sample()
	s := m.Summary()
	const one = "(NVIDIA H200 141GB HBM3e): utilization: not supported by this device (a GPU in MIG mode gives none)"
	if want := "no gpu could be read: gpu 0 " + one + " and gpu 1 " + one; s.Verdict != want || s.Starving || s.Devices[1].ReadErrors != 1 {
		t.Errorf("verdict %q, starving %v, gpu 1 %+v\nwant %q", s.Verdict, s.Starving, s.Devices[1], want)
	}
}

// TestUnopenedDevicesAreWatchedUnread: NVML counts devices it will not
// give a handle for (ERROR_NO_PERMISSION under a cgroup's device limit,
// ERROR_GPU_IS_LOST); each is listed without a name, its readings fail
// with that error, and the others are watched.
func TestUnopenedDevicesAreWatchedUnread(t *testing.T) {
	const h200 = "NVIDIA H200 141GB HBM3e"
	for _, tc := range []struct {
		name    string
		fail    map[int]nvml.Return
		names   []string
		errors  []int
		verdict string
	}{
		{"one denied", map[int]nvml.Return{1: nvml.ERROR_NO_PERMISSION}, []string{h200, "", h200}, []int{0, 1, 0},
			"fed: gpu 0 (" + h200 + ") under 50% busy in 0 of 1 readings while a process used it, 90% on average then and " +
				"gpu 2 (" + h200 + ") under 50% busy in 0 of 1 readings while a process used it, 90% on average then; " +
				"could not read gpu 1: open device: ERROR_NO_PERMISSION"},
		{"one denied, one lost", map[int]nvml.Return{0: nvml.ERROR_GPU_IS_LOST, 2: nvml.ERROR_NO_PERMISSION}, []string{"", h200, ""}, []int{1, 0, 1},
			"fed: gpu 1 (" + h200 + ") under 50% busy in 0 of 1 readings while a process used it, 90% on average then; " +
				"could not read gpu 0: open device: ERROR_GPU_IS_LOST and gpu 2: open device: ERROR_NO_PERMISSION"},
		{"all denied", map[int]nvml.Return{0: nvml.ERROR_NO_PERMISSION, 1: nvml.ERROR_NO_PERMISSION, 2: nvml.ERROR_NO_PERMISSION}, []string{"", "", ""}, []int{1, 1, 1},
			"no gpu could be read: gpu 0: open device: ERROR_NO_PERMISSION, gpu 1: open device: ERROR_NO_PERMISSION, " +
				"and gpu 2: open device: ERROR_NO_PERMISSION"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := dgxh200.New()
			lib.Devices = lib.Devices[:3]
			for _, d := range lib.Devices {
				dev := d.(*server.Device)
				dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 90}, nvml.SUCCESS }
				dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
					return []nvml.ProcessInfo{{Pid: 4242}}, nvml.SUCCESS
				}
			}
			byIndex := lib.DeviceGetHandleByIndexFunc
			lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
				if ret, ok := tc.fail[i]; ok {
					return nil, ret
				}
				return byIndex(i)
			}
			m := monitorOn(t, lib)
			m.Sample()
			s := m.Summary()
			if len(s.Devices) != 3 {
				t.Fatalf("%d devices, want 3", len(s.Devices))
			}
			for i, d := range s.Devices {
				if d.Index != i || d.Name != tc.names[i] || d.ReadErrors != tc.errors[i] || d.Readings != 1-tc.errors[i] {
					t.Errorf("gpu %d: %+v; want name %q, %d read errors", i, d, tc.names[i], tc.errors[i])
				}
			}
			if s.Verdict != tc.verdict || s.Starving {
				t.Errorf("verdict %q\nwant %q", s.Verdict, tc.verdict)
			}
		})
	}
}

// TestUnlistedProcessesReadAsUnknown: where the driver will not list a
// device's processes, a reading has the rest and says Processes -1 (not
// 0, which would leave the device unjudged).
func TestUnlistedProcessesReadAsUnknown(t *testing.T) {
	lib := dgxh200.New()
	dev := lib.Devices[0].(*server.Device)
	dev.MemoryInfo.Used = 7 << 30
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 35}, nvml.SUCCESS }
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NO_PERMISSION }
	m := monitorOn(t, lib)
	r, err := m.src.Read(0)
	if want := (Reading{Utilization: 35, MemoryUsed: 7 << 30, Processes: -1}); err != nil || r != want {
		t.Errorf("read %+v, %v; want %+v", r, err, want)
	}
}

// TestCloseShutsNVMLDown: Close shuts NVML down once, and says so when
// that fails.
func TestCloseShutsNVMLDown(t *testing.T) {
	for _, tc := range []struct {
		ret nvml.Return
		err string
	}{
		{nvml.SUCCESS, ""},
		{nvml.ERROR_UNKNOWN, "nvml shutdown: ERROR_UNKNOWN"},
	} {
		lib := dgxh200.New()
		lib.ShutdownFunc = func() nvml.Return { return tc.ret }
		m := monitorOn(t, lib)
		if got := errString(m.Close()); got != tc.err || len(lib.ShutdownCalls()) != 1 {
			t.Errorf("%v: close %q after %d shutdowns; want %q after 1", tc.ret, got, len(lib.ShutdownCalls()), tc.err)
		}
	}
}

// nvmlLibrary returns where the dynamic loader would likely find NVML's
// library, or "" where it likely would not: the directories of
// LD_LIBRARY_PATH and the default ones, then the loader's cache (ldconfig
// -p). It is a guess for the test's log and for its expected error; Open's
// result decides.
func nvmlLibrary() string {
	const lib = "libnvidia-ml.so.1"
	dirs := filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	for _, dir := range dirs {
		if p := filepath.Join(dir, lib); dir != "" && fileExists(p) {
			return p
		}
	}
	for _, ldconfig := range []string{"/sbin/ldconfig", "/usr/sbin/ldconfig"} {
		out, err := exec.Command(ldconfig, "-p").Output()
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(out)) {
			if strings.Contains(line, lib+" ") {
				_, p, _ := strings.Cut(line, "=> ")
				return strings.TrimSpace(p)
			}
		}
		break
	}
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestOpenOnThisMachine opens NVML wherever the tests run. Where it cannot,
// Open wraps ErrUnavailable, so apply reports the GPU as unavailable
// instead of failing, and says why: the library was not found (always so
// where no library is anywhere the loader looks), or NVML did not start
// (a library without a usable GPU). Where it opens, every device reads
// sensibly: a name, a GPU- UUID, memory used within the total, utilization
// within 0-100, and a Monitor over the real source sums two samples of
// each device without read errors. (This part runs only on a machine with
// an NVIDIA GPU; bench/gpu_check.sh runs it there.)
func TestOpenOnThisMachine(t *testing.T) {
	lib := nvmlLibrary()
	src, err := Open()
	if err != nil {
		notFound := err.Error() == "nvml unavailable: no NVIDIA driver (libnvidia-ml.so.1 not found)"
		if !errors.Is(err, ErrUnavailable) || !notFound && !strings.HasPrefix(err.Error(), "nvml unavailable: nvml init: ") {
			t.Fatalf("err = %v", err)
		}
		if lib == "" && !notFound {
			t.Fatalf("no libnvidia-ml.so.1 where the loader looks, but err = %v", err)
		}
		if lib != "" {
			t.Skipf("a libnvidia-ml.so.1 at %s, but no GPU to read: %v", lib, err)
		}
		return
	}
	t.Logf("NVML opened; the loader's likely library: %q", lib)
	devices, err := src.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devices) == 0 {
		t.Fatalf("NVML (%s) opened but lists no device", lib)
	}
	for _, d := range devices {
		r, err := src.Read(d.Index)
		if errors.Is(err, ErrNotSupported) {
			t.Skipf("gpu %d: %v", d.Index, err)
		}
		if err != nil {
			t.Errorf("gpu %d: %v", d.Index, err)
			continue
		}
		t.Logf("gpu %d: %q %s, memory %d of %d bytes, utilization %d%%, %d compute processes", d.Index, d.Name, d.UUID, r.MemoryUsed, d.MemoryTotal, r.Utilization, r.Processes)
		if d.Name == "" || !strings.HasPrefix(d.UUID, "GPU-") || d.MemoryTotal == 0 {
			t.Errorf("gpu %d: %+v", d.Index, d)
		}
		if r.Utilization > 100 || r.MemoryUsed > d.MemoryTotal || r.Processes < -1 {
			t.Errorf("gpu %d: reading %+v (memory total %d)", d.Index, r, d.MemoryTotal)
		}
	}
	m, err := NewMonitor(src)
	if err != nil {
		t.Fatal(err)
	}
	m.Sample()
	m.Sample()
	s := m.Summary()
	if !s.Available || len(s.Devices) != len(devices) || s.ReadErrors != 0 || s.Verdict == "" {
		t.Errorf("summary %+v", s)
	}
	for _, d := range s.Devices {
		if d.Readings != 2 || d.UtilizationMaxPct > 100 || d.MemoryUsedMaxBytes > d.MemoryTotalBytes {
			t.Errorf("gpu %d summary %+v", d.Index, d)
		}
	}
	t.Logf("verdict: %s", s.Verdict)
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}
