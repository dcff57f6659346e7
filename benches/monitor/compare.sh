#!/bin/bash
# The same-session comparison behind BENCHMARKS.md "monitor" (issue 8): the Go kubelet-like prober,
# `probelet bench` with both close styles, and the minimal tokio client, alternated, 3 rounds at
# 5,000 and 10,000 HTTP targets; then 20,000 and 30,000 (one and two threads) and 100,000 TCP targets.
#
# Needs: nginx serving 127.0.0.1:18080/healthz with ../shared/bench/nginx.conf (its worker on CPU 0),
# `cargo build --release`, and the Go prober built from ../shared/bench/kubelet-like
# (see ../shared/bench/README.md). Writes one JSON line per run to $OUT.
set -u
P=${PROBELET:-target/release/probelet}
G=${KUBELET_LIKE:-/tmp/kubelet-like}
URL=${URL:-http://127.0.0.1:18080/healthz}
OUT=${OUT:-monitor-compare.jsonl}
one() { # label, command...
  local label=$1; shift
  local load json
  load=$(cut -d' ' -f1 /proc/loadavg)
  json=$("$@" 2>/dev/null | tail -1)
  echo "{\"label\":\"$label\",\"load\":$load,\"r\":${json:-null}}" >> "$OUT"
  sleep 3
}
for round in 1 2 3; do
  for n in 5000 10000; do
    one "go-$n" taskset -c 1 env GOMAXPROCS=1 "$G" -n $n -period 1s -duration 20s -warmup 3s -mode http -url "$URL"
    one "reset-$n" taskset -c 1 "$P" bench -n $n --period 1 --url "$URL"
    one "linger-$n" taskset -c 1 "$P" bench -n $n --period 1 --url "$URL" --close linger
    one "minimal-$n" taskset -c 1 "$P" bench -n $n --period 1 --url "$URL" --baseline
  done
done
for round in 1 2; do
  one reset-30000-t1 taskset -c 1 "$P" bench -n 30000 --period 1 --url "$URL"
  one reset-30000-t2 "$P" bench -n 30000 --period 1 --url "$URL" --threads 2
  one reset-20000-t1 taskset -c 1 "$P" bench -n 20000 --period 1 --url "$URL"
done
ADDR=${URL#http://}; ADDR=${ADDR%%/*}
one tcp-reset-100000 taskset -c 1 "$P" bench --mode tcp -n 100000 --period 10 --duration 40s --warmup 12s --addr "$ADDR"
one tcp-linger-100000 taskset -c 1 "$P" bench --mode tcp -n 100000 --period 10 --duration 40s --warmup 12s --addr "$ADDR" --close linger
