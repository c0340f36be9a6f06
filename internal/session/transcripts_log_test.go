package session_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/voicedtest"
)

// TestLogTranscripts: -log-transcripts logs each transcript and answer
// at the default log level (it was debug, so the flag alone logged
// nothing); without it neither is logged at any level.
func TestLogTranscripts(t *testing.T) {
	for _, tt := range []struct {
		on    bool
		level slog.Level
	}{{true, slog.LevelInfo}, {false, slog.LevelDebug}} {
		var logs voicedtest.LogBuffer
		reg := prometheus.NewRegistry()
		fake := &fakeStages{}
		pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
		require.NoError(t, err)
		srv := session.NewServer(session.Config{LogTranscripts: tt.on}, pl,
			slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tt.level})), session.NewMetrics(reg))
		hs := httptest.NewServer(srv)
		h := &harness{t: t, ctx: t.Context(), srv: srv, http: hs, fake: fake, reg: reg}
		c := h.dial()
		c.audio("r1", 0, true, time.Now().Add(time.Second))
		c.terminal("r1")
		c.conn.CloseNow()
		require.NoError(t, srv.Close())
		hs.Close()
		got := strings.Contains(logs.String(), "where is my order") && strings.Contains(logs.String(), "ships today.")
		require.Equal(t, tt.on, got, "-log-transcripts %v at %v:\n%s", tt.on, tt.level, logs.String())
	}
}
