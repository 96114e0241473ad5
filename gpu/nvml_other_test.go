//go:build !(cgo && linux)

package gpu

import (
	"errors"
	"testing"
)

// TestOpenWithoutNVML: off Linux or without cgo, Open says NVML is not
// watched there, wrapping ErrUnavailable, so apply reports why.
func TestOpenWithoutNVML(t *testing.T) {
	src, err := Open()
	const want = "nvml unavailable: NVML is watched only on Linux builds with cgo"
	if src != nil || !errors.Is(err, ErrUnavailable) || err.Error() != want {
		t.Errorf("Open() = %v, %v; want nil, %q", src, err, want)
	}
}
