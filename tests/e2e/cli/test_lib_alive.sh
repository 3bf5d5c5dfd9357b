#!/bin/bash
# test_lib_alive.sh - lib.sh's _alive, which every wait_exit and
# expect_alive relies on: a running process is alive; a zombie (exited,
# not reaped by its parent) and a reaped pid are not.  (Its earlier form,
# kill -0 then ps in a command substitution, called a target that bash
# reaped between the two "alive": a false "still running after
# 300s".)  No tbpf, no root.
# timeout: 60
. "$(dirname "$0")/../lib/lib.sh"

sleep 30 &
run=$!
_alive "$run" || fail "a running sleep is not alive"
log "running pid $run: alive"

# a zombie: python forks a child that exits at once and does not reap it
python3 -c 'import os, sys, time
p = os.fork()
if p == 0:
    os._exit(0)
print(p, flush=True)
time.sleep(30)' > "$T/zpid" &
parent=$!
for ((i = 0; i < 100; i++)); do [ -s "$T/zpid" ] && break; sleep 0.05; done
z=$(cat "$T/zpid")
for ((i = 0; i < 100; i++)); do [[ $(cut -d' ' -f3 "/proc/$z/stat" 2>/dev/null) == Z ]] && break; sleep 0.05; done
[[ $(cut -d' ' -f3 "/proc/$z/stat") == Z ]] || fail "pid $z did not become a zombie"
_alive "$z" && fail "zombie $z counted as alive"
log "zombie pid $z: not alive"

kill "$run"
wait "$run" 2>/dev/null || true
_alive "$run" && fail "reaped pid $run counted as alive"
log "reaped pid $run: not alive"
_alive "" && fail "an empty pid counted as alive"
kill "$parent"
wait "$parent" 2>/dev/null || true

# wait_exit on a process that exits in 0.2 s: passes, in well under its timeout
sleep 0.2 &
_set short_pid $!
SECONDS=0
wait_exit short 30
[ "$SECONDS" -le 5 ] || fail "wait_exit took ${SECONDS}s for a 0.2 s process"
log "OK"
