//go:build !linux

package tensor

// AdviseHuge is a no-op where transparent huge pages are not known.
func AdviseHuge([]byte) {}
