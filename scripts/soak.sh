#!/usr/bin/env bash
# Soak: voiced in simulation mode under voiceload for a long run (default
# 30 minutes, 300 real-time sessions with cancels, replacements, barge-ins
# and disconnects), sampling the server's own metrics every 10 s from the
# admin listener. It reports the least-squares slope of goroutines, heap in
# use, RSS and open file descriptors per hour (all should be flat), and
# fails when voiceload found any invariant violated.
#
# Usage: scripts/soak.sh [duration] [sessions]     (defaults: 30m, 300)
# SOAK_VOICED_FLAGS adds flags to voiced. The default -conversation-ttl
# (30 min) keeps every conversation's history for as long as the default
# soak runs, so its heap grows all along by design; a soak that is to show
# a plateau runs with a shorter one (SOAK_VOICED_FLAGS="-conversation-ttl 3m").
# The samples are left in bin/soak/samples.tsv, the report in
# bin/soak/voiceload.json.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-30m}
SESSIONS=${2:-300}
ADDR=${SOAK_ADDR:-127.0.0.1:18095}
ADMIN=${SOAK_ADMIN:-127.0.0.1:18096}
OUT=bin/soak
mkdir -p "$OUT"
. scripts/lib.sh
build_binaries

start_voiced "$OUT/voiced.log" "$ADDR" -- -stages sim -admin-addr "$ADMIN" -log-level warn -log-format json \
	-max-sessions $((SESSIONS + 100)) ${SOAK_VOICED_FLAGS:-}
pid=$voiced_pid

# sample appends one line: seconds since start, goroutines, heap in use,
# RSS and open file descriptors.
start=$(date +%s)
sample() {
	curl -fsS "http://$ADMIN/metrics" | awk -v t=$(($(date +%s) - start)) '
		$1 == "go_goroutines" { g = $2 }
		$1 == "go_memstats_heap_inuse_bytes" { h = $2 }
		$1 == "process_resident_memory_bytes" { r = $2 }
		$1 == "process_open_fds" { f = $2 }
		END { printf "%d\t%s\t%s\t%s\t%s\n", t, g, h, r, f }'
}
printf "seconds\tgoroutines\theap_inuse\trss\tfds\n" >"$OUT/samples.tsv"
(while kill -0 $pid 2>/dev/null; do sample >>"$OUT/samples.tsv" || true; sleep 10; done) &
sampler=$!

# The sim stages fail 0.5% of calls as unavailable by design: allow 2% of
# unplanned errors. Everything else voiceload checks is an invariant.
status=0
./bin/voiceload -addr "$ADDR" -metrics-url "http://$ADMIN/metrics" -sessions "$SESSIONS" -duration "$DURATION" \
	-utterance 1s -think 500ms -cancel 10 -replace 5 -barge-in 5 -disconnect 5 -max-error-share 2 \
	-quiet -json "$OUT/voiceload.json" || status=$?
kill $sampler 2>/dev/null || true

# Slopes per hour over the samples after the first minute (the warm-up
# fills pools and caches), the last one left out: voiceload closes its
# sessions together once the last request has ended, and a sample taken
# between that and its exit would tilt every slope down.
sed '$d' "$OUT/samples.tsv" | awk -F'\t' 'NR > 1 && $1 >= 60 { n++; x = $1 / 3600; sx += x; sxx += x * x; if (n == 1) t0 = $1; t1 = $1
		for (i = 2; i <= 5; i++) { y[i] = $i; sy[i] += $i; sxy[i] += x * $i; if (n == 1) first[i] = $i; last[i] = $i } }
	END {
		if (n < 3) { print "soak: too few samples for slopes"; exit }
		split("goroutines heap_inuse rss fds", name, " ")
		split("1 1048576 1048576 1", unit, " "); split("goroutines MiB MiB fds", uname, " ")
		d = n * sxx - sx * sx
		printf "soak: %d samples over %.1f min after the first minute\n", n, (t1 - t0) / 60
		for (i = 2; i <= 5; i++) {
			b = (n * sxy[i] - sx * sy[i]) / d
			printf "%-11s first %10.1f  last %10.1f  slope %+10.2f %s/hour\n", name[i-1], first[i] / unit[i-1], last[i] / unit[i-1], b / unit[i-1], uname[i-1]
		}
	}'
exit $status
