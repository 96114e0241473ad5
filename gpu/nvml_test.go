//go:build cgo && linux

package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// TestNVMLSourceOnAMockDGX reads go-nvml's mock of a DGX H200 (eight
// GPUs; the NVIDIA driver cannot exist on the machines the tests run on)
// through the NVML adapter: device names and memory from the mock's
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
	src, err := FromNVML(lib)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMonitor(src)
	if err != nil {
		t.Fatal(err)
	}
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
	want := "starving: gpu 0 (NVIDIA H200 141GB HBM3e) under 50% busy in 1 of 1 readings while a process used it, 10% on average then and gpu 2 (NVIDIA H200 141GB HBM3e) under 50% busy in 1 of 1 readings while a process used it, 30% on average then; it waited for input, or its work is too small to keep it busy"
	if !s.Starving || s.Verdict != want {
		t.Errorf("verdict %q\nwant %q", s.Verdict, want)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
}

// TestOpenWithoutADriver: where libnvidia-ml.so.1 cannot be loaded, Open
// says so and wraps ErrUnavailable, so apply reports the GPU as
// unavailable instead of failing. On a machine with the driver it opens.
func TestOpenWithoutADriver(t *testing.T) {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu"} {
		if _, err := os.Stat(filepath.Join(dir, "libnvidia-ml.so.1")); err == nil {
			src, err := Open()
			if err != nil {
				t.Fatalf("driver library in %s, but Open: %v", dir, err)
			}
			src.Close()
			t.Skipf("this machine has an NVIDIA driver (%s): Open works", dir)
		}
	}
	src, err := Open()
	if err == nil {
		src.Close()
		t.Fatal("Open succeeded without libnvidia-ml.so.1 in the usual places")
	}
	if !errors.Is(err, ErrUnavailable) || err.Error() != "nvml unavailable: no NVIDIA driver (libnvidia-ml.so.1 not found)" {
		t.Errorf("err = %v", err)
	}
}
