//go:build cgo && !nosphinx

package sphinx

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFailedDecoderRebuilt: a decoder a call into PocketSphinx failed on
// is destroyed and rebuilt, not handed out again. It went back to the
// pool clean (a failed end left it out of its utterance), or dirty with
// a reset that did nothing (a failed start, before its utterance began):
// the pool rebuilds only a decoder whose reset fails. The faults are
// made with what the engine holds, no hook in it: a search setting the
// decoder does not have, and an utterance PocketSphinx has already
// ended, which its ps_end_utt refuses.
func TestFailedDecoderRebuilt(t *testing.T) {
	skipWithoutModels(t)
	for _, tc := range []struct {
		name string
		fail func(ctx context.Context, t *testing.T, e *Engine)
	}{
		{"start failed", func(ctx context.Context, t *testing.T, e *Engine) {
			search := e.cfg.Search
			e.cfg.Search = "no-such-search"
			_, err := e.Start(ctx, modelRate)
			e.cfg.Search = search
			require.Error(t, err)
		}},
		{"end failed", func(ctx context.Context, t *testing.T, e *Engine) {
			r, err := e.Start(ctx, modelRate)
			require.NoError(t, err)
			defer r.Close()
			_, err = r.Write(ctx, tone(440, 3000, 2*r.(*recognizer).cmnSamples+block))
			require.NoError(t, err)
			d := r.(*recognizer).d
			_, err = d.end() // PocketSphinx ends the utterance
			require.NoError(t, err)
			d.inUtt = true // while the engine takes it for open
			_, err = r.Finish(ctx)
			require.ErrorContains(t, err, "cannot end utterance")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			e, err := New(ctx, Config{Decoders: 1, MaxWait: testTimeout, CacheDir: cacheDir}, testCorpus(), quiet, nil)
			require.NoError(t, err)
			defer e.Close()
			r, err := e.Start(ctx, modelRate)
			require.NoError(t, err)
			first := r.(*recognizer).d
			require.NoError(t, r.Close())

			tc.fail(ctx, t, e)

			r, err = e.Start(ctx, modelRate) // waits for the rebuild
			require.NoError(t, err)
			defer r.Close()
			require.False(t, first == r.(*recognizer).d, "the failed decoder handed out again")
		})
	}
}
