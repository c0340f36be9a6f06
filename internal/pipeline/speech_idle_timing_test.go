package pipeline_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestSpeechTimingEndsWithTheLastSentence: every sentence is spoken at
// once, and the LLM's stream then stays open for 400 ms with no more text
// (a late usage chunk, [DONE], the end of a Gemini stream). timings.tts
// is "to its last audio: the end of its last sentence's synthesis ...
// however long the text answer went on after that": not the 400 ms the
// speech loop spent waiting for a sentence that never came.
func TestSpeechTimingEndsWithTheLastSentence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gen := func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
			emit("Your order shipped. ")
			if err := sleepCtx(ctx, 400*time.Millisecond); err != nil {
				return pipeline.Generation{}, err
			}
			return pipeline.Generation{Provider: "fake"}, nil
		}
		sp := &fakeSpeaker{perChar: time.Millisecond / 10, estPerChar: time.Millisecond / 10}
		s := runSpeech(t, &stages{generate: gen}, sp, 3*time.Second, 0, 0)
		require.NoError(t, s.err)
		require.Empty(t, s.res.Degradation)
		require.Len(t, s.res.Speech.Spoken, 1)
		tts, ok := s.res.Timings[pipeline.StageTTS]
		require.True(t, ok)
		require.Less(t, tts, 50*time.Millisecond, "the speech ended with its one sentence, not with the LLM's stream (400 ms)")
	})
}
