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

// userProcs reports whether the GOMAXPROCS variable's value env is one
// the runtime applies: a positive number.
func userProcs(env string) bool {
	n, err := strconv.Atoi(env)
	return err == nil && n > 0
}

// setProcs sets GOMAXPROCS to Go's default plus spareProcs, unless the
// GOMAXPROCS variable chose (the runtime, and so this, ignores one that is
// not a positive number). Setting GOMAXPROCS turns
// off the runtime's own updates of it (to a container's CPU limit or the
// process's CPU affinity changing during the run), which a run of an
// input pipeline, sized to its cores at the start, does without. The
// spare P is added to Go's default as it is now (SetDefaultGOMAXPROCS),
// not to the current setting: a process that runs the command more than
// once (tests, BenchmarkApply) would otherwise add one more each time, and
// the command also ignores a `go test -cpu` setting.
func setProcs() {
	if userProcs(os.Getenv("GOMAXPROCS")) {
		return
	}
	runtime.SetDefaultGOMAXPROCS()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + spareProcs)
}
