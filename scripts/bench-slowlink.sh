#!/usr/bin/env bash
# Speech out over a slow link: voiced with its embedded defaults answers
# two sessions, speech on, whose client sits behind a link shaped to RATE
# (both sessions share it), and the load tool counts the terminal messages
# that reach the client after their deadline (docs/benchmarks.md, "Speech
# over a slow link"). The link is a veth pair into a network namespace,
# the server's side shaped by `tc qdisc ... tbf rate RATE burst 32kbit
# latency 400ms`: needs root, iproute2 and flite.
#
# Usage: scripts/bench-slowlink.sh [RATE...]   (default: 1mbit 2mbit 4mbit)
# RUNS=N runs each rate N times (default 2), each with a fresh server.
# NO_BUILD=1 runs the binaries already in bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=("$@")
[ ${#RATES[@]} -gt 0 ] || RATES=(1mbit 2mbit 4mbit)
RUNS=${RUNS:-2}
NS=vslow
HOST=10.99.7.1
PEER=10.99.7.2
ADDR=$HOST:18710
ADMIN=127.0.0.1:18711
OUT=bin/bench-slowlink
. scripts/lib.sh
[ -n "${NO_BUILD:-}" ] || build_binaries
mkdir -p "$OUT"

# The question (3.6 s of Flite slt) every request streams.
WAV=$OUT/question.wav
flite -voice slt -t "how do I return an item I bought online and get my money back" -o "$WAV"

cleanup() {
	ip netns del "$NS" 2>/dev/null || true
	ip link del vslow0 2>/dev/null || true
}
cleanup
trap cleanup EXIT
ip netns add "$NS"
ip link add vslow0 type veth peer name vslow1
ip link set vslow1 netns "$NS"
ip addr add "$HOST/24" dev vslow0
ip link set vslow0 up
ip netns exec "$NS" ip addr add "$PEER/24" dev vslow1
ip netns exec "$NS" ip link set vslow1 up
ip netns exec "$NS" ip link set lo up

for run in $(seq 1 "$RUNS"); do
	for rate in "${RATES[@]}"; do
		tc qdisc replace dev vslow0 root tbf rate "$rate" burst 32kbit latency 400ms
		log=$OUT/voiced-$rate-$run.log
		# A subshell per run: start_voiced's trap stops this run's server.
		(
			start_voiced "$log" "$ADDR" 400 -- -auth-token slowlink -admin-addr "$ADMIN" -log-level warn
			VOICELOAD_TOKEN=slowlink ip netns exec "$NS" ./bin/voiceload -addr "$ADDR" -allow-addr "$ADDR" \
				-sessions 2 -speech -wav "$WAV" -duration 20s -think 1s -metrics-url off \
				>"$OUT/voiceload-$rate-$run.txt" 2>&1 || true
		)
		f=$OUT/voiceload-$rate-$run.txt
		req=$(awk '/^requests/ {print $2; exit}' "$f")
		late=$(awk '/^late terminal/ {print $3; exit}' "$f")
		how=$(sed -nE 's/^  late .*result ([0-9.]+) ms late.*/\1/p' "$f" | paste -sd, -)
		audio=$(grep -oE '[0-9.]+ KiB of audio per result' "$f" || true)
		echo "run $run, $rate shared by two sessions: late ${late:-?} of ${req:-?}${how:+ (ms late: $how)}; $audio"
	done
done
