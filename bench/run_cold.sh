#!/usr/bin/env bash
# W1 from a cold page cache against a warm one: before each run the photos
# (*.JPEG, as bench/w1.yaml reads) are dropped from the page cache
# (POSIX_FADV_DONTNEED), or read into it,
# so that a run reads them from the disk or from memory. With several
# binaries (e.g. before and after a change) the runs alternate.
#
#   bash bench/run_cold.sh [PHOTO_DIR] [ROUNDS] [BIN...]
#
# PHOTO_DIR defaults to ../shared/data/photos/imagenet, ROUNDS to 4, BIN to
# a piperun built from this checkout. Prints images/s for each binary and
# cache state, the median and the values of every round.
set -euo pipefail
cd "$(dirname "$0")/.."
PHOTOS=$(realpath "${1:-../shared/data/photos/imagenet}")
ROUNDS=${2:-4}
shift $(( $# < 2 ? $# : 2 ))
OUT=$PWD/bench/out
mkdir -p "$OUT"
if [ $# -eq 0 ]; then
  go build -o "$OUT/piperun" ./cmd/piperun
  set -- "$OUT/piperun"
fi
export PHOTOS
BINS=()
for b in "$@"; do BINS+=("$(realpath "$b")"); done
evict() {
  python3 - "$PHOTOS" <<'PYEOF'
import glob, os, sys
for f in glob.glob(os.path.join(sys.argv[1], "*.JPEG")):
    fd = os.open(f, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PYEOF
}
log=$OUT/cold.tsv
: > "$log"
for r in $(seq 1 "$ROUNDS"); do
  for bin in "${BINS[@]}"; do
    for state in cold warm; do
      if [ "$state" = cold ]; then evict; else cat "$PHOTOS"/*.JPEG >/dev/null; fi
      (cd bench && timeout 300 "$bin" apply w1.yaml --progress never --log-level warn --report "$OUT/cold.json" >/dev/null)
      python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print("%s\t%s\t%.1f" % (sys.argv[2], sys.argv[3], sum(v["samples"] for v in j["sinks"].values()) / j["elapsed_s"]))' "$OUT/cold.json" "$bin" "$state" >>"$log"
    done
  done
done
python3 - "$log" <<'PYEOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    b, s, v = line.split("\t")
    rows.setdefault((b, s), []).append(float(v))
for (b, s), vs in rows.items():
    print(f"{b}\t{s}\tmedian {statistics.median(vs):.1f} img/s\t{' '.join(f'{v:.1f}' for v in vs)}")
PYEOF
