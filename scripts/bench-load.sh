#!/usr/bin/env bash
# A short load run: voiced in simulation mode on a loopback port, driven by
# voiceload. Figures go to stdout and bin/bench-load.json.
# Usage: scripts/bench-load.sh [voiceload flags...]   (defaults: 100 sessions, 20 s)
set -euo pipefail
cd "$(dirname "$0")/.."
ADDR=${BENCH_ADDR:-127.0.0.1:18090}
. scripts/lib.sh
build_binaries # never measure the binaries of an older checkout
start_voiced bin/bench-voiced.log "$ADDR" -- -stages sim -admin-addr off -log-level warn -log-format json
if [ $# -eq 0 ]; then
	set -- -sessions 100 -duration 20s
fi
# The sim stages fail 0.5% of calls as unavailable by design (about 1% of
# requests): allow 2% of unplanned errors; a later -max-error-share wins.
./bin/voiceload -addr "$ADDR" -quiet -json bin/bench-load.json -max-error-share 2 "$@"
