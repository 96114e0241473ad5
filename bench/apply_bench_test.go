package bench

import (
	"io"
	"os"
	"testing"

	"github.com/piperun/piperun/cli"
)

// BenchmarkApply runs `piperun apply $SPEC` (default w1.yaml) in-process,
// so that `go test -cpuprofile` can profile a whole pipeline run:
//
//	SPEC=w1.yaml go test ./bench -run '^$' -bench Apply -benchtime 1x -cpuprofile /tmp/w1.prof
//	go tool pprof -top bench.test /tmp/w1.prof
//
// Extra `--set` overrides can be passed in SET (one, e.g. SET=epochs=10).
func BenchmarkApply(b *testing.B) {
	spec := os.Getenv("SPEC")
	if spec == "" {
		spec = "w1.yaml"
	}
	args := []string{"apply", spec, "--progress", "never", "--log-level", "error"}
	if s := os.Getenv("SET"); s != "" {
		args = append(args, "--set", s)
	}
	for i := 0; i < b.N; i++ {
		if rc := cli.Main(args, io.Discard, os.Stderr); rc != 0 {
			b.Fatalf("piperun %v: exit %d", args, rc)
		}
	}
}
