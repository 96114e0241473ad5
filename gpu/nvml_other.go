//go:build !(cgo && linux)

package gpu

import "fmt"

// Open fails in a build without cgo or off Linux: go-nvml loads the driver
// through cgo.
func Open() (Source, error) {
	return nil, fmt.Errorf("%w: piperun was built without cgo (CGO_ENABLED=0), and NVML needs it", ErrUnavailable)
}
