// Package voicedtest serves a real voiced session server in simulation
// mode, in process, for the tests of its clients (the load tool): the
// session server and pipeline as cmd/voiced wires them, with the simulated
// stages of internal/stages/sim, sessions at /v1/session and Prometheus
// metrics (with the process and Go collectors) at /metrics; and a stub
// that speaks just enough of the protocol to misbehave (Stub).
package voicedtest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/sim"
)

// Start serves voiced with simulated stages until the test ends and
// returns its host:port.
func Start(t testing.TB, simCfg sim.Config) string {
	t.Helper()
	addr, _ := StartServer(t, simCfg)
	return addr
}

// StartServer is Start that also returns the session server, for tests
// that shut it down.
func StartServer(t testing.TB, simCfg sim.Config) (string, *session.Server) {
	t.Helper()
	return startServer(t, simCfg, session.Config{})
}

// StartConfig is StartServer with the session server's configuration
// (tokens, limits) given.
func StartConfig(t testing.TB, simCfg sim.Config, scfg session.Config) (string, *session.Server) {
	t.Helper()
	return startServer(t, simCfg, scfg)
}

// StartSpeech is Start with answers spoken by syn to sessions that ask.
func StartSpeech(t testing.TB, simCfg sim.Config, syn session.Synthesizer) string {
	t.Helper()
	addr, _ := startServer(t, simCfg, session.Config{Speech: syn})
	return addr
}

func startServer(t testing.TB, simCfg sim.Config, scfg session.Config) (string, *session.Server) {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	st := sim.New(simCfg)
	p, err := pipeline.New(pipeline.Config{},
		pipeline.Stages{STT: st.STT, Intent: st.Intent, Retrieval: st.Retrieval, LLM: st.LLM},
		pipeline.NewMetrics(reg))
	if err != nil {
		t.Fatalf("voicedtest: %v", err)
	}
	srv := session.NewServer(scfg, p, slog.New(slog.DiscardHandler), session.NewMetrics(reg))
	mux := http.NewServeMux()
	mux.Handle("GET /v1/session", srv)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return strings.TrimPrefix(hs.URL, "http://"), srv
}
