#!/bin/sh
# Regenerates the flag reference in README.md from `voiced -h`.
set -eu
cd "$(dirname "$0")/.."
help=$(mktemp)
bin=$(mktemp)
trap 'rm -f "$help" "$bin"' EXIT
# Built first, so that a build error stops here instead of landing in the
# README as its flag reference; `voiced -h` itself exits 0.
go build -o "$bin" ./cmd/voiced
env -u VOICED_ADDR -u VOICED_TOKENS "$bin" -h 2>"$help"
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
