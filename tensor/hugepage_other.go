//go:build !linux

package tensor

func adviseHuge([]byte) {}
