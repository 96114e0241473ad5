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
func Open() (Source, error) { return FromNVML(nvml.New()) }

// FromNVML returns a Source over lib, initializing it; tests pass
// go-nvml's mock of a machine.
func FromNVML(lib nvml.Interface) (Source, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("%w: no NVIDIA driver (libnvidia-ml.so.1 not found)", ErrUnavailable)
		}
		return nil, fmt.Errorf("%w: nvml init: %w", ErrUnavailable, ret)
	}
	return &nvmlSource{lib: lib}, nil
}

type nvmlSource struct {
	lib     nvml.Interface
	handles map[int]nvml.Device
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
	out := make([]Device, 0, n)
	for i := range n {
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, s.err(fmt.Sprintf("device %d", i), ret)
		}
		s.handles[i] = h
		d := Device{Index: i}
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
	h, ok := s.handles[index]
	if !ok {
		return Reading{}, errors.New("no such device")
	}
	u, ret := h.GetUtilizationRates()
	if ret == nvml.ERROR_NOT_SUPPORTED {
		// NVML documents this for a GPU in MIG mode.
		return Reading{}, fmt.Errorf("utilization: %w (NVML gives none for a GPU in MIG mode)", ErrNotSupported)
	}
	if ret != nvml.SUCCESS {
		return Reading{}, s.err("utilization", ret)
	}
	r := Reading{Utilization: u.Gpu, Processes: -1}
	if mem, ret := h.GetMemoryInfo(); ret == nvml.SUCCESS {
		r.MemoryUsed = mem.Used
	}
	if ps, ret := h.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
		r.Processes = len(ps)
	}
	return r, nil
}

func (s *nvmlSource) Close() error {
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return s.err("nvml shutdown", ret)
	}
	return nil
}
