//go:build !linux

package plan

// physicalMemory returns 0 where RAM cannot be read without cgo.
func physicalMemory() int64 { return 0 }

// cgroupMemoryLimit returns 0: cgroups are Linux's.
func cgroupMemoryLimit() int64 { return 0 }
