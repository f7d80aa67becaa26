#!/bin/bash
# Wait until run_h200.sh is done or $1 seconds pass, then pack $OUTROOT into $OUT: logs.tgz plus one
# tgz per run directory (the device tool returns at most 8 files of ≤ 16 MiB; requests.jsonl is left
# out of a run's archive only when it would not fit).
OUTROOT=${OUTROOT:-/root/res}  # not $OUT: the device tool empties it before each call
end=$((SECONDS + ${1:-500}))
while [ ! -f "$OUTROOT/DONE" ] && [ $SECONDS -lt $end ]; do sleep 5; done
cat "$OUTROOT/STATUS" 2>/dev/null
cd "$OUTROOT" || exit 1
runs=$(for d in */; do [ -f "$d/meta.json" ] && echo "${d%/}"; done | head -7)
tar czf "$OUT/logs.tgz" $(for d in $runs; do echo --exclude="./$d"; done) --exclude='*.jsonl' . 2>/dev/null
for d in $runs; do
  tar czf "$OUT/$d.tgz" "$d"
  [ $(stat -c %s "$OUT/$d.tgz") -gt 15000000 ] && tar czf "$OUT/$d.tgz" --exclude=requests.jsonl "$d"
done
ls -la "$OUT"
[ -f "$OUTROOT/DONE" ] && echo FINISHED || echo STILL-RUNNING
