#!/usr/bin/env bash
# Memory promises ("never OOM") and the on-disk cache, measured with
# /usr/bin/time -v (peak RSS = "Maximum resident set size").
#
#   bash bench/run_memory.sh [PHOTO_DIR] [REPS]
#
# a. full-resolution float32 decode -> shuffle 1000 -> discard at 256MiB and
#    512MiB: peak RSS vs budget (target RSS <= budget + 150 MiB), elapsed,
#    every sample exactly once (report sinks = 200 x epochs; a fan-out
#    write_jsonl of `path` checked per epoch).
# b. RSS flat: W1 with epochs 1, 2 and 10, a 10x dataset vs 1x, a 20x
#    dataset vs 10 epochs of a 2x one (same 4000 samples); the full-resolution
#    pipeline (where the 256MiB budget binds) over 2 vs 10 epochs and over a
#    10x dataset; RSS sampled every 50 ms through the long runs to show growth
#    within a run (targets: within +-10 %).
# c. cache: cold vs warm run of decode+resize+to_float -> cache (target
#    >= 5x), then --set of the map expression and `touch` of one photo (of a
#    temp copy; the shared photos are never modified) must recompute.
# REPS (default 3) repeats a-c back to back; medians and ranges are printed
# and bench/out/memory.json is written. Needs Go, gcc, /usr/bin/time. No network.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PHOTOS=$(realpath "${1:-../shared/data/photos/imagenet}")
REPS=${2:-3}
PY=${PY:-python3}
OUT=$ROOT/bench/out
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/piperun-mem.XXXXXX")
trap 'rm -rf "$TMPD"' EXIT
mkdir -p "$OUT/memory"
export PHOTOS

[ -x /usr/bin/time ] || { echo "need /usr/bin/time (apt-get install -y time)" >&2; exit 2; }
N=$(find "$PHOTOS" -maxdepth 1 -name '*.JPEG' | wc -l)
[ "$N" -gt 0 ] || { echo "no *.JPEG in $PHOTOS" >&2; exit 2; }

echo "== build (once)"
go build -o "$OUT/piperun" ./cmd/piperun
P=$OUT/piperun
TO=300
log=$OUT/memory/rows.tsv
: > "$log"   # rep row rss_kb wall_s elapsed_s samples peak_memory_bytes budget_bytes caches_json

# run REP ROW SPEC [piperun args...]: one bounded apply under /usr/bin/time -v
run() {
  local r=$1 row=$2 spec=$3; shift 3
  local rep=$OUT/memory/$row.$r.json tv=$OUT/memory/$row.$r.time
  timeout $TO /usr/bin/time -v -o "$tv" "$P" apply "$spec" --progress never --log-level error --report "$rep" "$@" >/dev/null
  "$PY" - "$r" "$row" "$rep" "$tv" >>"$log" <<'PYEOF'
import json, sys
r, row, rep, tv = sys.argv[1:]
j = json.load(open(rep)); assert j["ok"], rep
t = {}
for line in open(tv):
    k, _, v = line.strip().rpartition(": ")
    t[k] = v
w = t["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(w)))
n = sum(v["samples"] for v in j["sinks"].values() if True)
samples = {k: v["samples"] for k, v in j["sinks"].items()}
print("\t".join([r, row, t["Maximum resident set size (kbytes)"], f"{wall:.2f}", f"{j['elapsed_s']:.3f}",
                 json.dumps(samples), str(j["peak_memory_bytes"]), str(j["memory_budget_bytes"]),
                 json.dumps(j.get("caches", {}))]))
PYEOF
}

# sampled ROUND ROW SPEC ARGS...: run, and also sample the RSS of the piperun
# process every 50 ms into $OUT/memory/ROW.ROUND.rss (seconds, KiB)
sampled() {
  local r=$1 row=$2 f=$OUT/memory/$2.$1.rss pid t0
  : > "$f"
  run "$@" &
  local job=$!
  t0=$(date +%s.%N)
  pid=
  while kill -0 "$job" 2>/dev/null; do
    [ -n "$pid" ] || pid=$(pgrep -n -x piperun || true)
    [ -n "$pid" ] && awk -v t0="$t0" -v t="$(date +%s.%N)" '/^VmRSS/{printf "%.3f\t%d\n", t-t0, $2}' "/proc/$pid/status" >>"$f" 2>/dev/null || true
    sleep 0.05
  done
  wait "$job"
}

# check_paths FILE N EPOCHS: every photo path exactly once in each epoch's block of lines
check_paths() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import json, sys, collections
f, n, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
paths = [json.loads(l)["path"] for l in open(f)]
assert len(paths) == n * epochs, f"{len(paths)} lines, want {n * epochs}"
for e in range(epochs):
    c = collections.Counter(paths[e * n:(e + 1) * n])
    assert len(c) == n and set(c.values()) == {1}, f"epoch {e}: {len(c)} distinct paths, counts {collections.Counter(c.values())}"
print(f"paths check: {len(paths)} lines, each of {n} paths exactly once in each of {epochs} epochs")
PYEOF
}

# the 2x, 10x and 20x datasets: symlinks to every photo
for k in 2 10 20; do
  mkdir -p "$TMPD/x$k"
  for i in $(seq 1 "$k"); do for f in "$PHOTOS"/*.JPEG; do ln -s "$f" "$TMPD/x$k/$i-$(basename "$f")"; done; done
done
# a private copy of the photos for the touch test (the shared ones stay untouched)
mkdir -p "$TMPD/copy" && cp "$PHOTOS"/*.JPEG "$TMPD/copy/"

for r in $(seq 1 "$REPS"); do
  echo "== round $r/$REPS (load $(cut -d' ' -f1-3 /proc/loadavg))"
  # a. full resolution under a tight budget
  run "$r" a_fullres_256MiB bench/mem_fullres.yaml --set resources.memory=256MiB
  run "$r" a_fullres_512MiB bench/mem_fullres.yaml --set resources.memory=512MiB
  MEM_OUT=$TMPD/paths.$r run "$r" a_fullres_paths_256MiB bench/mem_fullres_paths.yaml --set resources.memory=256MiB
  check_paths "$TMPD/paths.$r/paths.jsonl" "$N" 2 | tee "$OUT/memory/paths_check.$r.txt"
  # the doubled budget again over 10 epochs, where the first touch of the
  # larger heap is a smaller part of the run
  sampled "$r" a_fullres_256MiB_e10 bench/mem_fullres.yaml --set resources.memory=256MiB --set epochs=10
  # the same 2000 samples from a 10x dataset, one epoch: where the budget
  # binds, RSS must not depend on the dataset's size
  PHOTOS=$TMPD/x10 sampled "$r" a_fullres_256MiB_x10 bench/mem_fullres.yaml --set resources.memory=256MiB --set epochs=1
  run "$r" a_fullres_512MiB_e10 bench/mem_fullres.yaml --set resources.memory=512MiB --set epochs=10
  # b. flat over epochs and dataset size
  run "$r" b_w1_epochs1 bench/w1.yaml --set epochs=1
  run "$r" b_w1_epochs2 bench/w1.yaml --set epochs=2
  sampled "$r" b_w1_epochs10 bench/w1.yaml --set epochs=10
  PHOTOS=$TMPD/x10 run "$r" b_w1_x10_epochs1 bench/w1.yaml --set epochs=1
  # W1's shuffle of 256 holds more than the 200 photos; from 2x up, every
  # dataset fills it
  PHOTOS=$TMPD/x2 run "$r" b_w1_x2_epochs1 bench/w1.yaml --set epochs=1
  PHOTOS=$TMPD/x20 sampled "$r" b_w1_x20_epochs1 bench/w1.yaml --set epochs=1
  # the same 4000 samples as 10 epochs of the 2x dataset: the 20x run differs
  # only in the dataset's size, not in the run's length
  PHOTOS=$TMPD/x2 sampled "$r" b_w1_x2_epochs10 bench/w1.yaml --set epochs=10
  # the same with a shuffle buffer smaller than one epoch (W1's 256 exceeds the
  # 200 photos, so the 1x runs hold fewer samples than the 10x run)
  run "$r" b_w1buf64_epochs1 bench/w1.yaml --set epochs=1 --set stages.shuffle.buffer=64
  run "$r" b_w1buf64_epochs10 bench/w1.yaml --set epochs=10 --set stages.shuffle.buffer=64
  PHOTOS=$TMPD/x10 run "$r" b_w1buf64_x10_epochs1 bench/w1.yaml --set epochs=1 --set stages.shuffle.buffer=64
  # c. cache: cold, then warm
  CACHE_DIR=$TMPD/cache.$r run "$r" c_cache_cold bench/cache_decode.yaml
  CACHE_DIR=$TMPD/cache.$r run "$r" c_cache_warm bench/cache_decode.yaml
  rm -rf "$TMPD/cache.$r"
done

# c, once more: what invalidates the cache (on the private copy)
echo "== cache invalidation"
export CACHE_DIR=$TMPD/cache.inv
PHOTOS=$TMPD/copy run 0 c_inv_cold bench/cache_decode.yaml
PHOTOS=$TMPD/copy run 0 c_inv_warm bench/cache_decode.yaml
PHOTOS=$TMPD/copy run 0 c_inv_set_resize192 bench/cache_decode.yaml \
  --set 'stages.decode.set.image=decode_image(read_file(path), 3) | resize(192, 192) | to_float()'
PHOTOS=$TMPD/copy run 0 c_inv_warm_again bench/cache_decode.yaml
touch "$(ls "$TMPD"/copy/*.JPEG | head -1)"
PHOTOS=$TMPD/copy run 0 c_inv_after_touch bench/cache_decode.yaml
PHOTOS=$TMPD/copy run 0 c_inv_warm_after_touch bench/cache_decode.yaml

"$PY" - "$log" "$OUT/memory.json" "$N" "$OUT/memory" <<'PYEOF'
import json, statistics, sys
log, out, n, outdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = {}
for line in open(log):
    f = line.rstrip("\n").split("\t")
    rows.setdefault(f[1], {})[f[0]] = dict(rss_mib=int(f[2]) / 1024, wall_s=float(f[3]), elapsed_s=float(f[4]),
        samples=json.loads(f[5]), peak_memory_mib=int(f[6]) / 2**20, budget_mib=int(f[7]) / 2**20, caches=json.loads(f[8]))
def st(xs): return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}
fmt = lambda s, p=1: f"{s['median']:.{p}f} ({s['min']:.{p}f}-{s['max']:.{p}f})"
reps = sorted(rows["a_fullres_256MiB"])
res = {"photos": n, "rounds": len(reps), "rows": rows, "checks": {}}
def over(row, r): d = rows[row][r]; return d["rss_mib"] - d["budget_mib"]
print(f"\n{'run':28s} {'peak RSS MiB':>22s} {'RSS - budget MiB':>20s} {'budget peak MiB':>20s} {'elapsed s':>20s} {'wall s':>20s}  sinks")
for row in rows:
    rs = sorted(rows[row])
    g = lambda k: st([rows[row][r][k] for r in rs])
    o = st([over(row, r) for r in rs])
    print(f"{row:28s} {fmt(g('rss_mib')):>22s} {fmt(o):>20s} {fmt(g('peak_memory_mib')):>20s} {fmt(g('elapsed_s'), 2):>20s} {fmt(g('wall_s'), 2):>20s}  {rows[row][rs[0]]['samples']}")
def check(name, fn, target, ok):
    s = st([fn(r) for r in reps]); s["target"] = target; s["met"] = all(ok(v) for v in s["values"])
    res["checks"][name] = s
    print(f"{name:64s} {fmt(s, 3):>26s}  {target:28s} {'MET' if s['met'] else 'MISSED'}")
print(f"\n{'check (per round)':64s} {'median (min-max)':>26s}  {'target':28s}")
check("a: RSS - budget, 256MiB (MiB)", lambda r: over("a_fullres_256MiB", r), "<= 150", lambda v: v <= 150)
check("a: RSS - budget, 512MiB (MiB)", lambda r: over("a_fullres_512MiB", r), "<= 150", lambda v: v <= 150)
check("a: RSS - budget, 256MiB + paths sink (MiB)", lambda r: over("a_fullres_paths_256MiB", r), "<= 150", lambda v: v <= 150)
check("a: elapsed 512MiB / elapsed 256MiB", lambda r: rows["a_fullres_512MiB"][r]["elapsed_s"] / rows["a_fullres_256MiB"][r]["elapsed_s"], "<= 1 (doubled budget faster)", lambda v: v <= 1)
check("a: elapsed 512MiB / elapsed 256MiB, 10 epochs", lambda r: rows["a_fullres_512MiB_e10"][r]["elapsed_s"] / rows["a_fullres_256MiB_e10"][r]["elapsed_s"], "<= 1 (doubled budget faster)", lambda v: v <= 1)
check("a: sink samples / (photos x epochs)", lambda r: min(v for row in ("a_fullres_256MiB", "a_fullres_512MiB", "a_fullres_paths_256MiB") for v in rows[row][r]["samples"].values()) / (2 * n), "== 1", lambda v: v == 1)
check("b: (budget binds) fullres 256MiB peak RSS epochs 10 / epochs 2", lambda r: rows["a_fullres_256MiB_e10"][r]["rss_mib"] / rows["a_fullres_256MiB"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: (budget binds) fullres 256MiB peak RSS 10x dataset / 1x, 2000 samples each", lambda r: rows["a_fullres_256MiB_x10"][r]["rss_mib"] / rows["a_fullres_256MiB_e10"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: W1 peak RSS 20x dataset x 1 epoch / 2x x 10 epochs (4000 samples each)", lambda r: rows["b_w1_x20_epochs1"][r]["rss_mib"] / rows["b_w1_x2_epochs10"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: peak RSS epochs 10 / epochs 1", lambda r: rows["b_w1_epochs10"][r]["rss_mib"] / rows["b_w1_epochs1"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: peak RSS 10x dataset / 1x", lambda r: rows["b_w1_x10_epochs1"][r]["rss_mib"] / rows["b_w1_epochs1"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: peak RSS epochs 10 / epochs 2", lambda r: rows["b_w1_epochs10"][r]["rss_mib"] / rows["b_w1_epochs2"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: peak RSS 20x dataset / 2x (both fill the shuffle)", lambda r: rows["b_w1_x20_epochs1"][r]["rss_mib"] / rows["b_w1_x2_epochs1"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: (shuffle 64) peak RSS epochs 10 / epochs 1", lambda r: rows["b_w1buf64_epochs10"][r]["rss_mib"] / rows["b_w1buf64_epochs1"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: (shuffle 64) peak RSS 10x dataset / 1x", lambda r: rows["b_w1buf64_x10_epochs1"][r]["rss_mib"] / rows["b_w1buf64_epochs1"][r]["rss_mib"], "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
# RSS over time within one run: after the first tenth (the first of 10
# epochs, the buffers filling), the highest RSS of the last half of the run
# against that of the tenth to the half: growth from buffer churn would
# show as a later, higher band.
def bands(row, r):
    pts = [tuple(map(float, l.split())) for l in open(f"{outdir}/{row}.{r}.rss") if l.strip()]
    end = pts[-1][0]
    early = [k for t, k in pts if 0.1 * end <= t < 0.5 * end]
    late = [k for t, k in pts if t >= 0.5 * end]
    return max(early) / 1024, max(late) / 1024
check("b: W1 10 epochs, max RSS last half / tenth..half of the run", lambda r: (lambda e, l: l / e)(*bands("b_w1_epochs10", r)), "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: W1 20x dataset, max RSS last half / tenth..half of the run", lambda r: (lambda e, l: l / e)(*bands("b_w1_x20_epochs1", r)), "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("b: fullres 256MiB 10 epochs, max RSS last half / tenth..half", lambda r: (lambda e, l: l / e)(*bands("a_fullres_256MiB_e10", r)), "0.9-1.1", lambda v: 0.9 <= v <= 1.1)
check("c: cache speedup, report elapsed_s cold / warm", lambda r: rows["c_cache_cold"][r]["elapsed_s"] / rows["c_cache_warm"][r]["elapsed_s"], ">= 5", lambda v: v >= 5)
check("c: cache speedup, process wall time cold / warm", lambda r: rows["c_cache_cold"][r]["wall_s"] / rows["c_cache_warm"][r]["wall_s"], ">= 5 (incl. process start)", lambda v: v >= 5)
print("\ncache invalidation (one pass on a private copy of the photos):")
for row in ("c_inv_cold", "c_inv_warm", "c_inv_set_resize192", "c_inv_warm_again", "c_inv_after_touch", "c_inv_warm_after_touch"):
    d = rows[row]["0"]
    print(f"  {row:26s} elapsed {d['elapsed_s']:.3f}s  caches {json.dumps(d['caches'])}")
inv = {row: rows[row]["0"]["caches"]["cache"] for row in rows if row.startswith("c_inv")}
res["cache_invalidation_ok"] = (inv["c_inv_warm"]["from_cache"] == n and inv["c_inv_set_resize192"]["written"] == n
    and inv["c_inv_after_touch"]["written"] == n and inv["c_inv_warm_after_touch"]["from_cache"] == n)
print(f"  recompute after --set and after touch, replay otherwise: {'OK' if res['cache_invalidation_ok'] else 'FAILED'}")
json.dump(res, open(out, "w"), indent=1)
print(f"\nwrote {out}")
PYEOF
