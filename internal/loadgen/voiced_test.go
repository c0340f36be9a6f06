package loadgen

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/sim"
)

// startVoiced serves a real voiced session server in sim mode, in
// process, the way cmd/voiced wires it: sessions at /v1/session and
// Prometheus metrics (with the process and Go collectors) at /metrics.
func startVoiced(t *testing.T, simCfg sim.Config) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	st := sim.New(simCfg)
	p, err := pipeline.New(pipeline.Config{},
		pipeline.Stages{STT: st.STT, Intent: st.Intent, Retrieval: st.Retrieval, LLM: st.LLM},
		pipeline.NewMetrics(reg))
	require.NoError(t, err)
	srv := session.NewServer(session.Config{}, p, slog.New(slog.DiscardHandler), session.NewMetrics(reg))
	mux := http.NewServeMux()
	mux.Handle("GET /v1/session", srv)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return addrOf(hs)
}

// lateTolerance is how late, as the client sees it, a terminal message may
// arrive in these tests; see requireInvariants.
const lateTolerance = 50 * time.Millisecond

// requireInvariants checks the protocol's promises on a report: exactly
// one terminal message per request (none missing, none duplicated,
// nothing after it) and none after the deadline.
func requireInvariants(t *testing.T, rep Report) {
	t.Helper()
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Log("\n" + table.String())
	require.True(t, rep.OK(), "violations: %v", rep.Violations)
	inv := rep.Invariants
	require.Zero(t, inv.Missing, "requests with no terminal message")
	require.Zero(t, inv.Duplicate, "requests with more than one terminal message")
	require.Zero(t, inv.AfterTerminal, "messages after a terminal message")
	// The server's own count is exact: no terminal message left after its
	// deadline. The client sees each one after loopback transit and its
	// own scheduling, which on a shared 2-core machine can stall for tens
	// of milliseconds (see clientTimerLagMs), hence the tolerance.
	require.Zero(t, inv.LateBeyondTolerance, "terminal messages after the deadline, as the client saw them")
	if rep.Server != nil && rep.Server.LateTerminals != nil {
		require.Zero(t, *rep.Server.LateTerminals, "terminal messages after the deadline, as voiced counted them")
	}
	require.Zero(t, rep.Requests.ServerClosed, "sessions closed by the server")
	require.Empty(t, rep.SessionErrors)
	r := rep.Requests
	require.Equal(t, r.Started, r.Terminated+r.Disconnected)
}

// TestVoicedSimInvariants runs voiceload for a few seconds against a real
// voiced in sim mode, with every cancellation path in the mix.
func TestVoicedSimInvariants(t *testing.T) {
	addr := startVoiced(t, sim.Config{Seed: 11})
	cfg := Config{
		Addr: addr, Sessions: 16, Duration: 4 * time.Second, Think: 100 * time.Millisecond,
		Synthetic: 400 * time.Millisecond, Seed: 11,
		Mix: Mix{Cancel: 15, Replace: 10, BargeIn: 10, Disconnect: 5}, LateTolerance: lateTolerance,
	}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Greater(t, rep.Requests.Started, 50)
	require.Positive(t, rep.Requests.ByCode["result"])
	require.Positive(t, rep.Requests.ByCode["cancelled"]+rep.Requests.ByCode["replaced"], "no cancellation observed")
	require.NotNil(t, rep.Server)
	require.Positive(t, rep.Server.Scrapes)
	require.Positive(t, rep.Server.CPUSeconds)
}

// TestVoicedSimTightDeadlines gives requests less time than the stages
// need, so that many end on their deadline: degraded or
// deadline_exceeded, and still never late.
func TestVoicedSimTightDeadlines(t *testing.T) {
	addr := startVoiced(t, sim.Config{Seed: 12})
	cfg := Config{
		Addr: addr, Sessions: 16, Duration: 3 * time.Second, Think: 100 * time.Millisecond,
		Synthetic: 300 * time.Millisecond, Budget: 450 * time.Millisecond, Seed: 12, LateTolerance: lateTolerance,
	}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Equal(t, 450.0, rep.BudgetMs)
	require.Positive(t, rep.SlackOnDeadline.Count, "no request ran into its deadline")
	require.Positive(t, rep.Degraded+rep.Requests.ByCode["deadline_exceeded"])
	require.NotNil(t, rep.Server.LateTerminals, "voiced exports voiced_late_terminals_total")
}
