#!/usr/bin/env bash
# End-to-end understanding, as callers meet it: voiced with its embedded
# defaults on a loopback port, and evalcalls streaming every question of
# a caller question set to it in real time, one session each, spoken by
# each voice (cmd/evalcalls): word error rate, intent, first source and
# how the requests ended, per voice.
#
# Usage: scripts/eval-calls.sh [SET.yaml]   (default: the domain's eval/heldout.yaml)
# VOICES (default flite-slt,flite-kal) picks the voices; EVALCALLS_FLAGS
# adds evalcalls flags (-v lists every call). NO_BUILD=1 runs the
# binaries already in bin/. A set kept outside the repository (written
# for one measurement, so that nothing was tuned on it) is measured the
# same way: its intents and articles must be the embedded domain's.
set -euo pipefail
set_args=()
# The set's path as given, from where the script was called.
if [ -n "${1:-}" ]; then set_args=(-set "$(realpath "$1")"); fi
cd "$(dirname "$0")/.."
ADDR=${EVAL_ADDR:-127.0.0.1:18093}
. scripts/lib.sh
if [ -z "${NO_BUILD:-}" ]; then
	mkdir -p bin
	go build -o bin/voiced ./cmd/voiced
	go build -o bin/evalcalls ./cmd/evalcalls
fi
# The embedded engines take seconds to warm: up to two minutes. No admin
# listener: its default port would clash with a `make run` beside it.
start_voiced bin/eval-calls-voiced.log "$ADDR" 1200 -- -log-level warn -admin-addr off
# shellcheck disable=SC2086 # EVALCALLS_FLAGS is a list of flags
./bin/evalcalls -addr "$ADDR" -voices "${VOICES:-flite-slt,flite-kal}" ${set_args[@]+"${set_args[@]}"} ${EVALCALLS_FLAGS:-}
