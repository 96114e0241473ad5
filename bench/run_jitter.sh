#!/usr/bin/env bash
# W1-JITTER throughput: piperun (bench/w1_jitter.yaml: random_resized_crop,
# flip, color_jitter 0.4/0.4/0.4, to_float, normalize, batch 32, 2 epochs)
# beside PyTorch's DataLoader(num_workers=2) doing torchvision's
# RandomResizedCrop, RandomHorizontalFlip, ColorJitter(0.4, 0.4, 0.4),
# ToTensor and Normalize (bench/torch_w1.py --jitter).
#
#   bash bench/run_jitter.sh [PHOTO_DIR] [REPS]
#
# PHOTO_DIR defaults to ../shared/data/photos/imagenet; REPS (default 3)
# rounds each run both, interleaved, so that the ratio compares like with
# like on a shared machine. Prints each round's images/s and ratio and their
# medians. Needs Go and Debian's python3-torch, python3-torchvision,
# python3-pil (run by /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PHOTOS=$(realpath "${1:-../shared/data/photos/imagenet}")
REPS=${2:-3}
PY=${PY:-/usr/bin/python3}
OUT=$PWD/bench/out
mkdir -p "$OUT/jitter"
export PHOTOS

"$PY" -c 'import torch, torchvision, PIL' || { echo "need python3-torch python3-torchvision python3-pil for $PY" >&2; exit 2; }
go build -o "$OUT/piperun" ./cmd/piperun

rows=$OUT/jitter/rows.tsv
: > "$rows"
for r in $(seq 1 "$REPS"); do
  cat "$PHOTOS"/*.JPEG > /dev/null # both read from the page cache
  timeout 300 "$OUT/piperun" apply bench/w1_jitter.yaml --progress never --log-level warn --report "$OUT/jitter/report.json" > /dev/null 2> "$OUT/jitter/piperun.log"
  p=$("$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.1f" % (j["sinks"]["out"]["samples"] / j["elapsed_s"]))' "$OUT/jitter/report.json")
  t=$(timeout 300 "$PY" bench/torch_w1.py "$PHOTOS" --jitter | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["images_per_s"])')
  printf '%s\t%s\t%s\n' "$r" "$p" "$t" | tee -a "$rows"
done
"$PY" - "$rows" <<'EOF'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
p = [float(r[1]) for r in rows]
t = [float(r[2]) for r in rows]
ratios = [a / b for a, b in zip(p, t)]
print("piperun W1-JITTER  %.1f images/s (median of %d)" % (statistics.median(p), len(p)))
print("torch DataLoader   %.1f images/s" % statistics.median(t))
print("ratio              %.2fx (rounds %s)" % (statistics.median(ratios), ", ".join("%.2f" % x for x in ratios)))
EOF
