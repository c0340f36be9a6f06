package stt

import (
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestMaxUtteranceFlagBindsRemoteEngine: -stt.max-utterance is documented
// as "longest utterance accepted" for either engine (its help has no
// "embedded engine:" prefix), but only the embedded engine's Config got
// it: with -stt.engine=remote the remote engine kept its own 60 s default,
// buffering and uploading whatever the flag said to refuse.
func TestMaxUtteranceFlagBindsRemoteEngine(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-stt.engine=remote", "-stt.remote.url=http://127.0.0.1:9/v1", "-stt.max-utterance=1s"}))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e, err := New(ctx, c, nil, quiet, nil)
	require.NoError(t, err)
	defer e.Close()
	r, err := e.Start(ctx, 16000)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Write(ctx, make([]int16, 2*16000))
	require.ErrorIs(t, err, pipeline.ErrBadAudio, "2 s of audio with -stt.max-utterance=1s")
}
