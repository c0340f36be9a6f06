package tts

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// pacedRemote answers every sentence after firstByte, then streams a
// chunk every 100 ms until it has spent per character per character.
type pacedRemote struct {
	firstByte, per time.Duration
}

func (pacedRemote) Name() string     { return EngineRemote }
func (pacedRemote) Voices() []string { return []string{"alloy"} }
func (r pacedRemote) Synthesize(ctx context.Context, req Request, emit func([]int16)) (Result, error) {
	start := time.Now()
	res := Result{Engine: EngineRemote, Voice: "alloy", SampleRate: req.SampleRate, Chars: len(req.Text), TextLen: len(req.Text)}
	end := start.Add(max(r.firstByte, time.Duration(len(req.Text))*r.per))
	next := start.Add(r.firstByte)
	for {
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			res.Elapsed = time.Since(start)
			return res, context.Cause(ctx)
		}
		emit(make([]int16, req.SampleRate/10))
		res.Samples += req.SampleRate / 10
		res.Chunks++
		if !next.Before(end) {
			break
		}
		next = next.Add(100 * time.Millisecond)
		if next.After(end) {
			next = end
		}
	}
	res.Complete, res.Elapsed = true, time.Since(start)
	return res, nil
}

// TestAbandonsWhileTheRemoteStreams: the remote answers every sentence
// after 200 ms and one session's long sentence is streaming its audio
// for 2 s. Meanwhile three other sentences, 300 ms apart, have too little
// time left to wait 200 ms for it, and are given to Flite. Those are
// three late sentences, not "the third give-up in a row without remote
// audio": remote audio came between each. The remote must not be put in
// its cooldown. (The count was reset only when a synthesis of the remote
// returned, 2 s on, while give-ups count when they happen.)
func TestAbandonsWhileTheRemoteStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := newMetrics(nil)
		require.NoError(t, err)
		sec := &fakeSynth{voices: []string{"slt"}}
		e := &Engine{name: EngineRemote, alpha: 0.2, m: m, speeds: map[string]*speed{}, voices: []string{"alloy"}}
		f := newFallback(pacedRemote{firstByte: 200 * time.Millisecond, per: 10 * time.Millisecond}, sec, 10*time.Second, e.observe, e.estimate, m)
		e.syn = f
		// Learned fast enough to be started on every sentence here.
		e.speeds[EngineRemote+"/alloy"] = newSpeed(290, 0.2)

		var (
			wg      sync.WaitGroup
			longRes Result
			longErr error
		)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			long := strings.Repeat("Your order shipped. ", 10) // 200 chars: 2 s of streaming
			longRes, longErr = e.Synthesize(ctx, Request{Text: long, SampleRate: 16000}, func([]int16) {})
		})
		defer wg.Wait()
		for range 3 {
			time.Sleep(300 * time.Millisecond)
			// 300 ms left; Flite is expected to need 145 ms: the remote
			// gets 135 ms, and is abandoned.
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			res, err := e.Synthesize(ctx, Request{Text: sentence, SampleRate: 16000}, func([]int16) {})
			cancel()
			require.NoError(t, err)
			require.Equal(t, EngineFlite, res.Engine)
		}
		require.False(t, f.skipping(), "a remote streaming audio is not down")
		wg.Wait()
		require.NoError(t, longErr)
		require.Equal(t, EngineRemote, longRes.Engine)
		require.Zero(t, testutil.ToFloat64(m.fallbacks.WithLabelValues(EngineRemote, "cooldown")))
	})
}
