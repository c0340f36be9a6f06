//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Config.Parallel says how many decoders compute at once, and the gate
// enforces it for every block, partial, final pass and reset, and for
// Engine.Start, which calls decoder.start: for an utterance on the other
// band than the decoder's last one it runs vd_use_mllr (PocketSphinx
// reloads the means and variances from disk and transforms them: 4-15 ms
// of CPU, BenchmarkChannelSwitch), and it decodes the priming silence. It
// used to do both without a CPU from the gate. With the gate's only CPU
// held by someone else, Start must not touch the model.
func TestStartWaitsForTheGate(t *testing.T) {
	skipWithoutModels(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e, err := New(ctx, Config{Decoders: 1, Parallel: 1, CacheDir: cacheDir}, testCorpus(), quiet, nil)
	require.NoError(t, err)
	defer e.Close()
	require.NotEmpty(t, e.cfg.channels[chanNarrow], "the telephone transform is on by default")

	// Hold the only CPU, as a final pass on another stream would.
	require.NoError(t, e.gate.acquire(ctx, true))
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer scancel()
	r, err := e.Start(sctx, 8000)
	switched := false
	if err == nil {
		switched = r.(*recognizer).d.ch == chanNarrow
	}
	e.gate.release()
	if r != nil {
		require.NoError(t, r.Close())
	}
	require.False(t, switched,
		"Start switched the decoder's acoustic model to the telephone transform while the gate's only CPU was held: decoding work outside -stt.parallel")
}
