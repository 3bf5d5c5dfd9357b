#!/bin/bash
# test_install.sh - tbpf as users and packagers get it, away from the build
# tree: `make install DESTDIR PREFIX=/usr` lays out the binary, the agents
# where the binary looks for them (../lib/tbpf), man pages man(1) renders,
# a bash completion bash-completion drives, a unit systemd-analyze accepts;
# then the .deb that dpkg-buildpackage builds from a copy of the tree
# (no .git, Debian's build flags) is installed with dpkg, /usr/bin/tbpf
# profiles a real torch 1.13 job with uprobes and with the in-process agent
# it finds in /usr/lib/tbpf, and dpkg --purge removes it all.
# `tbpf --version` (the commit from git, none without .git) and `tbpf info`
# are checked on the way.
# timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
need_root
need_tbpf
need_torch "$PY1"
for t in dpkg-buildpackage dh man; do
	command -v $t > /dev/null || fail "$t missing: run tests/setup.sh (debhelper, dpkg-dev, man-db)"
done
[ -r /usr/share/bash-completion/bash_completion ] ||
	fail "bash-completion missing: run tests/setup.sh"

problems=()
ITERS=5   # ops_model.py runs two aten::conv2d per iteration
deb_installed() { dpkg-query -W -f '${Status}' tbpf 2>/dev/null | grep -q 'ok installed'; }
purge() { deb_installed && dpkg --purge tbpf > "$T/purge.log" 2>&1; return 0; }
trap '_e2e_cleanup; purge' EXIT
# a package a failed earlier run left behind would hide what this one installs
purge
[ ! -e /usr/bin/tbpf ] || fail "/usr/bin/tbpf exists and is not from the tbpf package: not overwriting it"

# --- make install into a DESTDIR ---
D=$T/destdir
rm -rf "$D"
make -C "$ROOT" -s install DESTDIR="$D" PREFIX=/usr > "$T/install.log" 2>&1 ||
	fail "make install failed: $(tail -n 3 "$T/install.log" | tr '\n' ' ')"
for f in usr/bin/tbpf usr/lib/tbpf/libtbpf_inproc.so usr/share/man/man1/tbpf.1 \
	usr/share/man/man8/tbpf-daemon.8 usr/share/bash-completion/completions/tbpf \
	usr/lib/systemd/system/tbpf-daemon.service; do
	[ -s "$D/$f" ] || bad "make install: $f missing"
done
[ -x "$D/usr/bin/tbpf" ] || bad "make install: usr/bin/tbpf not executable"
# --version of a build from a git tree (make install rebuilt it): HEAD's commit
if git -C "$ROOT" rev-parse HEAD > /dev/null 2>&1; then
	head=$(git -C "$ROOT" rev-parse --short=12 HEAD)
	v=$("$D/usr/bin/tbpf" --version)
	log "work tree build: $v (HEAD $head)"
	[[ $v == "tbpf "*" (commit $head"* ]] || bad "--version '$v' does not name HEAD $head"
fi
if [ -e "${CUDA_HOME:-/usr/local/cuda}/include/cupti.h" ]; then
	[ -s "$D/usr/lib/tbpf/libtbpf_agent.so" ] || bad "make install: the CUPTI agent missing (cupti.h is there)"
fi
# the installed binary finds the installed agents, not the build tree's
"$D/usr/bin/tbpf" info > "$T/dinfo.out" 2> "$T/dinfo.err" || bad "DESTDIR tbpf info exited $?"
grep -qx "inproc agent: $D/usr/lib/tbpf/libtbpf_inproc.so" "$T/dinfo.out" ||
	bad "DESTDIR tbpf does not find its agent: $(grep agent "$T/dinfo.out" | tr '\n' ' ')"

# man pages: render without warnings and carry the sections a reader needs
for m in man1/tbpf.1 man8/tbpf-daemon.8; do
	MANWIDTH=80 man --warnings -l "$D/usr/share/man/$m" > "$T/man.txt" 2> "$T/man.err" ||
		bad "man -l $m failed"
	[ ! -s "$T/man.err" ] || bad "man -l $m warns: $(head -n 2 "$T/man.err" | tr '\n' ' ')"
	for s in NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES "EXIT STATUS" FILES; do
		grep -q "^$s" "$T/man.txt" || bad "$m has no $s section"
	done
	grep -q '@[A-Z]*@' "$D/usr/share/man/$m" && bad "$m: unsubstituted @PATH@"
done
MANWIDTH=80 man -l "$D/usr/share/man/man1/tbpf.1" 2> /dev/null |
	grep -q '/usr/lib/tbpf/libtbpf_inproc.so' || bad "tbpf.1 FILES does not name /usr/lib/tbpf"
for c in report run diff daemon info; do
	MANWIDTH=80 man -l "$D/usr/share/man/man1/tbpf.1" 2> /dev/null | grep -Eq "^ +$c( |$)" ||
		bad "tbpf.1 does not describe the $c command"
done

# bash completion, driven by bash-completion's own _init_completion
complete_words() {
	bash -c '. /usr/share/bash-completion/bash_completion
		. "$1"; shift
		COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
		_tbpf; printf "%s\n" "${COMPREPLY[@]}"' _ "$D/usr/share/bash-completion/completions/tbpf" "$@"
}
[ "$(complete_words tbpf rep)" = report ] || bad "completion of 'tbpf rep': $(complete_words tbpf rep)"
[ "$(complete_words tbpf --pid 1 --form)" = --format ] || bad "completion of '--form'"
complete_words tbpf --format "" | grep -qx perfetto || bad "completion of --format values lacks perfetto"
complete_words tbpf diff --format "" | grep -qx tree && bad "completion offers diff a tree format"

# the unit, as systemd reads it (its ExecStart pointed at the DESTDIR binary)
if command -v systemd-analyze > /dev/null; then
	mkdir -p "$T/unit"
	sed "s|/usr/bin/tbpf|$D/usr/bin/tbpf|" "$D/usr/lib/systemd/system/tbpf-daemon.service" \
		> "$T/unit/tbpf-daemon.service"
	systemd-analyze verify --man=no "$T/unit/tbpf-daemon.service" > "$T/verify.out" 2>&1 ||
		bad "systemd-analyze verify: $(head -n 3 "$T/verify.out" | tr '\n' ' ')"
	[ ! -s "$T/verify.out" ] || bad "systemd-analyze verify warns: $(head -n 3 "$T/verify.out" | tr '\n' ' ')"
	grep -q '^CapabilityBoundingSet=.*CAP_BPF' "$T/unit/tbpf-daemon.service" ||
		bad "the unit does not bound its capabilities"
else
	log "no systemd-analyze here: unit not verified"
fi

# --- the .deb, built from a copy of the tree without .git ---
SRC=$T/deb/tbpf
rm -rf "$T/deb"
mkdir -p "$SRC"
git -C "$ROOT" ls-files -co --exclude-standard -z | (cd "$ROOT" && tar -c --null -T -) | tar -x -C "$SRC"
log "dpkg-buildpackage in $SRC"
(cd "$SRC" && DEB_BUILD_OPTIONS="parallel=2 nocheck" dpkg-buildpackage -us -uc -b) \
	> "$T/deb-build.log" 2>&1 || fail "dpkg-buildpackage failed: $(tail -n 5 "$T/deb-build.log" | tr '\n' ' ')"
deb=$(ls "$T"/deb/tbpf_*_amd64.deb) || fail "no .deb built"
grep -Eq '^tbpf: (CUDA toolkit found|no CUDA toolkit)' "$T/deb-build.log" ||
	bad "the build log does not say whether the CUPTI agent is built"
# Debian's hardening flags reached the agents and the binary
grep -E -- '-shared agent/inproc\.c' "$T/deb-build.log" | grep -q -- '-fstack-protector-strong' ||
	bad "the in-process agent was built without dpkg-buildflags' CFLAGS"
readelf -d "$SRC/debian/tbpf/usr/bin/tbpf" | grep -q 'BIND_NOW' || bad "tbpf not linked with -z now"

log "dpkg -i $(basename "$deb")"
for ((i = 0; i < 30; i++)); do
	dpkg -i "$deb" > "$T/dpkg-i.log" 2>&1 && break
	grep -qi lock "$T/dpkg-i.log" || fail "dpkg -i failed: $(tail -n 3 "$T/dpkg-i.log" | tr '\n' ' ')"
	sleep 2   # another apt/dpkg run holds the lock
done
deb_installed || fail "dpkg -i did not install tbpf: $(tail -n 3 "$T/dpkg-i.log" | tr '\n' ' ')"
for f in /usr/bin/tbpf /usr/lib/tbpf/libtbpf_inproc.so /usr/share/man/man1/tbpf.1.gz \
	/usr/share/man/man8/tbpf-daemon.8.gz /usr/share/bash-completion/completions/tbpf \
	/lib/systemd/system/tbpf-daemon.service; do
	[ -e "$f" ] || bad "package: $f missing"
done
man -w tbpf 2> /dev/null | grep -q '^/usr/share/man/man1/tbpf.1' || bad "man tbpf: not found"
if command -v systemd-analyze > /dev/null; then
	systemd-analyze verify /lib/systemd/system/tbpf-daemon.service > "$T/verify2.out" 2>&1 ||
		bad "installed unit: systemd-analyze verify: $(head -n 3 "$T/verify2.out" | tr '\n' ' ')"
	[ ! -s "$T/verify2.out" ] || bad "installed unit warns: $(head -n 3 "$T/verify2.out" | tr '\n' ' ')"
fi

# --version without .git: the version alone, the package's version
v=$(env -u TBPF_INPROC_PATH -u TBPF_AGENT_PATH /usr/bin/tbpf --version)
[ "$v" = "tbpf $(dpkg-query -W -f '${Version}' tbpf)" ] || bad "/usr/bin/tbpf --version: '$v'"
rc=0
env -u TBPF_INPROC_PATH -u TBPF_AGENT_PATH /usr/bin/tbpf info > "$T/info.out" 2> "$T/info.err" || rc=$?
cat "$T/info.out"
[ $rc = 0 ] || bad "tbpf info exited $rc"
[ ! -s "$T/info.err" ] || bad "tbpf info wrote to stderr: $(head -n 2 "$T/info.err")"
for k in kernel btf uprobe_multi lockdown ptrace_scope privileges libcuda libcudart torch \
	"inproc agent" "cupti agent"; do
	[ "$(grep -c "^$k: " "$T/info.out")" = 1 ] || bad "tbpf info: no single '$k:' line"
done
grep -qx "kernel: $(uname -r)" "$T/info.out" || bad "tbpf info: kernel is not $(uname -r)"
[ -e /sys/kernel/btf/vmlinux ] && ! grep -q '^btf: yes' "$T/info.out" && bad "tbpf info: BTF not seen"
grep -qx "torch: $(torch_version "$PY1") ($PY1)" "$T/info.out" ||
	grep -q "^torch: $(torch_version "$PY1") " "$T/info.out" || bad "tbpf info: torch $(torch_version "$PY1") not found"
grep -qx "inproc agent: /usr/lib/tbpf/libtbpf_inproc.so" "$T/info.out" ||
	bad "tbpf info: /usr/lib/tbpf agent not found"

# --- /usr/bin/tbpf on a real torch job, nothing from the build tree ---
export -n TBPF_INPROC_PATH TBPF_AGENT_PATH 2> /dev/null || true
unset TBPF_INPROC_PATH TBPF_AGENT_PATH
TBPF=/usr/bin/tbpf
# uprobes: the operator table, two aten::conv2d per iteration
start_workload wl "$PY1" ops_model.py --iters $ITERS
(cd / && exec "$TBPF" --pid "$wl_pid" --duration 2s) > "$T/tb.out" 2> "$T/tb.err" &
tb_pid=$!
_E2E_PIDS+=("$tb_pid")
tb_err=$T/tb.err
for ((i = 0; i < ATTACH_TIMEOUT * 10; i++)); do
	grep -q '^tbpf: attached' "$T/tb.err" && break
	_alive "$tb_pid" || break
	sleep 0.1
done
grep -q '^tbpf: attached' "$T/tb.err" || fail "/usr/bin/tbpf did not attach: $(head -c 300 "$T/tb.err")"
go "$wl_pid"
wait_exit wl 120
wait_exit tb 60
expect_rc tb 0
head -n 12 "$T/tb.out"
grep -q 'Self CPU' "$T/tb.out" && grep -q '# of Calls' "$T/tb.out" || bad "no operator table from /usr/bin/tbpf"
calls=$(awk '$1 == "aten::conv2d" { print $NF }' "$T/tb.out")
[ "$calls" = $((2 * ITERS)) ] || bad "uprobes: aten::conv2d calls '$calls', expected $((2 * ITERS))"

# --inproc: the agent /usr/bin/tbpf loads from /usr/lib/tbpf
start_workload wl2 "$PY1" ops_model.py --iters $ITERS
start_tbpf tb2 --inproc --pid "$wl2_pid" --format json -o "$T/inproc.json"
go "$wl2_pid"
wait_exit wl2 120
wait_exit tb2 60
expect_rc tb2 0
grep -i 'not found' "$T/tb2.err" && bad "--inproc: an agent was not found"
python3 - "$T/inproc.json" $((2 * ITERS)) << 'EOF' || bad "--inproc JSON from /usr/bin/tbpf"
import json, sys
d = json.load(open(sys.argv[1]))
mode = d["run"]["mode"]
calls = sum(o["calls"] for o in d["ops"] if o["name"] == "aten::conv2d")
print("inproc: mode %r, aten::conv2d calls %d" % (mode, calls))
ok = "inproc" in mode.lower() or "recordfunction" in mode.lower()
if not ok:
    print("MISMATCH run.mode %r is not the in-process agent's" % mode)
if calls != int(sys.argv[2]):
    print("MISMATCH aten::conv2d calls %d, expected %s" % (calls, sys.argv[2]))
    ok = False
sys.exit(0 if ok else 1)
EOF

# --- dpkg --purge: nothing left ---
dpkg --purge tbpf > "$T/purge.log" 2>&1 || bad "dpkg --purge failed: $(tail -n 2 "$T/purge.log")"
for f in /usr/bin/tbpf /usr/lib/tbpf /usr/share/man/man1/tbpf.1.gz /lib/systemd/system/tbpf-daemon.service \
	/usr/share/bash-completion/completions/tbpf; do
	[ ! -e "$f" ] || bad "after purge $f is still there"
done
hash -r
command -v tbpf > /dev/null && [ "$(command -v tbpf)" = /usr/bin/tbpf ] && bad "tbpf still on PATH"

if [ ${#problems[@]} -gt 0 ]; then
	for p in "${problems[@]}"; do echo "MISMATCH $p"; done
	fail "${#problems[@]} install/package checks wrong: ${problems[0]}"
fi
log "make install, the .deb, /usr/bin/tbpf (uprobes, --inproc), --version, info: all as expected"
