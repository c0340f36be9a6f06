#!/usr/bin/env bash
# Memory per idle session: a fresh voiced in simulation mode on loopback
# ports, then voiceload -idle opens the sessions (each aligns its clock
# with 5 pings) and holds them for the duration. The report's "per idle
# session" line is (peak RSS - starting RSS) / sessions opened, from the
# admin listener's /metrics, the peak taken from the start to the last
# scrape with every session still open (the burst of opening them counts,
# closing them at the end does not), and beside it the RSS held at that
# last scrape. Shedding is off: a busy machine would
# otherwise refuse some of the burst of upgrades and the figure would count
# their garbage over fewer sessions. Run niced on a shared machine; memory
# does not depend on it, but a starved client times out dials (the report
# counts them as dial errors), which adds garbage: compare runs without.
#
# Usage: scripts/bench-idle.sh [sessions] [duration]     (defaults: 5000, 20s)
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${1:-5000}
DURATION=${2:-20s}
ADDR=${BENCH_ADDR:-127.0.0.1:18093}
ADMIN=${BENCH_ADMIN:-127.0.0.1:18094}
# Each process holds a socket per session.
if [ "$(ulimit -n)" -lt $((SESSIONS + 500)) ]; then ulimit -n $((SESSIONS + 500)); fi
. scripts/lib.sh
build_binaries

start_voiced bin/bench-idle-voiced.log "$ADDR" -- -stages sim -admin-addr "$ADMIN" -log-level warn \
	-shed.threshold=-1s -max-sessions $((SESSIONS + 100))
./bin/voiceload -addr "$ADDR" -metrics-url "http://$ADMIN/metrics" -idle -sessions "$SESSIONS" \
	-duration "$DURATION" -quiet
