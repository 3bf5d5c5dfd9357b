#!/bin/sh
# check_markers.sh - no merge-conflict markers left in the sources and the
# docs (a README was once merged with a conflict half-resolved; nothing
# caught it).  Exit 1 and name each line found.
cd "$(dirname "$0")/../.." || exit 1
found=$(grep -rnE '^(<<<<<<<|>>>>>>>)( |$)|^=======$' \
	--include='*.c' --include='*.h' --include='*.md' --include='*.sh' --include='*.py' \
	--include='Makefile*' --include='*.mk' --include='*.inc' \
	--exclude-dir=build --exclude-dir=.git . 2>/dev/null)
if [ -n "$found" ]; then
	echo "check_markers: merge-conflict markers left:"
	echo "$found"
	exit 1
fi
echo "check_markers: no merge-conflict markers"
