#!/bin/bash
# check_stages.sh - the include graph of userspace/ and exporters/ follows
# the stage order (docs/architecture.md): a file may include headers of its
# own folder and of folders after it in ORDER, never before; exporters/
# (the output formats, at the top level) is the stage "exporters".  So
# there are no include circles between stages, and exit codes
# (cmd/exitcode.h) stay in cmd/.
# make unit runs it.
ORDER="cmd fleet collect attach discover exporters symbolize model join capture bus base"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT/userspace" || exit 1
# every stage's files, exporters/ as ../exporters from here
stage_files() { ls */*."$1" ../exporters/*."$1" 2>/dev/null; }
rank() { local i=0 s; for s in $ORDER; do [ "$s" = "$1" ] && { echo $i; return; }; i=$((i + 1)); done; echo -1; }
declare -A where
for h in $(stage_files h); do h=${h#../}; where[${h#*/}]=${h%%/*}; done
bad=0
# a file left directly in userspace/ would not even be built (STAGES)
for f in *.[ch]; do
	[ -e "$f" ] || continue
	echo "check_stages: userspace/$f is in no stage folder (see docs/architecture.md)"
	bad=1
done
for f in $(stage_files c) $(stage_files h); do
	g=${f#../}
	st=${g%%/*}
	rs=$(rank "$st")
	[ "$rs" -ge 0 ] || { echo "check_stages: $st/ is not in the stage order"; bad=1; continue; }
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		d=${where[$inc]:-}
		[ -n "$d" ] && [ "$d" != "$st" ] || continue
		if [ "$(rank "$d")" -lt "$rs" ]; then
			echo "check_stages: $f includes $d/$inc (a stage before $st/)"
			bad=1
		fi
	done
done
[ $bad = 0 ] && echo "check_stages: includes follow the stage order"
exit $bad
