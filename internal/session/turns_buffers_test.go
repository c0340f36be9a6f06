package session

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

// TestStreamBuffersNotKeptAfterBigFrame: a server-turn stream decodes
// (and resamples) each frame into buffers it reuses. One frame as large
// as -max-message-bytes allows (256 KiB: 256 Ki μ-law samples, 512 KiB
// decoded) grew them for the rest of the session, which streams for
// hours (a phone call): a client sending one big frame kept up to
// 512 KiB (plus the resampled copy) per session. After a big frame, the
// next normal one must leave buffers of a normal frame's size.
func TestStreamBuffersNotKeptAfterBigFrame(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate int
		mu   bool
	}{
		{"mu-law 8 kHz", 8000, true},
		{"PCM 44.1 kHz, resampled", 44100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			det := vadtest.New(16000, strings.Repeat(".", 100000)) // never speech: no turn
			if tc.rate == 8000 {
				det = vadtest.New(8000, strings.Repeat(".", 100000))
			}
			ts := &turnStream{inRate: tc.rate, rate: det.Rate}
			if tc.rate != det.Rate {
				rs, err := resample.New(tc.rate, det.Rate)
				require.NoError(t, err)
				ts.rs = rs
			}
			ep, err := vad.NewEndpointer(det, det.Rate, vad.Config{})
			require.NoError(t, err)
			defer ep.Close()
			ts.ep = ep
			s := &Session{srv: &Server{metrics: NewMetrics(nil)}, stream: ts, inbound: protocol.Inbound{ServerTurns: true, MuLaw: tc.mu}}
			frame := func(bytes int) *protocol.Audio {
				return &protocol.Audio{Header: protocol.AudioHeader{Seq: ts.nextSeq}, PCM: make([]byte, bytes)}
			}
			s.streamAudio(context.Background(), frame(256<<10), time.Now())
			normal := 2 * tc.rate / 50 // 20 ms of 16-bit PCM
			if tc.mu {
				normal = tc.rate / 50
			}
			s.streamAudio(context.Background(), frame(normal), time.Now())
			const most = 16 << 10 // samples: far more than any normal frame needs
			require.LessOrEqual(t, cap(ts.pcm), most, "decode buffer kept after a big frame")
			require.LessOrEqual(t, cap(ts.rpcm), most, "resample buffer kept after a big frame")
		})
	}
}
