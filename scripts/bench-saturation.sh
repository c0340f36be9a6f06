#!/usr/bin/env bash
# Promises at saturation (issue 16, item 1): for each session count, a fresh
# voiced in simulation mode on loopback ports, driven by voiceload with the
# issue's load (1 s utterances in real time, 5 requests per session, 10%
# cancelled, 5% disconnected). Each run prints voiceload's report: late,
# missing and duplicate terminals, cancel -> terminal at the client and at
# the server (voiced_cancel_to_terminal_seconds), first frame ->
# overloaded for refused requests, and server CPU per frame. Reports also go
# to bin/bench-saturation-N.json.
#
# Usage: scripts/bench-saturation.sh [duration] [sessions...]   (duration caps a run
#        that has not made its 5 requests per session by then)
#        (defaults: 30s; 200 500 1000 2000)
#        LOAD_NICE (default 0): voiceload's nice value, negative to put the
#        measuring client ahead of the server when both share the machine
#        (root), as clients on machines of their own would be: a terminal
#        written in time then reaches the client's goroutine in time, and
#        the server runs on what CPU is left (docs/benchmarks.md,
#        "Saturation, eleventh pass").
# Measure on a quiet machine (start_voiced warns when it is not).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-30s}
shift || true
COUNTS=${*:-200 500 1000 2000}
ADDR=${BENCH_ADDR:-127.0.0.1:18093}
ADMIN=${BENCH_ADMIN:-127.0.0.1:18094}
. scripts/lib.sh
build_binaries

for n in $COUNTS; do
	echo "== $n sessions, $DURATION ($(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg))"
	(
		start_voiced "bin/bench-saturation-$n.log" "$ADDR" -- -stages sim -admin-addr "$ADMIN" \
			-log-level warn -log-format json -max-sessions $((n + 100))
		# Simulated failures (-sim-fail-share) stay on, as in the other
		# load runs: about 1% of requests end unavailable.
		# Started at its nice value, not reniced after: Linux sets it per
		# thread, and the Go runtime's threads are made from the first.
		nice -n "${LOAD_NICE:-0}" ./bin/voiceload -addr "$ADDR" -metrics-url "http://$ADMIN/metrics" -sessions "$n" -duration "$DURATION" \
			-utterance 1s -requests $((5 * n)) -think 0 -cancel 10 -disconnect 5 -max-error-share 2 -shedding \
			-quiet -json "bin/bench-saturation-$n.json"
	) || {
		rc=$?
		# 1: an invariant broken; 2: the run could not be made.
		echo "voiceload exited $rc at $n sessions"
		status=1
	}
done
exit "${status:-0}"
