package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// TestAddrInUseNamesTheFlag: a port already taken is reported against
// -addr, as one on the admin listener is against -admin-addr.
func TestAddrInUseNamesTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	err = run(ctx, []string{"-addr", ln.Addr().String(), "-admin-addr", "off", "-stages", "sim", "-log-format", "json"},
		func(string) string { return "" }, io.Discard, io.Discard)
	require.ErrorContains(t, err, "-addr")
	require.ErrorContains(t, err, "address already in use")
}

// TestFlagValuesCheckedAtStart: a misspelt engine, model or provider
// name stops voiced at once, naming its flag. Each was noticed only by
// the engine it configures, after the engines before it had warmed up:
// 12 to 33 s after the start (the speech engine is built after the
// recogniser's pool), and -llm.openai.max-tokens-field not at all while
// the provider had no key.
func TestFlagValuesCheckedAtStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "intents.yaml")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-stt.engine", "whisper"}, `-stt.engine "whisper": want remote or sphinx`},
		{[]string{"-stt.lm", "foo"}, `-stt.lm "foo"`},
		{[]string{"-stt.search", "slow"}, `-stt.search "slow"`},
		{[]string{"-stt.busy-search", "x"}, `-stt.busy-search "x"`},
		{[]string{"-stt.acoustic", "adaptd"}, `-stt.acoustic "adaptd"`},
		{[]string{"-stt.narrowband-acoustic", "x"}, `-stt.narrowband-acoustic "x"`},
		{[]string{"-stt.lm-weight", "2"}, `-stt.lm-weight 2`},
		{[]string{"-llm.order", "openai,mistral"}, `-llm.order "openai,mistral"`},
		{[]string{"-llm.openai.max-tokens-field", "x"}, `-llm.openai.max-tokens-field "x"`},
		{[]string{"-tts.engine", "espeak"}, `-tts.engine "espeak": want flite, remote or off`},
		// Files named by flags: a wrong path is the flag's, not a
		// package to install.
		{[]string{"-stt.dict", "/nonexistent/cmudict.dict"}, `-stt.dict: stat /nonexistent/cmudict.dict: no such file`},
		{[]string{"-stt.model-dir", "/nonexistent/en-us"}, `-stt.model-dir: stat /nonexistent/en-us/mdef: no such file`},
		{[]string{"-stt.general-lm", "/nonexistent/en-us.lm.bin"}, `-stt.general-lm: stat /nonexistent/en-us.lm.bin: no such file`},
		{[]string{"-stt.lm", "file"}, `-stt.lm file needs -stt.lm-file`},
		{[]string{"-stt.lm", "file", "-stt.lm-file", "/nonexistent/lm.arpa"}, `-stt.lm-file: stat /nonexistent/lm.arpa: no such file`},
		{[]string{"-stt.pronunciations", "/nonexistent/extra.dict"}, `-stt.pronunciations: stat /nonexistent/extra.dict: no such file`},
		{[]string{"-retrieval.index", "/nonexistent/index.db"}, `-retrieval.index /nonexistent/index.db: stat /nonexistent: no such file`},
		// A directory passed, to fail once the classifier was trained
		// with "unable to open database file".
		{[]string{"-retrieval.index", os.TempDir()}, `-retrieval.index ` + os.TempDir() + `: is a directory, not a file`},
		// Numbers: refused by the classifier and the recogniser only, 4
		// to 9 s after the start, naming no flag (the classifier's
		// message was its whole Config, 26 KB of the domain's text).
		{[]string{"-intent.threshold", "NaN"}, `-intent.threshold NaN: want a finite number`},
		{[]string{"-intent.alt-scale", "-1"}, `-intent.alt-scale -1: want a number above 0`},
		{[]string{"-intent.alternatives", "50"}, `-intent.alternatives 50: the embedded recogniser reports at most 20`},
		{[]string{"-stt.decoders", "-1"}, `-stt.decoders -1: must not be negative`},
		{[]string{"-stt.speaker-warp", "NaN"}, `-stt.speaker-warp NaN: want a finite number`},
		{[]string{"-stt.engine", "remote"}, `-stt.engine remote needs -stt.remote.url`},
		// Refused by the speech engine once voiced was listening, with
		// exit status 1, naming no flag.
		{[]string{"-tts.voice", "bob"}, `-tts.voice: unknown voice "bob" (want one of slt, kal, awb, rms)`},
		{[]string{"-tts.engine", "remote", "-tts.voice", "slt"}, `-tts.voice: unknown voice "slt" (want one of alloy)`},
		// Accepted, then every audio frame closed its session with 1009.
		{[]string{"-max-message-bytes", "1"}, `-max-message-bytes 1: must be at least 2048`},
		{[]string{"-max-message-bytes", "2047"}, `-max-message-bytes 2047: must be at least 2048`},
		{[]string{"-tts.parallel", "-1"}, `-tts.parallel -1: must not be negative`},               // was one per CPU
		{[]string{"-retrieval.max-conns", "-1"}, `-retrieval.max-conns -1: must not be negative`}, // was 4
		{[]string{"-domain", "/nonexistent/domain"}, `-domain: stat /nonexistent/domain: no such file`},
		{[]string{"-domain", file}, `-domain ` + file + `: not a directory`},
	} {
		_, err := parseFlags(tt.args, func(string) string { return "" }, io.Discard)
		require.ErrorContains(t, err, tt.wantErr, "%v", tt.args)
	}
	for _, args := range [][]string{
		{"-stt.engine", "remote", "-stt.remote.url", "http://127.0.0.1:9/v1", "-stt.search", "full", "-stt.lm", "general", "-stt.acoustic", "adapted"},
		{"-intent.alternatives", "50", "-stt.nbest", "5"},
		{"-stages", "sim", "-intent.threshold", "NaN", "-stt.decoders", "-1"}, // engines not built
		{"-tts.engine", "off"},
		{"-tts.engine", "remote"},
		{"-max-message-bytes", "2048"},
		{"-tts.voice", "kal"},
		{"-tts.engine", "remote", "-tts.remote.voices", "nova,alloy", "-tts.voice", "alloy"},
		{"-tts.engine", "off", "-tts.voice", "bob"}, // warned of (TestSpeechOffWarnsOfSpeechFlags)
		{"-llm.order", "gemini, openai", "-llm.openai.max-tokens-field", "both"},
	} {
		_, err := parseFlags(args, func(string) string { return "" }, io.Discard)
		require.NoError(t, err, "%v", args)
	}
}

// TestSpeechVoiceCheckedBeforeRecognizer: a default voice the speech
// engine does not have stops voiced before the recogniser's decoders are
// built, not after (26 to 33 s on a 2-core machine).
func TestSpeechVoiceCheckedBeforeRecognizer(t *testing.T) {
	if _, err := os.Stat("/usr/share/pocketsphinx/model/en-us/en-us"); err != nil {
		t.Skip("pocketsphinx-en-us not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	logs := &syncBuf{}
	err := run(ctx, []string{"-addr", "127.0.0.1:0", "-admin-addr", "off", "-log-format", "json",
		"-domain", miniDomain(t), "-tts.voice", "bob", "-stt.decoders", "1"}, func(string) string { return "" }, io.Discard, logs)
	require.ErrorContains(t, err, `unknown voice "bob"`)
	require.NotContains(t, logs.String(), "stt decoders warm", "the recogniser was built before the voice was checked")
}

// miniDomain writes a small domain, quick to train and index.
func miniDomain(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, s string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644))
	}
	write("intents.yaml", "intents:\n  - name: apples\n    examples: [are apples red]\n    articles: [apples]\n"+
		"  - name: pears\n    examples: [are pears green]\n    articles: [pears]\n")
	write("articles/apples.md", "# Apples\n\nApples are red.\n")
	write("articles/pears.md", "# Pears\n\nPears are green.\n")
	return dir
}

// TestStopDuringWarmUpIsClean: a signal (here ctx, which the start
// watches alike) while the engines warm up stops voiced cleanly: run
// returns nil, so the process exits 0 as after a drain, and says why. It
// returned the error of whichever engine saw the cancellation
// ("retrieval: retrieval: connect: context canceled", exit status 1), as
// if the start had failed. The LLM provider's warm-up is held until the
// stop, and the recogniser built after it sees the stop.
func TestStopDuringWarmUpIsClean(t *testing.T) {
	if _, err := os.Stat("/usr/share/pocketsphinx/model/en-us/en-us"); err != nil {
		t.Skip("pocketsphinx-en-us not installed")
	}
	warming := make(chan struct{})
	var once sync.Once
	ai := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(warming) })
		<-r.Context().Done()
	}))
	defer ai.Close()
	defer ai.CloseClientConnections()

	ctx, cancel := context.WithTimeout(context.Background(), 2*testTimeout)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	logs := &syncBuf{}
	errc := make(chan error, 1)
	go func() {
		errc <- run(runCtx, []string{"-addr", "127.0.0.1:0", "-admin-addr", "off", "-log-format", "json",
			"-domain", miniDomain(t), "-stt.decoders", "1", "-tts.engine", "off",
			"-llm.order", "openai", "-llm.openai.base-url", ai.URL + "/v1"},
			func(k string) string {
				if k == "OPENAI_API_KEY" {
					return "test-key"
				}
				return ""
			}, io.Discard, logs)
	}()
	select {
	case <-warming:
	case err := <-errc:
		t.Fatalf("voiced exited before its warm-up: %v\n%s", err, logs)
	case <-ctx.Done():
		t.Fatalf("no warm-up request:\n%s", logs)
	}
	stop()
	select {
	case err := <-errc:
		require.NoError(t, err, "%s", logs)
		require.Contains(t, logs.String(), "stopped while starting")
	case <-ctx.Done():
		t.Fatalf("voiced did not stop:\n%s", logs)
	}
}

// TestStopDuringTrainingIsPrompt: a signal (the start's ctx) while the
// intent classifier trains stops the training, which fails with the
// stop. Training took no context and ran to its end, seconds with the
// sample domain, before the next engine saw the stop.
func TestStopDuringTrainingIsPrompt(t *testing.T) {
	cfg, err := parseFlags([]string{"-tts.engine", "off"}, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err = buildStages(ctx, cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "intent: training stopped", "the classifier trained to its end")
}

// TestSpeechOffWarnsOfSpeechFlags: -tts.engine off with other -tts.*
// flags given says once, at warn level, which it ignores: the operator
// who set a voice hears none, and was told only "speech off" at info.
func TestSpeechOffWarnsOfSpeechFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // in the log; "" for no warning
	}{
		{[]string{"-tts.engine", "off"}, ""},
		{[]string{"-tts.engine", "off", "-tts.voice", "kal", "-tts.parallel", "2"}, `"flags":["-tts.parallel","-tts.voice"]`},
		{[]string{"-tts.voice", "kal", "-tts.engine", "off"}, `"flags":["-tts.voice"]`},
	} {
		cfg, err := parseFlags(tt.args, func(string) string { return "" }, io.Discard)
		require.NoError(t, err, "%v", tt.args)
		var logs bytes.Buffer
		log, err := newLogger("json", "info", &logs)
		require.NoError(t, err)
		eng, err := buildSpeech(t.Context(), cfg, log, prometheus.NewRegistry())
		require.NoError(t, err)
		require.Nil(t, eng)
		require.Equal(t, 1, strings.Count(logs.String(), "speech off"), "%v: %s", tt.args, &logs)
		if tt.want == "" {
			require.NotContains(t, logs.String(), `"level":"WARN"`, "%v", tt.args)
			continue
		}
		require.Contains(t, logs.String(), `"level":"WARN"`, "%v", tt.args)
		require.Contains(t, logs.String(), tt.want, "%v", tt.args)
	}
}

// TestLogLevelErrorListsLevels: a misspelt -log-level is answered with the
// levels there are, as -log-format's is, not with slog's "unknown name".
func TestLogLevelErrorListsLevels(t *testing.T) {
	_, err := newLogger("auto", "verbose", io.Discard)
	require.EqualError(t, err, `-log-level "verbose": want debug, info, warn or error`)
	_, err = newLogger("auto", "WARN", io.Discard)
	require.NoError(t, err)
}

// TestExitStatus: a command line voiced refuses exits with status 2, as
// the flag package's ExitOnError does and as the README says, so that
// systemd does not restart it every second (deploy/voiced.service); a
// failure after the start exits 1, -h 0. Every error exited 1.
func TestExitStatus(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-max-sesions", "10"}, 2},
		{[]string{"-max-sessions", "-1"}, 2},
		{[]string{"-max-sessions-per-client", "-1"}, 2},
		{[]string{"-trusted-proxies", "10.0.0.0/33"}, 2},
		{[]string{"-log-level", "verbose"}, 2},
		{[]string{"-tts.voice", "bob"}, 2},  // was 1: refused by the speech engine
		{[]string{"-addr", "0.0.0.0:0"}, 2}, // no -auth-token
		{[]string{"-addr", busy.Addr().String()}, 1},
		// Refused only once listening on -addr, with exit status 1.
		{[]string{"-redis", "http://u:pw-s3cret@10.0.0.5/0"}, 2},
		{[]string{"-addr", "127.0.0.1:18080", "-admin-addr", "127.0.0.1:18080"}, 2},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0", "-admin-addr", "off", "-stages", "sim", "-log-format", "json"}, tt.args...),
			func(string) string { return "" }, io.Discard, io.Discard)
		cancel()
		require.Equal(t, tt.want, exitStatus(err), "%v: %v", tt.args, err)
	}
}
