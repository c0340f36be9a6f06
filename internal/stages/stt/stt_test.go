package stt

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/remote"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 30 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-stt.engine=remote", "-stt.decoders=3", "-stt.lm=general", "-stt.lm-weight=0.7",
		"-stt.max-wait=100ms", "-stt.remote.url=http://localhost:9/v1", "-stt.remote.model=m", "-stt.no-fwdflat",
		"-stt.cmn-window=2s", "-stt.sphinx-args=-lw 8", "-stt.search=fast", "-stt.parallel=1", "-stt.busy-search=full", "-stt.busy-above=6",
		"-stt.acoustic=adapted"}))
	require.Equal(t, sphinx.AcousticAdapted, c.Sphinx.Acoustic)
	require.Equal(t, sphinx.SearchFull, c.Sphinx.BusySearch)
	require.Equal(t, 6, c.Sphinx.BusyAbove)
	require.Equal(t, 1, c.Sphinx.Parallel)
	require.Equal(t, sphinx.SearchFast, c.Sphinx.Search)
	require.Equal(t, 2*time.Second, c.Sphinx.CMNWindow)
	require.Equal(t, []string{"-lw", "8"}, c.Sphinx.Args)
	require.Equal(t, EngineRemote, c.Engine)
	require.Equal(t, 3, c.Sphinx.Decoders)
	require.Equal(t, sphinx.LMGeneral, c.Sphinx.LM)
	require.Equal(t, 0.7, c.Sphinx.DomainWeight)
	require.Equal(t, 100*time.Millisecond, c.Sphinx.MaxWait)
	require.True(t, c.Sphinx.NoFwdflat)
	require.Equal(t, "http://localhost:9/v1", c.Remote.BaseURL)
	require.Equal(t, "m", c.Remote.Model)

	// Defaults.
	var d Config
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	d.RegisterFlags(fs)
	require.NoError(t, fs.Parse(nil))
	require.Equal(t, EngineSphinx, d.Engine)
	require.Equal(t, sphinx.DefaultDomainWeight, d.Sphinx.DomainWeight)
	require.Equal(t, sphinx.DefaultSearch, d.Sphinx.Search)
	require.Zero(t, d.Sphinx.Parallel)
	require.Equal(t, sphinx.DefaultBusySearch, d.Sphinx.BusySearch)
	require.Equal(t, sphinx.AcousticGeneral, d.Sphinx.Acoustic)
	require.Equal(t, "VOICED_STT_API_KEY", d.Remote.APIKeyEnv)
}

func TestNew(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	_, err := New(ctx, Config{Engine: "nope"}, nil, quiet, nil)
	require.ErrorContains(t, err, "unknown engine")

	e, err := New(ctx, Config{Engine: EngineRemote, Remote: remote.Config{BaseURL: "http://127.0.0.1:9/v1"}}, nil, quiet, prometheus.NewRegistry())
	require.NoError(t, err)
	require.Equal(t, EngineRemote, e.Name())
	require.True(t, e.Ready())
	require.NoError(t, e.Close())

	_, err = New(ctx, Config{Engine: EngineRemote}, nil, quiet, nil)
	require.ErrorContains(t, err, "base URL")
}

func TestEmbeddedDefault(t *testing.T) {
	if _, err := os.Stat(sphinx.DefaultModelDir); err != nil {
		t.Skip("pocketsphinx-en-us not installed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e, err := New(ctx, Config{Sphinx: sphinx.Config{Decoders: 1, CacheDir: t.TempDir()}},
		[]string{"Where is my order?", "I want to cancel my order."}, quiet, prometheus.NewRegistry())
	if err != nil {
		// Without cgo the embedded engine is unavailable and says so.
		require.ErrorIs(t, err, pipeline.ErrUnavailable)
		require.ErrorContains(t, err, "cgo")
		return
	}
	require.Equal(t, EngineSphinx, e.Name())
	require.True(t, e.Ready())
	r, err := e.Start(ctx, 16000)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.NoError(t, e.Close())
	require.False(t, e.Ready())
}
