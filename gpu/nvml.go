//go:build cgo && linux

package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Open loads the NVIDIA driver's NVML library (libnvidia-ml.so.1) and
// returns a Source over its devices; the error wraps ErrUnavailable where
// the library is missing.
func Open() (Source, error) { return openLibrary(nvml.New()) }

// openLibrary is Open over lib, a library go-nvml loaded from a file
// (nvml.New): its compute processes are counted through NVML's count-only
// call (countProcesses), never through go-nvml's, whose buffer some R535
// drivers overrun. Tests pass a fake driver's library.
func openLibrary(lib nvml.Interface) (Source, error) {
	s, err := fromNVML(lib)
	if err != nil {
		return nil, err
	}
	if c, err := findProcessCounter(); err == nil {
		s.processes = func(index int, _ nvml.Device) (int, nvml.Return) { return c.count(index) }
	} else {
		// Every driver since R270 has these; without them a reading says
		// the driver does not list processes, rather than guess.
		s.processes = func(int, nvml.Device) (int, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
	}
	return s, nil
}

// FromNVML returns a Source over lib, initializing it; tests pass
// go-nvml's mock of a machine. Its compute processes are listed through
// lib's GetComputeRunningProcesses, which a mock implements in Go: Open
// counts them without go-nvml's buffer.
func FromNVML(lib nvml.Interface) (Source, error) {
	s, err := fromNVML(lib)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func fromNVML(lib nvml.Interface) (*nvmlSource, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("%w: no NVIDIA driver (libnvidia-ml.so.1 not found)", ErrUnavailable)
		}
		return nil, fmt.Errorf("%w: nvml init: %w", ErrUnavailable, ret)
	}
	return &nvmlSource{lib: lib, processes: listProcesses}, nil
}

// listProcesses counts h's compute processes through go-nvml's list of
// them.
func listProcesses(_ int, h nvml.Device) (int, nvml.Return) {
	ps, ret := h.GetComputeRunningProcesses()
	return len(ps), ret
}

type nvmlSource struct {
	lib     nvml.Interface
	handles map[int]nvml.Device
	// unopened holds, for a device NVML would not give a handle for, why:
	// its readings fail with it, so the Summary names the device.
	unopened map[int]error
	// processes counts the compute processes on the device of that index
	// and handle.
	processes func(index int, h nvml.Device) (int, nvml.Return)
}

func (s *nvmlSource) err(what string, ret nvml.Return) error {
	return fmt.Errorf("%s: %w", what, ret)
}

func (s *nvmlSource) Devices() ([]Device, error) {
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, s.err("device count", ret)
	}
	s.handles = make(map[int]nvml.Device, n)
	s.unopened = map[int]error{}
	out := make([]Device, 0, n)
	for i := range n {
		d := Device{Index: i}
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			// The count includes devices this process may not open
			// (cgroup device limits under Slurm or in a container give
			// ERROR_NO_PERMISSION) or that fell off the bus; the others
			// are still worth watching.
			s.unopened[i] = s.err("open device", ret)
			out = append(out, d)
			continue
		}
		s.handles[i] = h
		if name, ret := h.GetName(); ret == nvml.SUCCESS {
			d.Name = name
		}
		if uuid, ret := h.GetUUID(); ret == nvml.SUCCESS {
			d.UUID = uuid
		}
		if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.MemoryTotal = mem.Total
		}
		out = append(out, d)
	}
	return out, nil
}

func (s *nvmlSource) Read(index int) (Reading, error) {
	if err, ok := s.unopened[index]; ok {
		return Reading{}, err
	}
	h, ok := s.handles[index]
	if !ok {
		return Reading{}, errors.New("no such device")
	}
	u, ret := h.GetUtilizationRates()
	if ret == nvml.ERROR_NOT_SUPPORTED {
		// NVML's general meaning; its one named case is MIG mode.
		return Reading{}, fmt.Errorf("utilization: %w by this device (a GPU in MIG mode gives none)", ErrNotSupported)
	}
	if ret != nvml.SUCCESS {
		return Reading{}, s.err("utilization", ret)
	}
	r := Reading{Utilization: u.Gpu, Processes: -1}
	if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
		r.MemoryUsed = mem.Used
	}
	if n, ret := s.processes(index, h); ret == nvml.SUCCESS {
		r.Processes = n
	}
	return r, nil
}

func (s *nvmlSource) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return s.err("nvml shutdown", ret)
	}
	return nil
}
