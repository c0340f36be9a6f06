package vad_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

// TestMaxTurnBoundsTheTurnsAudio: MaxTurnMs ends a turn whose audio
// (pre-roll included) reaches it, and the session sets it to -max-audio,
// the longest utterance a request may carry. The bound used to be checked
// only on frames after SpeechStarted, which already handed out the
// pre-roll and the whole span of speech counted to MinSpeechMs (pauses up
// to HangoverMs between bursts): 4 s and more with MaxTurnMs at 1 s. All
// settings below are in the documented ranges.
func TestMaxTurnBoundsTheTurnsAudio(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cfg    vad.Config
		script string
	}{
		{"long pre-roll and long minimum speech",
			vad.Config{SilenceMs: 100, PrefixMs: 2000, MinSpeechMs: 2000, HangoverMs: 100, MaxTurnMs: 1000},
			strings.Repeat(".", 100) + strings.Repeat("S", 150) + strings.Repeat(".", 10)},
		{"speech counted across pauses within the hangover",
			vad.Config{SilenceMs: 100, PrefixMs: -1, MinSpeechMs: 2000, HangoverMs: 100, MaxTurnMs: 1000},
			strings.Repeat("SSSS.....", 30) + strings.Repeat(".", 10)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, err := vad.NewEndpointer(vadtest.New(rate, tt.script), rate, tt.cfg)
			require.NoError(t, err)
			defer e.Close()
			evs, err := e.Write(stream(len(tt.script)))
			require.NoError(t, err)
			evs = append(evs, e.Flush()...)
			maxSamples := tt.cfg.MaxTurnMs * rate / 1000
			handed := map[int]int{}
			for _, ev := range evs {
				handed[ev.Turn] += len(ev.Audio)
			}
			require.NotEmpty(t, handed, "a turn was found")
			for turn, n := range handed {
				require.LessOrEqual(t, n, maxSamples+fl,
					"turn %d: %d ms of audio handed out, MaxTurnMs %d", turn, n*1000/rate, tt.cfg.MaxTurnMs)
			}
		})
	}
}
