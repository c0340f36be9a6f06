package session_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestDTMFDigitsNotLogged: the keys a caller presses are what a caller
// says with the keypad (a PIN, a card or account number): without
// -log-transcripts they are not logged at any level, like transcripts
// (TestLogTranscripts); with it they are, as transcripts are.
func TestDTMFDigitsNotLogged(t *testing.T) {
	for _, on := range []bool{false, true} {
		var logs voicedtest.LogBuffer
		reg := prometheus.NewRegistry()
		fake := &fakeStages{}
		pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
		require.NoError(t, err)
		srv := session.NewServer(session.Config{LogTranscripts: on, Greeting: "-"}, pl,
			slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), session.NewMetrics(reg))
		hs := httptest.NewServer(srv)
		h := &harness{t: t, ctx: t.Context(), srv: srv, http: hs, fake: fake, reg: reg}
		tw := dialTwilio(t, h, "")
		tw.start(nil)
		for _, d := range "4929" {
			tw.send(map[string]any{"event": "dtmf", "streamSid": tw.sid, "dtmf": map[string]string{"track": "inbound_track", "digit": string(d)}})
		}
		tw.send(map[string]any{"event": "stop", "streamSid": tw.sid, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA0123"}})
		for range tw.msgs {
		}
		<-tw.done
		require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
		require.NoError(t, srv.Close())
		hs.Close()
		require.Equal(t, on, strings.Contains(logs.String(), "digit=9"), "-log-transcripts %v, logs:\n%s", on, logs.String())
	}
}

// TestDTMFBeforeStartIgnored: until its start is taken a call is nobody's
// (with tokens, it has not authenticated): its keys are not the caller's,
// as its media are not, and with -log-transcripts each dtmf message was
// logged at info level, one line per message from an unauthenticated
// peer (the log that "bad Media Streams message" is kept from flooding).
func TestDTMFBeforeStartIgnored(t *testing.T) {
	var logs voicedtest.LogBuffer
	reg := prometheus.NewRegistry()
	fake := &fakeStages{}
	pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	srv := session.NewServer(session.Config{LogTranscripts: true, Greeting: "-", Tokens: []string{"secret"}}, pl,
		slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), session.NewMetrics(reg))
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	h := &harness{t: t, ctx: t.Context(), srv: srv, http: hs, fake: fake, reg: reg}
	tw := dialTwilio(t, h, "")
	tw.send(map[string]any{"event": "connected", "protocol": "Call", "version": "1.0.0"})
	for _, d := range "4929" {
		tw.send(map[string]any{"event": "dtmf", "streamSid": tw.sid, "dtmf": map[string]string{"track": "inbound_track", "digit": string(d)}})
	}
	tw.stopAndWait()
	require.NotContains(t, logs.String(), "dtmf", "a key of a call not started (not authenticated) was taken")
}
