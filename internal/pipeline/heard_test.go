package pipeline_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// coverRec is a recognizer whose partial, refreshed every third frame,
// covers the audio up to that refresh (as the embedded engine's does).
type coverRec struct {
	written, covered int64
	writes           int
}

func (r *coverRec) Write(_ context.Context, pcm []int16) (string, error) {
	r.written += int64(len(pcm))
	r.writes++
	if r.writes%3 == 0 {
		r.covered = r.written
	}
	return []string{"", "i want", "i want to", "i want to return the"}[min(int(r.covered/300), 3)], nil
}
func (r *coverRec) Finish(context.Context) (string, error) { return "i want to return the lamp", nil }
func (r *coverRec) Close() error                           { return nil }

// coveringRec is a coverRec that tells what its partial covers.
type coveringRec struct{ *coverRec }

func (r coveringRec) Covered() int64 { return r.covered }

type coverSTT struct{ cover bool }

func (s coverSTT) Start(context.Context, int) (pipeline.Recognizer, error) {
	if s.cover {
		return coveringRec{&coverRec{}}, nil
	}
	return &coverRec{}, nil
}

// heardSink is a sink that records what Heard gets.
type heardSink struct {
	*sink
	heard []string
	at    []int64
}

func (s *heardSink) Heard(text string, covered int64) {
	s.heard = append(s.heard, text)
	s.at = append(s.at, covered)
}

// TestHeard: the feeder passes a Coverer's partials to a HeardSink with
// what they cover, each time that grows, unthrottled (partials to the
// client are, at most one per interval); a recognizer that is no Coverer
// passes nothing.
func TestHeard(t *testing.T) {
	for _, cover := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			st := &stages{}
			p, err := pipeline.New(pipeline.Config{PartialInterval: time.Hour},
				pipeline.Stages{STT: coverSTT{cover}, Intent: st, Retrieval: st, LLM: st, Templates: templ{}}, nil)
			require.NoError(t, err)
			var frames []pipeline.Frame
			for range 12 {
				frames = append(frames, pipeline.Frame{PCM: make([]int16, 100), SampleRate: 16000})
			}
			frames = append(frames, pipeline.Frame{SampleRate: 16000, Final: true})
			ctx, cancelD := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancelD()
			s := &heardSink{sink: newSink()}
			p.Run(ctx, pipeline.Request{Audio: queue(frames...), Log: discard}, s)
			<-s.done
			if !cover {
				require.Empty(t, s.heard)
				return
			}
			require.Equal(t, []string{"i want", "i want to", "i want to return the", "i want to return the"}, s.heard)
			require.Equal(t, []int64{300, 600, 900, 1200}, s.at)
		})
	}
}
