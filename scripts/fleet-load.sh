#!/usr/bin/env bash
# Fleet load: three voiced instances (-stages=sim) behind HAProxy
# (deploy/haproxy/haproxy.cfg, servers and bind replaced) and one
# redis-server, all on loopback; voiceload through HAProxy; kill -9 of one
# instance partway through. Prints voiceload's report; the logs are left in
# bin/fleet-load/.
#
# Usage: scripts/fleet-load.sh [sessions] [duration] [kill-after-seconds]
#        (defaults: 300, 40s, 15). Ports: FLEET_PORT_BASE (default 27000;
#        below the ephemeral range so that no outbound connection holds one).
set -euo pipefail
cd "$(dirname "$0")/.."
SESSIONS=${1:-300}
DURATION=${2:-40s}
KILL_AFTER=${3:-15}
BASE=${FLEET_PORT_BASE:-27000}
LB=127.0.0.1:$((BASE + 90))
REDIS_PORT=$((BASE + 390))
OUT=bin/fleet-load
mkdir -p "$OUT"
go build -o bin/voiced ./cmd/voiced
go build -o bin/voiceload ./cmd/voiceload

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >"$OUT/redis.log" 2>&1 &
pids+=($!)
servers=""
for i in 0 1 2; do
	addr=127.0.0.1:$((BASE + 180 + i))
	agent=127.0.0.1:$((BASE + 280 + i))
	VOICED_RESUME_SECRET=fleet-load bin/voiced -addr "$addr" -admin-addr off -stages sim -sim-fail-share -1 \
		-recognizers 64 -log-format json -log-level warn -instance-id "l$i" \
		-redis "redis://127.0.0.1:$REDIS_PORT/0" -haproxy-agent-addr "$agent" >"$OUT/voiced$i.log" 2>&1 &
	pids+=($!)
	servers+="    server l$i $addr agent-port $((BASE + 280 + i))\n"
done
victim=${pids[1]}
for i in 0 1 2; do
	until curl -fs "http://127.0.0.1:$((BASE + 180 + i))/readyz" >/dev/null; do sleep 0.1; done
done
awk -v bind="    bind $LB" -v servers="$servers" '
	/# bind begin/ { print; print bind; skip = 1; next }
	/# bind end/ { skip = 0 }
	/# servers begin/ { print; print "    default-server check inter 500ms fall 1 rise 1 agent-check agent-inter 500ms weight 100"; printf "%s", servers; skip = 1; next }
	/# servers end/ { skip = 0 }
	!skip' deploy/haproxy/haproxy.cfg >"$OUT/haproxy.cfg"
haproxy -db -f "$OUT/haproxy.cfg" >"$OUT/haproxy.log" 2>&1 &
pids+=($!)
until curl -fs -o /dev/null "http://$LB/readyz"; do sleep 0.1; done

(sleep "$KILL_AFTER"; kill -9 "$victim"; echo "killed instance l0 after ${KILL_AFTER}s") &
bin/voiceload -addr "$LB" -metrics-url off -sessions "$SESSIONS" -duration "$DURATION" -quiet -json "$OUT/voiceload.json"
