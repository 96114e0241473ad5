package cli

import (
	"os"
	"runtime"
	"strconv"
)

// spareProcs is how many Ps the piperun command runs with beyond Go's
// default (the cores it may use, or a container's CPU limit). A decoder in C (libjpeg-turbo, the C resize
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
// spareProcs, unless the GOMAXPROCS variable chose (env, its value: the
// runtime, and so this, ignores one that is not a positive number).
func procsFor(env string, def int) int {
	if n, err := strconv.Atoi(env); err == nil && n > 0 {
		return def
	}
	return def + spareProcs
}

// defaultProcs is Go's own GOMAXPROCS for this process, read before
// setProcs changes it: the command runs many times in one test process,
// and adding the spare P to the value a previous run left would add one
// more P each time.
var defaultProcs = runtime.GOMAXPROCS(0)

// setProcs applies procsFor to this process. Setting GOMAXPROCS turns
// off the runtime's own updates of it (to a container's CPU limit or the
// process's CPU affinity changing during the run), which a run of an
// input pipeline, sized to its cores at the start, does without.
func setProcs() {
	runtime.GOMAXPROCS(procsFor(os.Getenv("GOMAXPROCS"), defaultProcs))
}
