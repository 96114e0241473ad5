#!/usr/bin/env bash
# W1 and W1-RRC against PyTorch's DataLoader at several core counts of one
# machine, each process pinned to the first N cores (taskset): piperun's
# `workers: auto` follows the pinning (Go's GOMAXPROCS honours it), and the
# DataLoader gets num_workers=N. Also one core's decode+resize rate, as
# piperun's bare loop (DCT-scaled, libjpeg-turbo) and as PIL does it, for
# the "rate of one core × cores" comparison.
#
#   bash bench/w1_cores.sh BIN_DIR PHOTO_DIR [CORES] [ROUNDS]
#
# BIN_DIR holds piperun and bench.test, built where Go is (a lent GPU
# machine has none):
#
#   go build -o BIN/piperun ./cmd/piperun && go test -c -o BIN/bench.test ./bench
#
# and libjpeg.so.62 where the machine lacks it (put first on
# LD_LIBRARY_PATH). PHOTO_DIR is a folder of *.JPEG (bench/gen_photos.py
# makes one where the shared ImageNet sample cannot go). CORES defaults to
# "2 <all>", ROUNDS to 2; rows run interleaved within each round. Needs a
# python3 with torch, torchvision and PIL (PY). Prints a table of medians.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1")
PHOTOS=$(realpath "$2")
CORES=${3:-"2 $(nproc)"}
ROUNDS=${4:-2}
PY=${PY:-python3}
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PHOTOS
command -v taskset >/dev/null || { echo "need taskset (util-linux)" >&2; exit 2; }
log=$(mktemp)
n=$(find "$PHOTOS" -maxdepth 1 -name '*.JPEG' | wc -l)
echo "== $n photos in $PHOTOS, $(du -sh "$PHOTOS" | cut -f1); cores: $CORES; $ROUNDS rounds"

pin() { local c=$1; shift; taskset -c "0-$((c - 1))" "$@"; }
piperun_row() { # round cores row spec
	local rep
	rep=$(mktemp)
	pin "$2" "$BIN/piperun" apply "bench/$4" --progress never --log-level warn --report "$rep" >/dev/null
	"$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); n=sum(v["samples"] for v in j["sinks"].values()); print("%s\t%s\t%s\t%.1f" % (sys.argv[2], sys.argv[3], sys.argv[4], n / j["elapsed_s"]))' \
		"$rep" "$1" "$2" "$3" >>"$log"
}
torch_row() { # round cores row [--augment]
	local r=$1 c=$2 row=$3
	shift 3
	pin "$c" "$PY" bench/torch_w1.py "$PHOTOS" --workers "$c" --epochs 2 "$@" |
		"$PY" -c 'import json,sys; print("%s\t%s\t%s\t%.1f" % (sys.argv[1], sys.argv[2], sys.argv[3], json.load(sys.stdin)["images_per_s"]))' "$r" "$c" "$row" >>"$log"
}
for r in $(seq 1 "$ROUNDS"); do
	for c in $CORES; do
		piperun_row "$r" "$c" piperun_w1 w1.yaml
		torch_row "$r" "$c" torch_w1
		piperun_row "$r" "$c" piperun_rrc w1_rrc.yaml
		torch_row "$r" "$c" torch_rrc --augment
	done
	(cd bench && pin 1 "$BIN/bench.test" -test.run '^$' -test.bench 'DecodeResize224NoFloat/dctscale$' -test.cpu 1 -test.benchtime 2x) |
		awk -v r="$r" '/^BenchmarkDecodeResize224/ { for (i = 2; i < NF; i++) if ($(i+1) == "images/s") printf "%s\t1\tloop_1core\t%s\n", r, $i }' >>"$log"
	pin 1 "$PY" bench/pil_1core.py "$PHOTOS" --passes 2 |
		"$PY" -c 'import json,sys; print("%s\t1\tpil_1core\t%.1f" % (sys.argv[1], json.load(sys.stdin)["images_per_s"]))' "$r" >>"$log"
done

"$PY" - "$log" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r, c, row, v = line.split("\t")
    rows.setdefault((int(c), row), []).append(float(v))
med = {k: statistics.median(v) for k, v in rows.items()}
loop, pil = med[(1, "loop_1core")], med[(1, "pil_1core")]
print(f"one core: piperun's bare loop {loop:.0f} img/s, PIL {pil:.0f} img/s")
print("cores  W1 piperun  torch  ratio   RRC piperun  torch  ratio   W1/(cores x loop)  W1/(cores x PIL)")
for c in sorted({c for c, row in rows if row == "piperun_w1"}):
    w, t = med[(c, "piperun_w1")], med[(c, "torch_w1")]
    rw, rt = med[(c, "piperun_rrc")], med[(c, "torch_rrc")]
    print(f"{c:5d}  {w:10.0f}  {t:5.0f}  {w / t:5.2f}   {rw:11.0f}  {rt:5.0f}  {rw / rt:5.2f}   {w / (c * loop):17.2f}  {w / (c * pil):16.2f}")
print("every row (round, cores, row, img/s):")
for (c, row), v in sorted(rows.items()):
    print(f"  {c:3d} {row:12s} " + " ".join(f"{x:.0f}" for x in v))
EOF
rm -f "$log"
