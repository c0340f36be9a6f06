#!/bin/sh
# Regenerates the flag reference in README.md from `voiced -h`.
set -eu
cd "$(dirname "$0")/.."
help=$(mktemp)
trap 'rm -f "$help"' EXIT
env -u VOICED_ADDR -u VOICED_TOKENS go run ./cmd/voiced -h 2>"$help" || true
awk -v helpfile="$help" '
	/^<!-- voiced -h begin -->$/ {
		print; print "```text"
		while ((getline line < helpfile) > 0) print line
		skip = 1; next
	}
	/^<!-- voiced -h end -->$/ { print "```"; skip = 0 }
	!skip { print }
' README.md > README.md.tmp
mv README.md.tmp README.md
