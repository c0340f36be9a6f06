# voiced: a real-time voice pipeline server.
#
#   make run    set up this machine and run voiced with its embedded defaults
#   make test   set up this machine, vet, and run every test with the race detector
#
# Setup installs the Debian packages the engines and tests need (apt-get, as
# root or through sudo) only when one is missing.

GO      ?= go
# make run listens on ADDR: make run ADDR=0.0.0.0:8080, or VOICED_ADDR;
# the admin port on ADMIN_ADDR (off: none); ARGS are more flags.
ADDR    ?= $(or $(VOICED_ADDR),127.0.0.1:8080)
ADMIN_ADDR ?= 127.0.0.1:8081
ARGS    ?=
SUDO    := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# PocketSphinx (cgo) and its US English model; espeak-ng, flite and sox make
# and measure the test utterances; chromium runs the demo's browser test;
# redis-server and haproxy run the fleet test.
DEB_PACKAGES := build-essential pkg-config libpocketsphinx-dev pocketsphinx-en-us \
	espeak-ng flite flite1-dev sox chromium nodejs node-ws libwebrtc-audio-processing-dev \
	redis-server haproxy
# People's speech, for the recogniser's tests and make eval-stt: Asterisk's
# recorded telephone prompts and PocketSphinx's test recordings.
TEST_DEB_PACKAGES := asterisk-core-sounds-en-wav asterisk-core-sounds-en pocketsphinx-testdata

.PHONY: all setup build run test vet fmt fmt-check lint bench bench-go bench-load eval-calls \
	eval-intent eval-retrieval eval-stt eval-vad eval-hold bench-stt adapt-acoustic adapt-telephone adapt-synthetic fuzz soak readme-flags clean

all: build

# install_missing installs those of the Debian packages $(1) that are not
# installed.
install_missing = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "$@: installing Debian packages:" $$missing; \
		$(SUDO) apt-get update && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	fi

setup:
	@$(call install_missing,$(DEB_PACKAGES))
	$(GO) mod download

build: setup
	$(GO) build -buildvcs=auto -o bin/voiced ./cmd/voiced
	$(GO) build -buildvcs=auto -o bin/voiceload ./cmd/voiceload

run: build
	./bin/voiced -addr $(ADDR) -admin-addr $(ADMIN_ADDR) $(ARGS)

vet:
	$(GO) vet ./...

fmt:
	gofmt -s -w .

fmt-check:
	@out=$$(gofmt -s -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# House rules the compiler does not check.
lint: vet fmt-check
	@if grep -rn --include='*.go' 'time\.After(' client cmd internal web | grep -v '_test\.go'; then \
		echo "lint: no time.After outside tests (use a timer you can stop)"; exit 1; fi
	@if CGO_ENABLED=0 $(GO) build ./... ; then :; else echo "lint: the build without cgo broke"; exit 1; fi
	$(GO) tool staticcheck ./...

test: setup lint
	@$(call install_missing,$(TEST_DEB_PACKAGES))
	$(GO) test -race -count=1 -timeout 30m ./...

bench: bench-go bench-load

# Every Go benchmark: the packages' and cmd/voiced's (HAProxy's round trip,
# skipped without haproxy).
bench-go: setup
	$(GO) test -run '^$$' -bench . -benchmem ./...

# A short load run in simulation mode against a voiced started here.
bench-load: build
	./scripts/bench-load.sh

# A long run under load (issue 16): SOAK_DURATION (default 30m) at
# SOAK_SESSIONS (300) real-time sessions in simulation mode; reports the
# slopes of goroutines, heap, RSS and open files, and fails on any
# invariant violation.
SOAK_DURATION ?= 30m
SOAK_SESSIONS ?= 300
soak:
	./scripts/soak.sh $(SOAK_DURATION) $(SOAK_SESSIONS)

# Training split (k-fold), tuning and held-out sets, each labelled; the
# held-out set end to end from domain/helpdesk/eval/heldout-transcripts.tsv.
# The classifier is trained on the training split; its last table is the
# classifier voiced ships (every example) on the caller questions.
eval-intent:
	$(GO) run ./cmd/evalintent

# The same sets, then the caller questions answered as voiced ships
# (classifier and article questions from every example).
eval-retrieval:
	$(GO) run ./cmd/evalretrieval
	$(GO) run ./cmd/evalretrieval -shipped

# A caller question set streamed to voiced (embedded defaults) in real
# time, one session per question and voice, scored from the terminal
# messages: word errors, intent, first source (scripts/eval-calls.sh).
# SET=path/to/set.yaml measures a set kept outside the repository; the
# default is the domain's held-out caller questions. About 4 s per call.
eval-calls: setup
	./scripts/eval-calls.sh "$(SET)"

# Word error rate and end-to-end intent accuracy per voice, for the general
# model and the interpolated one: utterances.tsv (sentences seen in the
# training text and unseen ones), the tuning sets and the held-out set,
# each labelled. Long: 7,456 decodes (3,728 per model) one at a time, 0.25
# to 0.4 CPU-seconds each on the 2-core VM, so 30 to 45 CPU-minutes and as
# long in wall time. EVALSTT_FLAGS adds evalstt flags, a later one winning:
# EVALSTT_FLAGS="-workers 2" decodes two at once (as many as CPUs: the
# figures do not change, decoding is deterministic), EVALSTT_FLAGS="-set
# heldout -callers -lm interp" measures the held-out caller questions alone.
EVALSTT_FLAGS ?=
eval-stt: setup
	@$(call install_missing,$(TEST_DEB_PACKAGES))
	nice -n 10 $(GO) run ./cmd/evalstt -set eval,tuning,heldout,recorded -lm general,interp -voices flite-slt,flite-kal,espeak-en-us,human $(EVALSTT_FLAGS)

# Server-side turn detection in noise (missed and false turns, end-of-turn
# latency), and the recogniser on the detected turns, at 16 kHz PCM and at
# 8 kHz mu-law (telephone audio). Needs libwebrtc-audio-processing-dev.
eval-vad: setup
	$(GO) run ./cmd/evalvad
	$(GO) run ./cmd/evalvad -rate 8000 -mulaw

# Server turns held through a pause after unfinished words (holdMs): every
# other tuning question whole and split by 600-1200 ms pauses, flite slt and
# kal, without the hold, at 700 ms and at the default; then the retrieval
# sets, which were not used to choose. About 40 minutes on the 2-core VM.
eval-hold: setup
	nice -n 10 $(GO) run ./cmd/evalhold -every 2 -holds 0,700,1000 -words
	nice -n 10 $(GO) run ./cmd/evalhold -set eval/retrieval-spoken.yaml
	nice -n 10 $(GO) run ./cmd/evalhold -set eval/retrieval.yaml

# Real-time factor, finalisation latency and concurrent streams.
bench-stt: setup
	$(GO) run ./cmd/evalstt -wer=false -bench -voices flite-slt,flite-kal,espeak-en-us -streams 1,2,4,6,8,10,12,16 -per-stream 12

# The recogniser's acoustic adaptation (cmd/adaptstt): the training split
# spoken by synthetic voices, SphinxTrain's bw, mllr_solve and map_adapt;
# written into internal/stages/stt/sphinx/acoustic, which voiced embeds.
# SphinxTrain and PocketSphinx's tools are needed here only, not by voiced
# or make test. About 5 CPU-minutes (the first run synthesises 4,405
# utterances too).
ADAPT_PACKAGES := sphinxtrain sphinxbase-utils pocketsphinx
adapt-acoustic: setup
	@$(call install_missing,$(ADAPT_PACKAGES))
	nice -n 10 $(GO) run ./cmd/adaptstt -out internal/stages/stt/sphinx/acoustic

# The transform of the model's means for telephone audio (cmd/adaptstt
# -telephone): the training split spoken by eight synthetic voices through
# 8 kHz mu-law, one MLLR transform; written into
# internal/stages/stt/sphinx/telephone, which voiced embeds. About 4 minutes.
TELEPHONE_VOICES := flite-slt,flite-kal,flite-awb,flite-rms,espeak-en-us,espeak-en,espeak-en-us-f3,espeak-en-gb-rp
adapt-telephone: setup
	@$(call install_missing,$(ADAPT_PACKAGES))
	nice -n 10 $(GO) run ./cmd/adaptstt -telephone -method mllr -voices $(TELEPHONE_VOICES) -out internal/stages/stt/sphinx/telephone

# The second model's transform for wideband audio (-stt.second-model): the
# training split spoken by eleven synthetic voices that no evaluation uses,
# one MLLR transform; written into internal/stages/stt/sphinx/synthetic,
# which voiced embeds. About 20 minutes (the first run synthesises 15,070
# utterances too).
SYNTHETIC_VOICES := flite-awb,flite-rms,espeak-en-gb-rp,espeak-en-029,espeak-en-gb-scotland,espeak-en-gb-gbclan,espeak-en-gb-gbcwmd,espeak-en-029-f3,espeak-en-029-m3,espeak-en-gb-rp-f3,espeak-en-gb-scotland-f3
adapt-synthetic: setup
	@$(call install_missing,$(ADAPT_PACKAGES))
	nice -n 10 $(GO) run ./cmd/adaptstt -method mllr -voices $(SYNTHETIC_VOICES) -out internal/stages/stt/sphinx/synthetic

# Each fuzz target for FUZZTIME, one go test run per target (go fuzzes one
# target at a time). A crasher is saved under the package's testdata/fuzz,
# where plain go test runs it from then on. FUZZFLAGS passes more flags,
# e.g. FUZZFLAGS=-parallel=1 on a busy machine.
FUZZTIME  ?= 2m
FUZZFLAGS ?=
FUZZ_TARGETS := \
	./internal/protocol:FuzzDecodeBinaryAudio \
	./internal/protocol:FuzzDecodeText \
	./internal/protocol:FuzzHeaderFastPath \
	./internal/protocol:FuzzPingFastPath \
	./internal/wav:FuzzDecode \
	./internal/stages/llm/sse:FuzzReader \
	./internal/domain:FuzzLoadFS \
	./internal/stages/stt/lm:FuzzARPA \
	./internal/stages/stt/lm:FuzzLexicon \
	./internal/twilio:FuzzParse \
	./internal/twilio:FuzzSignature \
	./internal/session:FuzzResumeToken \
	./internal/session:FuzzClientAddr \
	./internal/audio/resample:FuzzProcess

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz: $$fn ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) $$pkg; \
	done

# The README's flag reference is the output of voiced -h.
readme-flags:
	./scripts/readme-flags.sh

clean:
	rm -rf bin
