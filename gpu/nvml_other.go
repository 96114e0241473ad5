//go:build !(cgo && linux)

package gpu

import "fmt"

// Open fails off Linux or in a build without cgo: go-nvml loads the
// driver through cgo, and piperun watches it only on Linux.
func Open() (Source, error) {
	return nil, fmt.Errorf("%w: NVML is watched only on Linux builds with cgo", ErrUnavailable)
}
