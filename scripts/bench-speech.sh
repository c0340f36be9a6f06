#!/usr/bin/env bash
# Real speech in and out at real time (issue 12's target: 8 concurrent
# sessions with real STT and speech, 0 late): voiced with its embedded
# engines (PocketSphinx, the help-desk domain, the extractive responder,
# Flite) on loopback, driven by voiceload -speech with help-desk questions
# spoken by Flite's slt voice, streamed in real time.
#
# Usage: scripts/bench-speech.sh [sessions] [duration]   (defaults: 8, 60s)
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${1:-8}
DURATION=${2:-60s}
ADDR=${BENCH_ADDR:-127.0.0.1:18093}
ADMIN=${BENCH_ADMIN:-127.0.0.1:18094}
mkdir -p bin/bench-speech
. scripts/lib.sh
build_binaries

# Questions from the domain's examples (what callers of the sample desk ask).
wavs=()
i=0
for q in "where is my order" "i want to cancel my order" "how do i reset my password" \
	"when do you open on sunday" "can i pay with paypal" "how long does delivery take"; do
	f=bin/bench-speech/q$i.wav
	[ -s "$f" ] || flite -voice slt -t "$q" -o "$f"
	wavs+=(-wav "$f")
	i=$((i + 1))
done

# The embedded engines warm for several seconds: allow a minute.
start_voiced bin/bench-speech/voiced.log "$ADDR" 600 -- -admin-addr "$ADMIN" -log-level warn -log-format json
./bin/voiceload -addr "$ADDR" -metrics-url "http://$ADMIN/metrics" -sessions "$SESSIONS" -duration "$DURATION" \
	-speech -think 1s "${wavs[@]}" -quiet -json bin/bench-speech/report.json
curl -fsS "http://$ADMIN/metrics" | grep -E '^voiced_(late_terminals_total|time_to_first_audio_seconds_(count|sum)|degraded_total)' || true
