#!/usr/bin/env bash
# Checks apply's GPU monitor (gpu/, NVML) on a machine with a real NVIDIA
# GPU, against what a trainer on that GPU measured itself.
#
#   bash bench/gpu_check.sh [BIN_DIR] [OUT_DIR]
#
# BIN_DIR (default bench/out/gpu-bin) holds piperun, gpu.test and cli.test,
# built where Go is (a GPU machine may have none):
#
#   go build -o BIN/piperun ./cmd/piperun
#   go test -c -o BIN/gpu.test ./gpu && go test -c -o BIN/cli.test ./cli
#
# and libjpeg.so.62 where that machine lacks it (it is put first on
# LD_LIBRARY_PATH). Needs nvidia-smi and a python3 with a CUDA PyTorch.
#
# Runs: the gpu and cli tests that read the real device; apply with no
# trainer; and apply serving the shapes pipeline to bench/gpu_trainer.py:
#   fed       30 ms of GPU work per batch, fast pipeline; the trainer
#             starts 2 s late, which must not count as starving
#   pipeline  1 ms of GPU work per batch, one decoding worker: the GPU
#             waits for the pipeline
#   trainer   1 ms of GPU work and 8 ms of CPU work per batch, fast
#             pipeline: the GPU waits for the trainer's own CPU time
# Writes each report and the trainer's own figures to OUT_DIR, prints
# them side by side, and fails unless apply's verdicts are: no process
# used the GPU; fed; starving held back by the pipeline; starving held
# back by the trainer; and unless they agree with the trainer's own
# figures: starving exactly when its CUDA events found the GPU under 50 %
# busy, held back (in part) by the pipeline exactly when it waited for
# data 10 % of its time or more, and NVML's mean while used within 15
# points of its CUDA-event busy share.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-bench/out/gpu-bin}")
OUT=$(mkdir -p "${2:-bench/out/gpu}" && realpath "${2:-bench/out/gpu}")
PY=${PY:-python3}
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p out
fail=0

echo "== the machine"
nvidia-smi -L
ldconfig -p | grep libnvidia-ml || echo "libnvidia-ml.so.1 not in the loader's cache"
nproc

echo "== gpu and cli tests on the real device"
# A test binary built without cgo, or a test that skipped, passes without
# reading the device: the checks want each test's real-device log line.
"$BIN/gpu.test" -test.v -test.run 'TestOpenOnThisMachine|TestNVMLSourceOnAMockDGX' 2>&1 | tee "$OUT/gpu_test.log"
grep -q -- '--- PASS: TestOpenOnThisMachine' "$OUT/gpu_test.log" && grep -q 'NVML opened' "$OUT/gpu_test.log" ||
	{ echo "WRONG: TestOpenOnThisMachine did not read the device"; fail=1; }
(cd cli && PIPERUN_TEST_BINARY=$BIN/piperun "$BIN/cli.test" -test.v -test.run 'TestApplyGPU$') 2>&1 | tee "$OUT/cli_test.log"
grep -q -- '--- PASS: TestApplyGPU' "$OUT/cli_test.log" && grep -q 'on a GPU machine' "$OUT/cli_test.log" ||
	{ echo "WRONG: TestApplyGPU did not read the device"; fail=1; }

echo "== no trainer"
"$BIN/piperun" apply examples/pipelines/quickstart.yaml --progress never --report "$OUT/idle.json" 2>"$OUT/idle.log" || fail=1

# serve CASE STEP_MS EPOCHS DELAY [--set ...]: apply serving the shapes
# pipeline, and the trainer DELAY seconds later.
serve() {
	local name=$1 step=$2 cpu=$3 epochs=$4 delay=$5
	shift 5
	rm -f out/shapes.sock
	timeout 120 "$BIN/piperun" apply examples/pipelines/serve.yaml --progress never --set epochs="$epochs" "$@" \
		--report "$OUT/$name.json" 2>"$OUT/$name.log" &
	local apply=$!
	sleep "$delay"
	timeout 120 "$PY" bench/gpu_trainer.py unix://out/shapes.sock --step-ms "$step" --cpu-ms "$cpu" >"$OUT/${name}_trainer.json" || fail=1
	wait "$apply" || { fail=1; tail -5 "$OUT/$name.log"; }
}
echo "== fed: 30 ms of GPU work per batch, trainer 2 s late"
serve fed 30 0 12 2
echo "== pipeline: 1 ms of GPU work per batch, one decoding worker"
serve pipeline 1 0 60 0 --set stages.augment.parallelism=1 --set stages.records.parallelism=1
echo "== trainer: 1 ms of GPU work and 8 ms of CPU work per batch"
serve trainer 1 8 20 0

echo "== side by side"
"$PY" - "$OUT" <<'EOF' || fail=1
import json, os, sys
out = sys.argv[1]
want = {"idle": (False, None), "fed": (False, None), "pipeline": (True, "pipeline"), "trainer": (True, "trainer")}
bad = 0
for case, (starving, by) in want.items():
    rep = json.load(open(os.path.join(out, case + ".json")))
    g = rep["gpu"]
    print(f"{case}: apply {rep['elapsed_s']:.1f}s; gpu available={g['available']} starving={g['starving']} "
          f"held_back_by={g.get('held_back_by')}")
    for name, sk in rep["sinks"].items():
        print(f"  sink {name}: {sk['batches']} batches, waited for samples {100 * sk['waited_share']:.1f}% "
              f"of its {sk['active_s']:.1f}s")
    if not g["available"] or g["starving"] != starving or g.get("held_back_by") != by:
        print(f"  WRONG: want starving={starving} held_back_by={by}")
        bad += 1
    if case == "idle" and g.get("verdict") != "no process used a gpu during the run":
        print("  WRONG: want no process used a gpu")
        bad += 1
    print(f"  verdict: {g.get('verdict') or g.get('why')}")
    for d in g.get("devices", []):
        print(f"  gpu {d['index']}: readings {d['readings']}, used {d['used_readings']}, "
              f"mean {d['utilization_mean_pct']:.1f}%, used mean {d['used_utilization_mean_pct']:.1f}%, "
              f"starved share {d['starved_share']:.2f}, memory max {d['memory_used_max_bytes'] / 2**30:.2f} GiB")
    tp = os.path.join(out, case + "_trainer.json")
    if os.path.exists(tp):
        tr = json.load(open(tp))
        print(f"  trainer: {tr['steps']} steps in {tr['seconds']}s, GPU busy {100 * tr['gpu_busy_share']:.1f}% "
              f"(CUDA events), waited for data {100 * tr['waited_share']:.1f}%")
        dev = g["devices"][0]
        if g["starving"] != (tr["gpu_busy_share"] < 0.5):
            print("  WRONG: the verdict disagrees with the trainer's CUDA events")
            bad += 1
        if g["starving"] and (g.get("held_back_by") in ("pipeline", "both")) != (tr["waited_share"] >= 0.1):
            print("  WRONG: held_back_by disagrees with the trainer's wait for data")
            bad += 1
        if abs(dev["used_utilization_mean_pct"] - 100 * tr["gpu_busy_share"]) > 15:
            print("  WRONG: NVML's mean while used is over 15 points from the trainer's CUDA-event busy share")
            bad += 1
sys.exit(1 if bad else 0)
EOF
exit $fail
