#!/bin/bash
# Wait until run_h200.sh is done or $1 seconds pass, then pack $OUTROOT into $OUT (≤ 16 MiB a file).
OUTROOT=${OUTROOT:-/root/out}
end=$((SECONDS + ${1:-500}))
while [ ! -f "$OUTROOT/DONE" ] && [ $SECONDS -lt $end ]; do sleep 5; done
cat "$OUTROOT/STATUS" 2>/dev/null
cd "$OUTROOT" || exit 1
tar czf "$OUT/logs.tgz" --exclude='*.jsonl' --exclude=known --exclude=parallel --exclude=side . 2>/dev/null
for d in known parallel side; do
  [ -d "$d" ] && tar czf "$OUT/$d.tgz" "$d"
  [ -f "$OUT/$d.tgz" ] && [ $(stat -c %s "$OUT/$d.tgz") -gt 15000000 ] && tar czf "$OUT/$d.tgz" --exclude=requests.jsonl "$d"
done
ls -la "$OUT"
[ -f "$OUTROOT/DONE" ] && echo FINISHED || echo STILL-RUNNING
