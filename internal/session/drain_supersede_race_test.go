package session_test

import (
	"context"
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

// TestDrainBetweenSupersedeAndStart: the drain begins after a superseding
// request has checked it (and so cancelled the request in flight as
// replaced) but before it starts. The new request must not then be
// refused as well: the client would get neither answer, the bug
// TestDrainSupersedeKeepsInFlight fixed for a drain that began earlier.
// The request that replaced one takes its place and is answered.
func TestDrainBetweenSupersedeAndStart(t *testing.T) {
	fake := &fakeStages{started: make(chan string, 8)}
	release := make(chan struct{})
	fake.finish = finishOnRelease(release)
	reg := prometheus.NewRegistry()
	pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	var srv *session.Server
	hook := session.OnReplacedForTest(func() { srv.DrainNowForTest() }) // srv is set below
	srv = session.NewServer(session.Config{}, pl, slog.New(hook), session.NewMetrics(reg))
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, srv: srv, http: hs, fake: fake, reg: reg}
	c := h.dial()
	c.sendText(`{"type":"session.update","supersede":true}`)
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	<-fake.started

	c.audio("r2", 0, true, time.Now().Add(5*time.Second))
	term, _ := c.terminal("r1")
	require.Equal(t, protocol.CodeReplaced, errorOf(t, term).Code, "r1: %s", term.Raw)
	close(release)
	term, _ = c.terminal("r2")
	resultOf(t, term)
}
