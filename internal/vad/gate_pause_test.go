package vad_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/vad"
)

// alwaysSpeech is a detector that calls every frame it is asked about
// speech: what the gate lets through is the gate's decision alone.
type alwaysSpeech struct{}

func (alwaysSpeech) Process([]int16) (bool, error) { return true, nil }
func (alwaysSpeech) Reset()                        {}
func (alwaysSpeech) Close()                        {}

// TestGateForegroundAfterLongPause: a speaker at -20 dBFS talks, pauses,
// talks again for half a second, and then a voice 20 dB quieter (a
// second talker, a television) is heard. The foreground test calls that
// voice background however long the pause was: the speaker is plainly
// back. The level used to sink without bound (120 dB below the speaker
// after a minute), and the running average then took seconds of speech to
// climb back, the foreground test off meanwhile; a level that can keep
// nothing out any more is now forgotten and set afresh by the next run.
func TestGateForegroundAfterLongPause(t *testing.T) {
	fl := vad.FrameLen(16000)
	for _, pause := range []int{2, 10, 60, 600} { // seconds
		t.Run(fmt.Sprintf("%ds", pause), func(t *testing.T) {
			g, err := vad.NewGate(alwaysSpeech{}, 16000, vad.GateConfig{})
			require.NoError(t, err)
			feed := func(x []int16) (speech []bool) {
				for i := 0; i+fl <= len(x); i += fl {
					s, err := g.Process(x[i : i+fl])
					require.NoError(t, err)
					speech = append(speech, s)
				}
				return speech
			}
			feed(noiseFrames(100, -70, 1))                    // a quiet room
			feed(noiseFrames(100, -20, 2))                    // the speaker, 2 s
			feed(noiseFrames(pause*1000/vad.FrameMs, -70, 3)) // the pause
			back := feed(noiseFrames(25, -20, 4))             // the speaker again, 0.5 s
			require.True(t, back[len(back)-1], "the speaker is speech")
			bg := feed(noiseFrames(5, -40, 5)) // 20 dB below the speaker
			require.Equal(t, []bool{false, false, false, false, false}, bg,
				"a voice 20 dB below the speaker who just spoke is background (foreground margin %v dB)", vad.DefaultGateForegroundDB)
		})
	}
}
