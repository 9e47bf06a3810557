#!/usr/bin/env bash
# GPU work longer than one device call (10 minutes), across calls made back to back while the
# machine stays warm (30 s). Every call runs the same line:
#
#   BG_WAIT_S=570 bash benchmarks/gpu_background.sh 'CASES=... bash benchmarks/gpu_e2e_credit.sh; ...'
#
# The first call starts the command in a process session of its own (setsid: it outlives the call);
# every call then waits until the command ends or BG_WAIT_S passes, and packs what the command has
# written under $BG (default /tmp/bg; the command sees it as $BG) into $OUT/bg.tar.gz (files over
# 4 MB left out: traces), with its log and whether it is done. A fresh machine (the last one went
# back) has no $BG/pid and starts the command again.
set -u
OUT=${OUT:-/tmp/apex-out}; BG=${BG:-/tmp/bg}; export BG; mkdir -p "$OUT" "$BG"
if [ ! -f "$BG/pid" ]; then
  echo "starting at $(date -u +%H:%M:%S): $1" | tee -a "$BG/driver.txt"
  setsid bash -c "$1; echo \$? > '$BG/rc'" > "$BG/stdout.txt" 2>&1 < /dev/null &
  echo $! > "$BG/pid"
else
  echo "already running since $(stat -c %y "$BG/pid"), warm machine" | tee -a "$BG/driver.txt"
fi
END=$(( $(date +%s) + ${BG_WAIT_S:-570} ))
while [ ! -f "$BG/rc" ] && [ "$(date +%s)" -lt "$END" ]; do sleep 5; done
if [ -f "$BG/rc" ]; then echo "done, rc $(cat "$BG/rc")"; else echo "still running at $(date -u +%H:%M:%S)"; fi
(cd "$BG" && find . -type f -size -4M -print0 | tar --null -czf "$OUT/bg.tar.gz" -T -)
tail -n 60 "$BG/stdout.txt"
