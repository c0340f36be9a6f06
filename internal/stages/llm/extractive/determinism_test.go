package extractive_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/llm/extractive"
)

// TestRespondDeterministic: the same request gives the same answer and
// sources every time. Here a0#1's second sentence ("golf charlie delta
// ... hotel") and a1#1's first ("hotel bravo ... golf ... echo") tie
// exactly: 11/12 / 1.35 / 1.1 = 13/12 / 1.35 / 1.3. A sentence's score
// summed 1/df over a map, in Go's random iteration order, so the rounding
// of the sum, and with it which sentence won the tie, changed from call
// to call: the answer quoted a0#1 and a2#1 or a0#1 and a1#1.
func TestRespondDeterministic(t *testing.T) {
	ps := []pipeline.Passage{
		{ID: "a0#1", Title: "T", Score: 5, Text: "Say hotel echo juliet charlie juliet lima lima juliet. Say golf charlie delta alpha juliet juliet hotel. Say lima kilo alpha."},
		{ID: "a1#1", Title: "T", Score: 5, Text: "Say hotel bravo kilo alpha golf alpha echo. Say delta delta kilo. Say delta india kilo hotel alpha india."},
		{ID: "a2#1", Title: "T", Score: 5, Text: "Say golf foxtrot foxtrot india golf bravo juliet. Say juliet lima bravo. Say charlie foxtrot india india."},
	}
	req := pipeline.GenerateRequest{Transcript: "golf echo hotel delta", Passages: ps}
	r := extractive.New(extractive.Config{})
	answer, sources := r.Respond(req)
	for range 500 {
		a, s := r.Respond(req)
		require.Equal(t, answer, a)
		require.Equal(t, sourceIDs(sources), sourceIDs(s))
	}
}

// TestGenerateDoneBeforeStart: a request whose context is already done
// gets no answer and no Started call (which tells the pipeline that an
// answer, with its sources, has begun).
func TestGenerateDoneBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	started := false
	req := pipeline.GenerateRequest{Transcript: "golf echo", Passages: []pipeline.Passage{{ID: "a#1", Title: "T", Score: 5, Text: "Say golf echo hotel."}},
		Started: func(pipeline.Generation) { started = true }}
	var emitted []string
	_, err := extractive.New(extractive.Config{}).Generate(ctx, req, func(s string) { emitted = append(emitted, s) })
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, started)
	require.Empty(t, emitted)
}
