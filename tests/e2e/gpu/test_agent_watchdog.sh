#!/bin/bash
# test_agent_watchdog.sh - the CUPTI agent releases CUPTI when tbpf goes:
# after SIGKILL of tbpf, and after a normal stop, the target
# holds no CUPTI subscription and no activity kind stays enabled, and the
# job finishes with its unprofiled result.  Both ways in: `--inject` on a
# running process (uprobe mode, torch 1.13; --inproc --inject, torch
# 2.8, whose wheel maps Kineto's libcupti 12) and `tbpf run` (the driver
# loads the agent through CUDA_INJECTION64_PATH; also `tbpf run --inproc
# --inject`), and `tbpf daemon --inproc --inject` (SIGKILL and SIGTERM).
# With --inproc the RecordFunction agent's control block (inproc_state.py,
# read from the target's memory) must say "orphaned" after the SIGKILL too.
#
# The watch is the owner channel (a pipe whose only write end tbpf holds),
# not tbpf's pid: the ns cases run the job in its own pid
# namespace (`unshare --pid --fork --mount-proc`, a containerized job) and
# tbpf from the host, where tbpf's pid means nothing to the job; CUPTI and
# the callbacks must be released all the same, and a second tbpf must get
# a fresh channel.
#
# No GPU here: the fake libcuda/libcupti (tests/native/cupti/fake_cuda.c,
# FAKE_CUPTI_LAUNCHES=1) stands in for the driver and CUPTI, and with
# FAKE_CUPTI_STATE=FILE it writes what is switched on after every
# subscribe, unsubscribe, enable, disable and flush: that line, written by
# the fake CUPTI inside the target, is what is checked, not anything tbpf
# or the agent reports.  The real CUPTI's behaviour on cuptiUnsubscribe /
# cuptiActivityDisable is only verifiable on a GPU.
# timeout: 600
source "$(dirname "$0")/../lib/lib.sh"
source "$(dirname "$0")/../lib/fake_gpu_lib.sh"
need_root
need_tbpf
need_torch "$PY1"
need_fake_cuda
ALL=0x436   # bits 1 2 4 5 10: MEMCPY MEMSET DRIVER RUNTIME CONCURRENT_KERNEL (cupti_activity.h)
# the jobs run until $T/TAG.done exists; their result is then compared
# with an unprofiled run of the same number of iterations
LONG=(--iters 1000 --conv 1 --head 1)
BOUND_MS=3000   # the agent looks every 100 ms; the kernel first tears down the killed tbpf (its BPF, uprobes)

# mkpy TAG V [NS]: $T/py_TAG, torch V's interpreter with the fake driver
# (exec: the same pid) writing its CUPTI state to $T/TAG.state; NS=ns: in a
# new pid namespace (the interpreter is then the child of that pid)
mkpy() {
	fake_py "$T/py_$1" "$2" ${3:-} FAKE_CUPTI_STATE="$T/$1.state"
}
mkpy ref1 1
mkpy ref2 2

state() { cat "$1" 2> /dev/null; }
# wait_state FILE REGEX SECONDS: until the fake's line matches
wait_state() {
	local i
	for ((i = 0; i < $3 * 100; i++)); do
		[[ $(state "$1") =~ $2 ]] && return 0
		sleep 0.01
	done
	return 1
}
# released FILE LABEL T0_NS: no subscriber, nothing enabled, within BOUND_MS of T0
released() {
	local f=$1 label=$2 t0=$3 ms
	wait_state "$f" "^subscribers=0 enabled=0x0 flushes=[0-9]+ unsubscribes=1$" $((BOUND_MS / 1000 + 1)) ||
		fail "$label: CUPTI not released: fake CUPTI says '$(state "$f")'"
	[[ $(state "$f") =~ flushes=([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -gt "${FLUSHES:-0}" ] ||
		fail "$label: no cuptiActivityFlushAll at the release: '$(state "$f")' (flushes before: $FLUSHES)"
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ $ms -le $BOUND_MS ] || fail "$label: CUPTI released only after $ms ms (bound $BOUND_MS)"
	log "$label: released after $ms ms: $(state "$f")"
}
active() {   # active FILE LABEL: subscribed, all five kinds on
	wait_state "$1" "^subscribers=1 enabled=$ALL " 20 ||
		fail "$2: the agent never turned CUPTI on: '$(state "$1")'"
	[[ $(state "$1") =~ flushes=([0-9]+) ]] && FLUSHES=${BASH_REMATCH[1]}
	log "$2: active: $(state "$1")"
}
thread_gone() {   # thread_gone PID LABEL: the agent's control thread ended (it ends right after the release)
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q tbpf-agent /proc/"$1"/task/*/comm 2> /dev/null || return 0
		sleep 0.01
	done
	fail "$2: the agent's control thread is still there 1 s after the release"
}
# unprofiled V OUT: OUT's job (its RESULT iters=N) rerun unprofiled for N
# iterations; prints that run's checksum
unprofiled() {
	local n
	n=$(result_field "$2" iters)
	"$T/py_ref$1" "$WL/fake_gpu_model.py" "${LONG[@]}" --iters "$n" --go-file "$T" > "$T/ref.out" 2> "$T/ref.err" ||
		fail "unprofiled run failed: $(tail -n 2 "$T/ref.err")"
	result_field "$T/ref.out" checksum
}
finished() {   # finished NAME LABEL V: told to end, the job ends with its unprofiled result
	local want got
	touch "$T/$2.done"
	wait_exit "$1" 120
	expect_rc "$1" 0
	got=$(result_field "$(get "$1" out)" checksum)
	want=$(unprofiled "$3" "$(get "$1" out)")
	[ "$got" = "$want" ] || fail "$2: checksum $got, unprofiled $want"
	log "$2: the job finished with the checksum of an unprofiled run of its $(result_field "$(get "$1" out)" iters) iterations ($got)"
}

# callbacks TAG PID WANT: with --inproc, the RecordFunction agent's state,
# from the target's memory; after the SIGKILL (orphaned) its ring stays still
callbacks() {
	local s h
	s=$(python3 "$E2E_DIR/inproc_state.py" "$2" --wait "$3" --timeout $((BOUND_MS / 1000))) ||
		fail "$1: the RecordFunction agent is not $3: $s"
	if [ "$3" = orphaned ]; then
		sleep 0.3
		h=$(python3 "$E2E_DIR/inproc_state.py" "$2")
		[ "${h%% detail*}" = "${s%% detail*}" ] || fail "$1: records still written after the callbacks were removed: $s, then $h"
	fi
	log "$1: RecordFunction agent: $s"
}

# inject_case TAG V KILL [ns] TBPF-ARGS: a running job, --inject, then
# SIGKILL of tbpf mid-run (KILL=1) or its normal stop at --duration (KILL=0);
# ns: the job in its own pid namespace
inject_case() {
	local tag=$1 v=$2 kill=$3 st=$T/$1.state t0 ns= tp inproc=
	shift 3
	[ "$1" = ns ] && { ns=ns; shift; }
	[[ " $* " == *" --inproc "* ]] && inproc=1
	mkpy "$tag" "$v" $ns
	start_workload wl_$tag "$T/py_$tag" fake_gpu_model.py "${LONG[@]}" --until "$T/$tag.done"
	tp=$(job_pid "$tag" "$ns")
	if [ "$kill" = 1 ]; then
		start_tbpf tb_$tag --pid "$tp" "$@" --format json
	else
		start_tbpf tb_$tag --pid "$tp" "$@" --duration 2s --format json
	fi
	go "$tp"
	active "$st" "$tag"
	[ -z "$inproc" ] || callbacks "$tag" "$tp" active
	if [ "$kill" = 1 ]; then
		sleep 0.5
		kill -9 "$(get tb_$tag pid)"
		t0=$(date +%s%N)
		wait_exit tb_$tag 10
	else
		wait_exit tb_$tag 60
		expect_rc tb_$tag 0
		t0=$(date +%s%N)
	fi
	released "$st" "$tag" "$t0"
	[ -z "$inproc" ] || [ "$kill" = 0 ] || callbacks "$tag" "$tp" orphaned
	thread_gone "$tp" "$tag"
	if [ "$kill" = 1 ]; then
		# a new tbpf on the same job: the agent (still loaded, pinned)
		# gets its control thread back, CUPTI on, device times, released
		start_tbpf tb_${tag}b --pid "$tp" "$@" --duration 2s --format json
		wait_state "$st" "^subscribers=1 enabled=$ALL flushes=[0-9]+ unsubscribes=1$" 20 ||
			fail "$tag: CUPTI not on again for the next tbpf: '$(state "$st")'"
		wait_exit tb_${tag}b 60
		expect_rc tb_${tag}b 0
		wait_state "$st" "^subscribers=0 enabled=0x0 flushes=[0-9]+ unsubscribes=2$" 3 ||
			fail "$tag: not released after the next tbpf: '$(state "$st")'"
		# in another pid namespace too (CUPTI's thread ids, the job's,
		# are mapped to the host's: discover/nstid.h)
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["run"]; assert r["gpu_times"] is True, r.get("gpu_note")' \
			"$(get tb_${tag}b out)" || fail "$tag: the next tbpf got no device times"
		log "$tag: the next tbpf: CUPTI on again, device times, then released: $(state "$st")"
	fi
	finished wl_$tag "$tag" "$v"
}

inject_case kill1 1 1 --inject
inject_case stop1 1 0 --inject
need_torch "$PY2"
inject_case kill2 2 1 --inproc --inject
inject_case stop2 2 0 --inproc --inject
# a containerized job, tbpf on the host: both agents watch the channel
inject_case nskill1 1 1 ns --inject
inject_case nskill2 2 1 ns --inproc --inject

# tbpf run: the driver loads the agent (CUDA_INJECTION64_PATH) at the job's
# cuInit and it starts itself; its command inherits the owner channel
# (TBPF_AGENT_OWNER_CHAN)
run_case() {   # run_case TAG V KILL [TBPF-RUN-ARGS...]
	local tag=$1 v=$2 kill=$3 st=$T/$1.state t0 jp i
	shift 3
	mkpy "$tag" "$v"
	if [ "$kill" = 1 ]; then
		start_tbpf tb_$tag run "$@" --format json -o "$T/$tag.json" -- "$T/py_$tag" "$WL/fake_gpu_model.py" "${LONG[@]}" --go-file "$T" --until "$T/$tag.done"
	else
		start_tbpf tb_$tag run "$@" --duration 2s --format json -o "$T/$tag.json" -- "$T/py_$tag" "$WL/fake_gpu_model.py" "${LONG[@]}" --go-file "$T" --until "$T/$tag.done"
	fi
	jp=$(pgrep -P "$(get tb_$tag pid)" | head -1)
	[ -n "$jp" ] || fail "$tag: no job under tbpf run"
	_set wl_${tag}_pid "$jp"
	_set wl_${tag}_out "$(get tb_$tag out)"
	_set wl_${tag}_err "$(get tb_$tag err)"
	active "$st" "$tag"
	if [ "$kill" = 1 ]; then
		sleep 0.5
		kill -9 "$(get tb_$tag pid)"
		t0=$(date +%s%N)
		wait_exit tb_$tag 10
	else   # tbpf stops profiling at 2 s, then waits for its command
		for ((i = 0; i < 600; i++)); do
			grep -q 'stopped (duration)' "$(get tb_$tag err)" && break
			sleep 0.05
		done
		grep -q 'stopped (duration)' "$(get tb_$tag err)" ||
			fail "$tag: tbpf did not stop at its duration: $(tail -c 300 "$(get tb_$tag err)")"
		t0=$(date +%s%N)
	fi
	released "$st" "$tag" "$t0"
	thread_gone "$jp" "$tag"
	_alive "$jp" || fail "$tag: the job ended before it was told to"
	touch "$T/$tag.done"
	for ((i = 0; i < 1200; i++)); do _alive "$jp" || break; sleep 0.1; done
	_alive "$jp" && fail "$tag: the job did not finish"
	if [ "$kill" = 0 ]; then
		wait_exit tb_$tag 60
		expect_rc tb_$tag 0
	fi
	got=$(result_field "$(get tb_$tag out)" checksum)
	want=$(unprofiled "$v" "$(get tb_$tag out)")
	[ "$got" = "$want" ] || fail "$tag: checksum $got, unprofiled $want"
	log "$tag: the job finished with the checksum of an unprofiled run of its $(result_field "$(get tb_$tag out)" iters) iterations ($got)"
}

run_case runkill 1 1
run_case runstop 1 0
# tbpf run --inproc --inject: the same agent, named to the driver
run_case runkilli 1 1 --inproc --inject
run_case runstopi 1 0 --inproc --inject

# tbpf daemon --inproc --inject: the daemon loads the agent as
# --inject does; SIGKILL of the daemon or its SIGTERM releases CUPTI
daemon_case() {   # daemon_case TAG V KILL
	local tag=$1 v=$2 kill=$3 st=$T/$1.state t0
	mkpy "$tag" "$v"
	start_workload wl_$tag "$T/py_$tag" fake_gpu_model.py "${LONG[@]}" --until "$T/$tag.done"
	start_daemon --inproc --inject --pid "$(get wl_$tag pid)" --window 1s
	go "$(get wl_$tag pid)"
	active "$st" "$tag"
	sleep 0.5
	if [ "$kill" = 1 ]; then kill -9 $dpid; else kill -TERM $dpid; fi
	t0=$(date +%s%N)
	wait $dpid 2> /dev/null || true   # 137 after SIGKILL (set -e)
	released "$st" "$tag" "$t0"
	thread_gone "$(get wl_$tag pid)" "$tag"
	finished wl_$tag "$tag" "$v"
}
daemon_case dkill 1 1
daemon_case dstop 1 0
log "OK: CUPTI released within ${BOUND_MS} ms after SIGKILL of tbpf and after its normal stop, --inject, tbpf run (also --inproc --inject) and tbpf daemon --inproc --inject, torch 1.13 and 2.8"
