# Shared by the benchmark scripts: source it from the repository root.

# build_binaries builds bin/voiced and bin/voiceload from this checkout,
# so that a benchmark measures the code in front of it.
build_binaries() {
	mkdir -p bin
	go build -o bin/voiced ./cmd/voiced
	go build -o bin/voiceload ./cmd/voiceload
}

# start_voiced LOG ADDR [TRIES] -- VOICED_FLAGS... runs bin/voiced with
# -addr ADDR and the flags, its log in LOG, stopped when the script exits,
# and returns once /readyz answers (TRIES tenths of a second at most,
# default 100; the embedded engines need longer than sim stages), after
# check_quiet's warnings. It
# refuses to start when something already serves ADDR: that server would
# answer instead and be measured. The process id is left in $voiced_pid.
start_voiced() {
	local log=$1 addr=$2 tries=100
	shift 2
	if [ "${1:-}" != "--" ]; then tries=$1; shift; fi
	shift # --
	check_quiet
	if curl -fsS "http://$addr/readyz" >/dev/null 2>&1; then
		echo "something already serves $addr: stop it first" >&2
		exit 1
	fi
	# Not the shell's tokens, Redis or resume secret (a tunnel's setup
	# exports VOICED_TOKENS): the script's flags say what it runs.
	env -u VOICED_TOKENS -u VOICED_REDIS_URL -u VOICED_RESUME_SECRET ${SERVER_GOMAXPROCS:+GOMAXPROCS=$SERVER_GOMAXPROCS} \
		./bin/voiced -addr "$addr" "$@" 2>"$log" &
	voiced_pid=$!
	trap 'kill -TERM $voiced_pid 2>/dev/null; wait $voiced_pid 2>/dev/null || true' EXIT
	for _ in $(seq 1 "$tries"); do
		curl -fsS "http://$addr/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$voiced_pid" 2>/dev/null || { cat "$log"; exit 1; }
		sleep 0.1
	done
	echo "voiced on $addr not ready after $tries tenths of a second" >&2
	cat "$log"
	exit 1
}

# check_quiet warns when timing figures taken now would not be clean: a
# load average above 1, or the kernel's autogroup scheduling, under which
# `nice` only orders processes within one terminal session, so other
# sessions' "niced" jobs share the CPUs equally with the benchmark.
check_quiet() {
	local load
	load=$(cut -d' ' -f1 /proc/loadavg)
	if awk -v l="$load" 'BEGIN { exit !(l > 1) }'; then
		echo "warning: load average $load: other work shares the CPUs; timing figures will not be clean" >&2
	fi
	if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo 0)" = 1 ]; then
		echo "warning: sched_autogroup_enabled=1: nice does not lower other sessions' jobs below this one" >&2
	fi
}
