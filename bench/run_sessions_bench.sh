#!/usr/bin/env bash
# The runs behind RESULTS-sessions.md: soulwire and the reference interleaved run by run, so
# both see the same machine load. Per-run JSON goes to bench/out/.
set -u
cd "$(dirname "$0")/.."
PY=${REF_PYTHON:-python3}          # any Python >= 3.11 runs the (stdlib-only) harness
SW=.venv/bin/python
K="--engine kimi --cmd ${KIMI_CMD:-/work/ref/kimi-wrapper}"
O=bench/out
mkdir -p $O
for i in 1 2 3 4 5; do
  $SW bench/sessions_bench.py replay --events 100000 --repeat 1 --json $O/r-sw-$i.json
  $PY bench/sessions_bench.py replay $K --events 100000 --repeat 1 --json $O/r-k-$i.json
done
for n in 10000 300000; do
  $SW bench/sessions_bench.py replay --events $n --repeat 1 --json $O/rs-sw-$n.json
done
$PY bench/sessions_bench.py replay $K --events 10000 --repeat 1 --json $O/rs-k-10000.json
for i in 1 2 3 4 5; do
  $SW bench/sessions_bench.py resume --context-mb 50 --repeat 1 --json $O/s-sw-$i.json
  $SW bench/sessions_bench.py resume --context-mb 50 --repeat 1 --external-tool --json $O/s-swx-$i.json
  $PY bench/sessions_bench.py resume $K --context-mb 50 --repeat 1 --json $O/s-k-$i.json
done
for i in 1 2 3; do
  $SW bench/sessions_bench.py resume --context-mb 50 --shape media --repeat 1 --json $O/m-sw-$i.json
  $SW bench/sessions_bench.py resume --context-mb 50 --shape media --external-tool --repeat 1 --json $O/m-swx-$i.json
  $PY bench/sessions_bench.py resume $K --context-mb 50 --shape media --repeat 1 --json $O/m-k-$i.json
done
