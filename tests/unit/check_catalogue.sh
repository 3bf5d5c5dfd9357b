#!/bin/sh
# check_catalogue.sh - the committed end-to-end test catalogue
# (tests/e2e/README.md) is what tests/e2e/catalogue.sh makes of the tests'
# header comments now: a test added, moved or with its header changed
# without the catalogue fails here, with the command that regenerates it.
cd "$(dirname "$0")/../.." || exit 1
new=$(mktemp) || exit 1
trap 'rm -f "$new"' EXIT
if ! tests/e2e/catalogue.sh > "$new"; then
	echo "check_catalogue: tests/e2e/catalogue.sh failed (above)"
	exit 1
fi
if ! cmp -s "$new" tests/e2e/README.md; then
	echo "check_catalogue: tests/e2e/README.md is out of date; regenerate it:"
	echo "    tests/e2e/catalogue.sh > tests/e2e/README.md"
	diff -u tests/e2e/README.md "$new" | head -n 20
	exit 1
fi
echo "check_catalogue: tests/e2e/README.md up to date ($(grep -c '^### ' tests/e2e/README.md) tests)"
