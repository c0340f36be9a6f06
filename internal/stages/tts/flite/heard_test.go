//go:build cgo && !noflite

package flite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// A synthesis stopped after its first chunk: a listener who played all
// of that audio heard the words that ended in it, not the whole sentence
// (Result.Heard is "up to the end of the last word whose audio ended by
// then"; the session cuts the history with it).
func TestHeardOfStoppedSynthesis(t *testing.T) {
	e := newEngine(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := e.Synthesize(ctx, speech.Request{Text: sentence, SampleRate: 16000}, func([]int16) { cancel() })
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, res.Chunks)
	require.Less(t, res.Audio(), res.Words[len(res.Words)-1].End, "the audio stops before the sentence's end")
	want := 0
	for _, w := range res.Words {
		if w.End <= res.Audio() {
			want = w.To
		}
	}
	require.Equal(t, want, res.Heard(res.Audio()), "all the audio sent played: only the words it holds were heard")
	require.Less(t, res.Heard(res.Audio()+time.Hour), len(sentence), "the rest of the sentence was never sent")
}
