#!/usr/bin/env bash
# W1 throughput: piperun vs PyTorch DataLoader(num_workers=2), and piperun vs
# the single-core libjpeg-turbo decode+resize rate × cores (and vs a bare loop
# of W1's own per-image work on 1 and 2 goroutines, with no pipeline).
#
#   bash bench/run_w1.sh [PHOTO_DIR] [REPS]
#
# PHOTO_DIR defaults to ../shared/data/photos/imagenet (relative to the repo
# root); REPS (default 3) rounds run back to back, each round running every
# row once, interleaved, so that ratios compare like with like on a shared
# machine. Prints a table (median and range over the rounds) and writes
# bench/out/w1.json. Needs Go, gcc, /usr/bin/time and Debian's python3-torch,
# python3-torchvision, python3-pil (run by /usr/bin/python3). No network.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PHOTOS=$(realpath "${1:-../shared/data/photos/imagenet}")
REPS=${2:-3}
PY=${PY:-/usr/bin/python3}
OUT=$ROOT/bench/out
mkdir -p "$OUT/w1"
export PHOTOS

[ -x /usr/bin/time ] || { echo "need /usr/bin/time (apt-get install -y time)" >&2; exit 2; }
"$PY" -c 'import torch, torchvision, PIL' || { echo "need python3-torch python3-torchvision python3-pil for $PY" >&2; exit 2; }
n=$(find "$PHOTOS" -maxdepth 1 -name '*.JPEG' | wc -l)
[ "$n" -gt 0 ] || { echo "no *.JPEG in $PHOTOS" >&2; exit 2; }

echo "== build (once)"
go build -o "$OUT/piperun" ./cmd/piperun
go test -c -o "$OUT/imageops.test" ./imageops
go test -c -o "$OUT/bench.test" ./bench

NCPU=$(nproc)
TO=300   # seconds; every command is bounded
log=$OUT/w1/rows.tsv
: > "$log"   # round  row  images_per_s  elapsed_s  cpu_s(user+sys)  images  others_cores
# CPU-seconds the whole machine spent busy (user+nice+system+irq+softirq+steal);
# minus our process's CPU over the row's wall time = cores taken by others.
busy() { awk '/^cpu /{printf "%.2f\n", ($2+$3+$4+$7+$8+$9)/100}' /proc/stat; }
now() { date +%s.%N; }
others() { # busy0 t0 our_cpu_s -> cores used by other processes meanwhile
  awk -v b0="$1" -v t0="$2" -v c="$3" -v b1="$(busy)" -v t1="$(now)" 'BEGIN{printf "%.2f", (b1-b0-c)/(t1-t0)}'
}

# Every row starts with the photos in the page cache. This VM's kernel
# pages out file cache it sees idle (DAMON), and a row that started with
# 1-4 MB of the 22 MB read back from disk ran up to 12 % slower, its
# decoders idle while they waited (bench/RESULTS.md, run AJ); the reference
# loops read the photos into memory before they time anything.
warm() { cat "$PHOTOS"/*.JPEG >/dev/null; }

piperun_row() { # round row spec [apply flags]
  local r=$1 row=$2 spec=$3 rep=$OUT/w1/$2.$1.json tf=$OUT/w1/$2.$1.time b0 t0; shift 3
  warm
  b0=$(busy); t0=$(now)
  timeout $TO /usr/bin/time -f '%U %S' -o "$tf" "$OUT/piperun" apply "bench/$spec" --progress never --log-level warn --report "$rep" "$@" >/dev/null
  local o; o=$(others "$b0" "$t0" "$(awk '{print $(NF-1)+$NF}' "$tf")")
  "$PY" - "$r" "$row" "$rep" "$tf" "$o" >>"$log" <<'PYEOF'
import json, sys
r, row, rep, tf, o = sys.argv[1:]
j = json.load(open(rep)); u, s = map(float, open(tf).read().split()[-2:])
n = sum(v["samples"] for v in j["sinks"].values())
assert j["ok"], rep
print(f"{r}\t{row}\t{n / j['elapsed_s']:.1f}\t{j['elapsed_s']:.3f}\t{u + s:.2f}\t{n}\t{o}")
PYEOF
}

torch_row() { # round row [--augment]
  local r=$1 row=$2 tf=$OUT/w1/$2.$1.time b0 t0; shift 2
  warm
  b0=$(busy); t0=$(now)
  timeout $TO /usr/bin/time -f '%U %S' -o "$tf" "$PY" bench/torch_w1.py "$PHOTOS" --workers 2 --epochs 2 "$@" >"$OUT/w1/$row.$r.json"
  local o; o=$(others "$b0" "$t0" "$(awk '{print $(NF-1)+$NF}' "$tf")")
  "$PY" - "$r" "$row" "$OUT/w1/$row.$r.json" "$tf" "$o" >>"$log" <<'PYEOF'
import json, sys
r, row, rep, tf, o = sys.argv[1:]
j = json.load(open(rep)); u, s = map(float, open(tf).read().split()[-2:])
print(f"{r}\t{row}\t{j['images_per_s']:.1f}\t{j['elapsed_s']:.3f}\t{u + s:.2f}\t{j['images']}\t{o}")
PYEOF
}

micro_rows() { # round: single-core decode+resize reference rates
  local r=$1
  (cd bench && timeout $TO "$OUT/bench.test" -test.run '^$' -test.bench 'DecodeResize224NoFloat' -test.cpu 1 -test.benchtime 3x) >"$OUT/w1/micro_bench.$r.txt"
  (cd imageops && timeout $TO "$OUT/imageops.test" -test.run '^$' -test.bench 'DecodeResize224' -test.cpu 1 -test.benchtime 3x) >"$OUT/w1/micro_imageops.$r.txt"
  cat "$OUT/w1/micro_bench.$r.txt" "$OUT/w1/micro_imageops.$r.txt" | awk -v r="$r" '
    /^BenchmarkDecodeResize224/ { name=$1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
      for (i = 2; i < NF; i++) if ($(i+1) == "images/s") printf "%s\tmicro:%s\t%s\t\t\t\t\n", r, name, $i }' >>"$log"
  # W1's own per-image work (read from memory, decode, resize, to_float) as a
  # bare loop on 1 and 2 goroutines of one process: what the cores give for
  # that work with no pipeline around it
  (cd bench && timeout $TO "$OUT/bench.test" -test.run '^$' -test.bench 'DecodeResizeFloatInProcess' -test.benchtime 3x) >"$OUT/w1/micro_inproc.$r.txt"
  awk -v r="$r" '/^BenchmarkDecodeResizeFloatInProcess/ { name=$1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
      for (i = 2; i < NF; i++) if ($(i+1) == "images/s") printf "%s\tmicro:%s\t%s\t\t\t\t\n", r, name, $i }' "$OUT/w1/micro_inproc.$r.txt" >>"$log"
  # the same with PIL (libjpeg-turbo decode, PIL's resize) on one core: the
  # reference the W1 target quotes (about 340 images/s per core)
  local d
  for d in "" --draft; do
    timeout $TO "$PY" bench/pil_1core.py "$PHOTOS" $d >"$OUT/w1/micro_pil$d.$r.json"
    "$PY" -c 'import json,sys; print("%s\tmicro:pil%s\t%.1f\t\t\t\t" % (sys.argv[2], sys.argv[3], json.load(open(sys.argv[1]))["images_per_s"]))' \
      "$OUT/w1/micro_pil$d.$r.json" "$r" "$d" >>"$log"
  done
  # what the first write to freshly mapped memory costs here (ms per MiB):
  # every buffer W1 holds pays it once per run, a warm loop never does
  (cd bench && timeout $TO "$OUT/bench.test" -test.run '^$' -test.bench 'FirstTouch' -test.benchtime 4x) >"$OUT/w1/micro_touch.$r.txt"
  awk -v r="$r" '/^BenchmarkFirstTouch/ { name=$1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
      for (i = 2; i < NF; i++) if ($(i+1) == "ms/MiB") printf "%s\tmicro:%s\t%s\t\t\t\t\n", r, name, $i }' "$OUT/w1/micro_touch.$r.txt" >>"$log"
  # the same single-core benchmark as NCPU concurrent processes: what all
  # cores give together right now (the machine is shared)
  local i
  for i in $(seq 1 "$NCPU"); do
    (cd bench && timeout $TO "$OUT/bench.test" -test.run '^$' -test.bench 'DecodeResize224NoFloat/(dctscale|dct2x|full)$' -test.cpu 1 -test.benchtime 3x) >"$OUT/w1/micro_conc.$r.$i.txt" &
  done
  wait
  cat "$OUT/w1"/micro_conc."$r".*.txt | awk -v r="$r" '
    /^BenchmarkDecodeResize224/ { name=$1; sub(/^Benchmark/, "", name); sub(/-[0-9]+$/, "", name)
      for (i = 2; i < NF; i++) if ($(i+1) == "images/s") sum[name] += $i }
    END { for (n in sum) printf "%s\tmicro_allcores:%s\t%.1f\t\t\t\t\n", r, n, sum[n] }' >>"$log"
}

# The same photos listed 10 times (symlinks): W1's 2 epochs over 2000
# entries last about 3 s, so the process's one-time start (a first write to
# about 45 MiB of fresh memory, which this VM's host may have to fault in
# again) weighs a tenth of what it does in the 0.4 s run over 200.
X10=$OUT/w1/photos10x
rm -rf "$X10"; mkdir -p "$X10"
for i in 0 1 2 3 4 5 6 7 8 9; do
  for f in "$PHOTOS"/*.JPEG; do ln -s "$f" "$X10/c${i}_$(basename "$f")"; done
done

for r in $(seq 1 "$REPS"); do
  echo "== round $r/$REPS (load $(cut -d' ' -f1-3 /proc/loadavg))"
  piperun_row "$r" piperun_w1 w1.yaml
  PHOTOS=$X10 piperun_row "$r" piperun_w1_10x w1.yaml
  # W1 for 10 epochs: with the 2-epoch row, the rate of epochs 3-10 alone,
  # once the run's buffers exist (see "steady" below)
  piperun_row "$r" piperun_w1_e10 w1.yaml --set epochs=10
  # W1 as written: the shuffle stays behind the decoding map (the planner
  # otherwise moves it above, where it holds paths, not images)
  piperun_row "$r" piperun_w1_as_written w1.yaml --set optimize=false
  torch_row   "$r" torch_w1
  piperun_row "$r" piperun_w1_unfused w1_unfused.yaml
  piperun_row "$r" piperun_w1_rrc w1_rrc.yaml
  torch_row   "$r" torch_w1_rrc --augment
  micro_rows  "$r"
done

"$PY" - "$log" "$OUT/w1.json" "$NCPU" "$PHOTOS" <<'PYEOF'
import json, statistics, sys, time
log, out, ncpu, photos = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rows = {}  # row -> round -> dict
for line in open(log):
    f = line.rstrip("\n").split("\t")
    d = {"ips": float(f[2])}
    if f[3]: d.update(elapsed=float(f[3]), cpu=float(f[4]), images=int(f[5]), others=float(f[6]))
    rows.setdefault(f[1], {})[f[0]] = d
rounds = sorted(rows["piperun_w1"])
def stat(xs): return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}
def per_round(fn): return stat([fn(r) for r in rounds])
ips = lambda row: (lambda r: rows[row][r]["ips"])
cpu_ips = lambda row: (lambda r: rows[row][r]["images"] / rows[row][r]["cpu"])
ratio = lambda a, b, k=1: (lambda r: rows[a][r]["ips"] / (k * rows[b][r]["ips"]))
# W1's rate once warm: the images of epochs 3-10 over the time the 10-epoch
# run took beyond the 2-epoch one (both start cold; the difference is steady
# running). "warm-up" is what the 2-epoch run took beyond 400 images at that
# rate: first touches of its buffers, the pipeline's fill and final drain.
steady = lambda r: (rows["piperun_w1_e10"][r]["images"] - rows["piperun_w1"][r]["images"]) / (rows["piperun_w1_e10"][r]["elapsed"] - rows["piperun_w1"][r]["elapsed"])
warmup = lambda r: rows["piperun_w1"][r]["elapsed"] - rows["piperun_w1"][r]["images"] / steady(r)
res = {"photos": photos, "cores": ncpu, "rounds": len(rounds), "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
       "rates_images_per_s": {k: per_round(ips(k)) for k in rows if "FirstTouch" not in k},
       "images_per_cpu_s": {k: per_round(cpu_ips(k)) for k in rows if "cpu" in rows[k][rounds[0]]},
       "elapsed_s": {k: per_round(lambda r, k=k: rows[k][r]["elapsed"]) for k in rows if "elapsed" in rows[k][rounds[0]]}}
ref = "micro:DecodeResize224NoFloat/dctscale"; reff = "micro:DecodeResize224NoFloat/full"; ref2 = "micro:DecodeResize224NoFloat/dct2x"
checks = [
  ("W1 piperun / torch", ratio("piperun_w1", "torch_w1"), 1.9),
  ("W1-unfused piperun / torch", ratio("piperun_w1_unfused", "torch_w1"), 1.9),
  ("W1 as written (optimize: false) / torch", ratio("piperun_w1_as_written", "torch_w1"), 1.9),
  ("W1 / W1 as written (the shuffle moved above the map)", ratio("piperun_w1", "piperun_w1_as_written"), None),
  ("W1-RRC piperun / torch --augment", ratio("piperun_w1_rrc", "torch_w1_rrc"), 2.2),
  (f"W1 piperun / ({ncpu} x 1-core turbo decode+resize, dctscale)", ratio("piperun_w1", ref, ncpu), 0.85),
  (f"W1 piperun / ({ncpu} x 1-core turbo decode+resize, dct2x as W1 decodes)", ratio("piperun_w1", ref2, ncpu), None),
  (f"W1-unfused piperun / ({ncpu} x 1-core turbo decode+resize, full decode)", ratio("piperun_w1_unfused", reff, ncpu), 0.85),
  (f"W1 piperun / ({ncpu} x 1-core PIL decode+resize, libjpeg-turbo)", ratio("piperun_w1", "micro:pil", ncpu), 0.85),
  (f"W1 piperun / ({ncpu} x 1 goroutine of W1's per-image work: decode, resize, to_float)", ratio("piperun_w1", "micro:DecodeResizeFloatInProcess/goroutines=1", ncpu), None),
  ("W1 piperun / (the same work, bare loop on 2 goroutines of one process)", ratio("piperun_w1", "micro:DecodeResizeFloatInProcess/goroutines=2"), None),
  (f"W1 piperun / ({ncpu} x 1-core PIL decode+resize, draft to 2x)", ratio("piperun_w1", "micro:pil--draft", ncpu), None),
  (f"W1 over the photos listed 10 times (2000 entries) / ({ncpu} x 1-core turbo decode+resize, dctscale)", ratio("piperun_w1_10x", ref, ncpu), None),
  (f"W1 over the photos listed 10 times (2000 entries) / ({ncpu} x 1-core turbo decode+resize, dct2x as W1 decodes)", ratio("piperun_w1_10x", ref2, ncpu), None),
  (f"W1 epochs 3-10 (steady) / ({ncpu} x 1-core turbo decode+resize, dctscale)", lambda r: steady(r) / (ncpu * rows[ref][r]["ips"]), None),
  (f"W1 epochs 3-10 (steady) / ({ncpu} x 1-core turbo decode+resize, dct2x as W1 decodes)", lambda r: steady(r) / (ncpu * rows[ref2][r]["ips"]), None),
  ("W1 epochs 3-10 (steady), images/s", steady, None),
  ("W1 2-epoch run: seconds beyond 400 images at the steady rate (warm-up)", warmup, None),
  ("W1 2-epoch run: warm-up share of elapsed", lambda r: warmup(r) / rows["piperun_w1"][r]["elapsed"], None),
  ("first write to fresh memory, ms per MiB, transparent huge pages", ips("micro:FirstTouch/huge"), None),
  ("first write to fresh memory, ms per MiB, 4 KiB pages", ips("micro:FirstTouch/4k"), None),
  (f"W1 piperun / ({ncpu} concurrent 1-core dctscale benchmarks, summed)", ratio("piperun_w1", "micro_allcores:" + ref[6:]), 0.85),
  (f"W1-unfused piperun / ({ncpu} concurrent 1-core full-decode benchmarks, summed)", ratio("piperun_w1_unfused", "micro_allcores:" + reff[6:]), 0.85),
  ("W1 piperun images per CPU-s / 1-core dctscale rate", lambda r: rows["piperun_w1"][r]["images"] / rows["piperun_w1"][r]["cpu"] / rows[ref][r]["ips"], None),
  ("W1 piperun cores used (cpu_s / elapsed_s)", lambda r: rows["piperun_w1"][r]["cpu"] / rows["piperun_w1"][r]["elapsed"], None),
  ("torch W1 cores used (cpu_s incl. python/torch import / elapsed_s)", lambda r: rows["torch_w1"][r]["cpu"] / rows["torch_w1"][r]["elapsed"], None),
  ("cores busy with other processes during piperun W1", lambda r: rows["piperun_w1"][r]["others"], None),
  ("cores busy with other processes during torch W1", lambda r: rows["torch_w1"][r]["others"], None),
]
res["ratios"] = {}
fmt = lambda s: f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"
print(f"\nW1 on {photos}: {len(rounds)} rounds, median (min-max); {ncpu} cores")
print(f"{'row':40s} {'images/s':>22s} {'images per CPU-s':>22s}")
for k in res["rates_images_per_s"]:
    s = res["rates_images_per_s"][k]; c = res["images_per_cpu_s"].get(k)
    print(f"{k:40s} {fmt(s):>22s} {fmt(c) if c else '':>22s}")
print(f"\n{'ratio':72s} {'value':>18s} target")
for name, fn, target in checks:
    s = per_round(fn); s["target"] = target
    s["met"] = None if target is None else s["median"] >= target
    res["ratios"][name] = s
    t = "" if target is None else f">= {target}  {'MET' if s['met'] else 'MISSED'}"
    print(f"{name:72s} {fmt(s):>18s} {t}")
json.dump(res, open(out, "w"), indent=1)
print(f"\nwrote {out}")
PYEOF
