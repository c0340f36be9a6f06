#!/usr/bin/env bash
# Server CPU per audio frame: voiced in simulation mode on loopback ports,
# driven by voiceload with real-time sessions (1 s utterances unless
# UTTERANCE says otherwise, think 0, 10% cancelled, 5% disconnected: the
# load of docs/benchmarks.md). The
# report's "server CPU" line gives the microseconds of server CPU per frame
# accepted (process_cpu_seconds_total over voiced_audio_frames_total).
#
# Usage: scripts/bench-cpu.sh [sessions] [duration]     (defaults: 500, 40s)
# UTTERANCE=3s streams longer utterances (default 1s): with two lengths,
# c = F + R/n splits a frame's own cost F from a request's R spread over
# its n frames (docs/benchmarks.md, "Saturation, second pass").
# NO_BUILD=1 runs the binaries already in bin/ (to alternate two builds,
# each in its own checkout). PROFILE=FILE also saves a 15 s CPU profile taken mid-run from the admin
# listener (go tool pprof -top bin/voiced FILE). SERVER_GOMAXPROCS sets
# voiced's GOMAXPROCS only (the load tool keeps its own).
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${1:-500}
DURATION=${2:-40s}
ADDR=${BENCH_ADDR:-127.0.0.1:18091}
ADMIN=${BENCH_ADMIN:-127.0.0.1:18092}
. scripts/lib.sh
[ -n "${NO_BUILD:-}" ] || build_binaries

start_voiced bin/bench-cpu-voiced.log "$ADDR" -- -stages sim -admin-addr "$ADMIN" -log-level warn -log-format json \
	-max-sessions $((SESSIONS + 100))
prof=
if [ -n "${PROFILE:-}" ]; then
	(sleep 15 && curl -fsS -o "$PROFILE" "http://$ADMIN/debug/pprof/profile?seconds=15") &
	prof=$!
fi
./bin/voiceload -addr "$ADDR" -metrics-url "http://$ADMIN/metrics" -sessions "$SESSIONS" -duration "$DURATION" \
	-utterance "${UTTERANCE:-1s}" -think 0 -cancel 10 -disconnect 5 -max-error-share 2 -quiet -json bin/bench-cpu.json
# Only the profile: a bare wait would wait for voiced too, which the EXIT
# trap stops, and never return.
if [ -n "$prof" ]; then wait "$prof"; fi
