package tts

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestHungRemoteStillCoolsDown: a remote engine that answers nothing (a
// black-holed connection) has every sentence abandoned at the time kept
// for Flite, before its own first-byte limit (1 s) fires when the time
// left is short, as it is for most sentences. Sparing one late
// sentence's give-up the cooldown (TestReserveAbandonIsNoOutage) must not
// spare an outage: without a cooldown every sentence of every session
// waited for the hung remote until the last moment Flite could start.
func TestHungRemoteStillCoolsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newMetrics(nil)
		require.NoError(t, err)
		sec := &fakeSynth{voices: []string{"slt"}}
		e := &Engine{name: EngineRemote, alpha: 0.2, m: m, speeds: map[string]*speed{}, voices: []string{"alloy"}}
		// lateRemote with a first byte later than any sentence's time.
		e.syn = newFallback(lateRemote{firstByte: time.Hour}, sec, 10*time.Second, e.observe, e.estimate, m)
		for range 10 {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
			cancel()
			require.NoError(t, err)
			require.Equal(t, EngineFlite, res.Engine)
		}
		require.Positive(t, testutil.ToFloat64(m.fallbacks.WithLabelValues(EngineRemote, "cooldown")),
			"ten sentences in a row abandoned by a remote that never answers: it is down")
	})
}
