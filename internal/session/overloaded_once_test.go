package session_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// lateFailure is a Runner whose pipeline fails with err only once the
// request's context has ended: its failure loses the race for the
// terminal to whatever ended the request (a decoder wait that times out
// as the deadline or a cancel arrives). done closes once Done returned.
type lateFailure struct {
	err  error
	done chan struct{}
}

func (l lateFailure) Run(ctx context.Context, req pipeline.Request, sink pipeline.Sink) {
	defer close(l.done)
	defer req.Audio.Close()
	<-ctx.Done()
	sink.Done(nil, l.err)
}

// TestOverloadedCountedOnlyWhenSent: voiced_overloaded_total counts
// requests refused or ended with overloaded; a pipeline overload that
// loses the race for the terminal (the client's cancel was sent instead)
// ended nothing with overloaded and is not counted.
func TestOverloadedCountedOnlyWhenSent(t *testing.T) {
	for _, tt := range []struct {
		err   error
		cause string
	}{
		{pipeline.ErrNoRecognizer, "no_recognizer"},
		{pipeline.ErrOverloaded, "upstream"},
	} {
		t.Run(tt.cause, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			run := lateFailure{err: tt.err, done: make(chan struct{})}
			srv := session.NewServer(session.Config{}, run, slog.New(slog.NewTextHandler(io.Discard, nil)), session.NewMetrics(reg))
			hs := httptest.NewServer(srv)
			t.Cleanup(func() {
				require.NoError(t, srv.Close())
				hs.Close()
			})
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			h := &harness{t: t, ctx: ctx, srv: srv, http: hs, reg: reg}
			c := h.dial()
			c.audio("r1", 0, true, time.Now().Add(5*time.Second))
			c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "r1"})
			term, _ := c.terminal("r1")
			require.Equal(t, protocol.CodeCancelled, errorOf(t, term).Code)
			select {
			case <-run.done:
			case <-ctx.Done():
				t.Fatal("the pipeline never returned")
			}
			require.EqualValues(t, 0, metricValue(t, h, `voiced_overloaded_total{cause="`+tt.cause+`"}`),
				"a cancelled request counted as overloaded")
			require.EqualValues(t, 1, metricValue(t, h, "voiced_requests_total"))
		})
	}
}
