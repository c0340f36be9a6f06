package session

import (
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

// TestTurnStreamResamplerFilterShared: a server-turn stream at a rate the
// detector does not take (22050, 24000, 44100 Hz) is resampled to 16 kHz.
// Each stream built its resampler's filter afresh: about 150 KiB of taps
// and 8 ms of CPU on the session's reader, for every session and every
// session.update that restarts the stream (a client may send them in a
// loop). The filter depends only on the two rates: streams share it, and
// a new stream costs only its own state.
func TestTurnStreamResamplerFilterShared(t *testing.T) {
	s := &Session{srv: &Server{cfg: Config{
		MaxBudget: 2 * time.Second, MaxAudioPerRequest: 30 * time.Second,
		Detector: func(rate int) (vad.Detector, error) { return vadtest.New(rate, strings.Repeat(".", 10)), nil },
	}}}
	cfg := (&protocol.TurnDetection{Mode: protocol.TurnsServer}).Resolved()
	for _, rate := range []int{22050, 24000, 44100} {
		first, err := s.newTurnStream(rate, cfg)
		require.NoError(t, err)
		first.ep.Close()
		// The least of a few tries: another goroutine of the test binary
		// may allocate meanwhile, and counts in TotalAlloc.
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ts, err := s.newTurnStream(rate, cfg)
			runtime.ReadMemStats(&after)
			require.NoError(t, err)
			ts.ep.Close()
			require.NotNil(t, ts.rs)
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		const most = 32 << 10
		require.Less(t, least, uint64(most), "%d Hz: a new stream allocated its own resampling filter", rate)
	}
}
