package cli

import (
	"os"
	"runtime"
)

// spareProcs is how many Ps the piperun command runs with beyond Go's
// default (the usable cores). A decoder in C (libjpeg-turbo, the C resize
// passes) holds its P in a system call for a millisecond or more. When
// every P is in one, the runtime's monitor takes each back after 20 µs
// and starts a spinning thread to look for other work, which competes
// with the decoders for the cores and is parked again: two decoding
// goroutines in one process reached about 0.8 of two processes decoding
// alone (BenchmarkDecodeResizeFloatInProcess; bench/RESULTS.md, run P).
// With one P more than cores, a P stays idle and the monitor leaves calls
// under 10 ms alone: 40 % fewer context switches, 7–12 % less CPU per
// image and up to a third more images a second in that benchmark.
const spareProcs = 1

// procsFor is the GOMAXPROCS the command sets: the default plus
// spareProcs, unless the GOMAXPROCS variable chose (set says so).
func procsFor(set bool, def int) int {
	if set {
		return def
	}
	return def + spareProcs
}

// setProcs applies procsFor to this process.
func setProcs() {
	_, set := os.LookupEnv("GOMAXPROCS")
	runtime.GOMAXPROCS(procsFor(set, runtime.GOMAXPROCS(0)))
}
