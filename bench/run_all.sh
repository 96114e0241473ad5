#!/usr/bin/env bash
# The final measurements, back to back in one run (ratios compare like with
# like on a shared machine): bench/run_w1.sh then bench/run_memory.sh.
#
#   bash bench/run_all.sh [PHOTO_DIR] [REPS]    # output also in bench/out/run_all.log
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/out
{
  echo "== $(date -Is) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD)"
  timeout 1200 bash bench/run_w1.sh "${1:-../shared/data/photos/imagenet}" "${2:-3}"
  timeout 1200 bash bench/run_memory.sh "${1:-../shared/data/photos/imagenet}" "${2:-3}"
  echo "== $(date -Is) done"
} 2>&1 | tee bench/out/run_all.log
