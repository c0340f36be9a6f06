#!/usr/bin/env bash
# Fleet load: three voiced instances (-stages=sim) behind HAProxy
# (deploy/haproxy/haproxy.cfg, servers and bind replaced) and one
# redis-server, all on loopback; voiceload -resume through HAProxy; kill -9
# of instance l0 partway through, and optionally SIGTERM (drain) of l1.
# Sessions the server drops resume through HAProxy on another instance.
#
# Prints voiceload's report, whose "resume" lines give the connections
# dropped (killed: no close frame; closed: 1012 from a drain), the time
# from each drop to the resumed session.ready (p50/p99/max, all and by
# kind), the terminals missed and replayed (each exactly once; a second
# copy counts as a duplicate terminal) and the requests lost with the
# killed instance. Then the CPU time of each process over the run (sampled
# once a second from /proc; a killed instance's up to its last sample) and
# all of it per audio frame sent: what the whole fleet on this machine
# costs a frame. Last, for each instance still running, the Redis writes
# made before results, what was skipped, and the terminals it wrote after
# their deadlines (a terminal late at the client but not there was late on
# the way: HAProxy or the client starved of CPU). The logs and voiceload's
# JSON report are left in bin/fleet-load/. The exit status is voiceload's:
# non-zero when an invariant was broken (missing, duplicate or late
# terminals, unplanned errors, a dropped session not resumed).
#
# Usage: scripts/fleet-load.sh [sessions] [duration] [kill-after-seconds] [drain-after-seconds]
#        (defaults: 300, 40s, 15, no drain). The issue's run:
#        scripts/fleet-load.sh 1500 60s 20
#        RAMP: voiceload's -ramp, the time over which the sessions open
#        (default: a think time and an utterance, 2.5 s: 600 upgrades a
#        second at 1,500 sessions).
#        Ports: FLEET_PORT_BASE (default 27000; below the ephemeral range
#        so that no outbound connection holds one).
#        VOICELOAD_FLAGS adds voiceload flags (say "-think 10s": sessions
#        that listen longer between turns stream fewer frames a second).
#        HAPROXY_THREADS (default 1): HAProxy's nbthread. HAProxy alone on
#        a machine takes a thread per CPU (the deploy file's default); here
#        it shares two cores with voiceload, three instances and Redis, and
#        a second thread costs it about 10% more CPU for nothing
#        (docs/benchmarks.md, "Fleet").
#        LOAD_NICE (default 0): voiceload's nice value, negative to put the
#        measuring client ahead of the fleet it measures when both share
#        the machine (root): a terminal the servers wrote in time then
#        reaches the client's goroutine in time too, and the fleet runs
#        on what CPU is left (docs/benchmarks.md, "The client first").
#        SERVER_GOMAXPROCS (default unset): the instances' GOMAXPROCS, as
#        a container limited to that many CPUs would give them (three
#        instances here share two cores); voiceload keeps its own.
set -euo pipefail
cd "$(dirname "$0")/.."
# A decimal point in $EPOCHREALTIME and in awk's numbers, whatever the
# locale (de_DE writes a comma, which awk may read as the number's end).
export LC_ALL=C
SESSIONS=${1:-300}
DURATION=${2:-40s}
KILL_AFTER=${3:-15}
DRAIN_AFTER=${4:-}
BASE=${FLEET_PORT_BASE:-27000}
LB=127.0.0.1:$((BASE + 90))
REDIS_PORT=$((BASE + 390))
OUT=bin/fleet-load
mkdir -p "$OUT"
# voiceload holds a connection per session, HAProxy two.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
. scripts/lib.sh
build_binaries

# watch_cpu ROLE:PID...: about every second, a line per process still
# running: the wall clock in seconds, role, user+system CPU time in clock
# ticks. The clock, not a count of rounds: a round is a second's sleep
# plus the reads, on a machine the run keeps busy.
watch_cpu() {
	local rp stat
	while :; do
		for rp in "$@"; do
			stat=$(cat "/proc/${rp##*:}/stat" 2>/dev/null) || continue
			# Fields after the command name, which is in parentheses: utime is the 12th, stime the 13th.
			stat=${stat##*) }
			echo "$EPOCHREALTIME ${rp%%:*} $(echo "$stat" | awk '{print $12 + $13}')"
		done
		sleep 1
	done
}

# report_cpu SAMPLES JSON: each process's CPU time over the run and the
# total per audio frame voiceload sent.
report_cpu() {
	local frames
	frames=$(grep -o '"framesSent": *[0-9]*' "$2" | grep -o '[0-9]*$' || echo 0)
	awk -v hz="$(getconf CLK_TCK)" -v frames="$frames" '
		NR == 1 { t0 = $1 }
		!($2 in first) { first[$2] = $3; order[++n] = $2 }
		{ last[$2] = $3; if ($1 - t0 > secs) secs = $1 - t0 }
		END {
			for (i = 1; i <= n; i++) {
				r = order[i]; s = (last[r] - first[r]) / hz; total += s
				line = line sprintf("%s %.1f s, ", r, s)
			}
			printf "CPU over the run (%.1f s sampled): %stotal %.1f s (%.2f cores)\n", secs, line, total, secs ? total / secs : 0
			if (frames > 0) printf "CPU per audio frame sent (%d frames): %.1f us, all processes together\n", frames, 1e6 * total / frames
		}' "$1"
}

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >"$OUT/redis.log" 2>&1 &
pids+=($!)
servers=""
addrs=()
for i in 0 1 2; do
	addr=127.0.0.1:$((BASE + 180 + i))
	agent=127.0.0.1:$((BASE + 280 + i))
	addrs+=("$addr")
	env -u VOICED_TOKENS -u VOICED_REDIS_URL VOICED_RESUME_SECRET=fleet-load-secret ${SERVER_GOMAXPROCS:+GOMAXPROCS=$SERVER_GOMAXPROCS} bin/voiced -addr "$addr" -admin-addr off -stages sim -sim-fail-share -1 \
		-recognizers 64 -log-format json -log-level warn -instance-id "l$i" \
		-redis "redis://127.0.0.1:$REDIS_PORT/0" -haproxy-agent-addr "$agent" >"$OUT/voiced$i.log" 2>&1 &
	pids+=($!)
	servers+="    server l$i $addr agent-port $((BASE + 280 + i))\n"
done
killed=${pids[1]}  # l0
drained=${pids[2]} # l1
# ready_or_fail URL WHAT: wait (30 s at most) until URL answers.
ready_or_fail() {
	for _ in $(seq 1 300); do
		curl -fs -o /dev/null "$1" && return 0
		sleep 0.1
	done
	echo "$2 not ready after 30 s (logs in $OUT)" >&2
	exit 1
}
for addr in "${addrs[@]}"; do
	ready_or_fail "http://$addr/readyz" "voiced on $addr"
done
awk -v bind="    bind $LB" -v servers="$servers" -v threads="${HAPROXY_THREADS:-1}" '
	/^global$/ { print; print "    nbthread " threads; next }
	/# bind begin/ { print; print bind; skip = 1; next }
	/# bind end/ { skip = 0 }
	/# servers begin/ { print; print "    default-server check inter 500ms fall 1 rise 1 agent-check agent-inter 500ms weight 100"; printf "%s", servers; skip = 1; next }
	/# servers end/ { skip = 0 }
	!skip' deploy/haproxy/haproxy.cfg >"$OUT/haproxy.cfg"
haproxy -db -f "$OUT/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
pids+=($!)
ready_or_fail "http://$LB/readyz" "HAProxy on $LB"

(sleep "$KILL_AFTER"; kill -9 "$killed"; echo "kill -9 of instance l0 after ${KILL_AFTER}s") &
pids+=($!)
if [ -n "$DRAIN_AFTER" ]; then
	(sleep "$DRAIN_AFTER"; kill -TERM "$drained"; echo "SIGTERM (drain) of instance l1 after ${DRAIN_AFTER}s") &
	pids+=($!)
fi
status=0
# shellcheck disable=SC2086 # VOICELOAD_FLAGS is split on purpose
# Started at its nice value, not reniced after: Linux sets it per thread,
# and the Go runtime's threads are made from the first.
nice -n "${LOAD_NICE:-0}" bin/voiceload -addr "$LB" -metrics-url off -sessions "$SESSIONS" -duration "$DURATION" -ramp "${RAMP:-0}" -resume -quiet \
	-json "$OUT/voiceload.json" ${VOICELOAD_FLAGS:-} &
load_pid=$!
pids+=("$load_pid")
roles=("redis-server:${pids[0]}" "voiced-l0:${pids[1]}" "voiced-l1:${pids[2]}" "voiced-l2:${pids[3]}" "haproxy:${pids[4]}" "voiceload:$load_pid")
watch_cpu "${roles[@]}" >"$OUT/cpu.tsv" &
watch_pid=$!
pids+=("$watch_pid") # background jobs ignore SIGINT: cleanup stops them
wait "$load_pid" || status=$?
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
report_cpu "$OUT/cpu.tsv" "$OUT/voiceload.json"

# What each instance still running wrote to Redis before its results.
for i in 0 1 2; do
	curl -fs "http://${addrs[$i]}/metrics" 2>/dev/null | awk -v name="l$i" '
		/^voiced_redis_call_seconds_sum\{op="save"\}/ { sum = $2 }
		/^voiced_redis_call_seconds_count\{op="save"\}/ { n = $2 }
		/^voiced_redis_call_seconds_bucket\{op="save",le="0.001"\}/ { ms1 = $2 }
		/^voiced_redis_call_seconds_bucket\{op="save",le="0.005"\}/ { ms5 = $2 }
		/^voiced_history_not_durable_total / { nd = $2 }
		/^voiced_redis_skipped_total\{/ && $2 > 0 { skipped = skipped " " $1 " " $2 }
		/^voiced_replayed_terminals_total / { replayed = $2 }
		/^voiced_late_terminals_total / { late = $2 }
		END {
			if (n == "") exit
			printf "instance %s: history written to redis before %d results, mean %.2f ms (%.1f%% within 1 ms, %.1f%% within 5 ms); results not durable %d; redis calls skipped:%s; terminals replayed %d; terminals written after their deadline %d\n",
				name, n, n ? 1000 * sum / n : 0, n ? 100 * ms1 / n : 0, n ? 100 * ms5 / n : 0, nd, skipped == "" ? " none" : skipped, replayed, late
		}' || true
done
exit "$status"
