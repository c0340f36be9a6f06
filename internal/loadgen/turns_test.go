package loadgen

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMatchTurns matches a stream's utterances to the server's turns by
// position and times each utterance's end to its turn's speech_stopped
// and result.
func TestMatchTurns(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	utt := func(start, end int64) streamUtt {
		return streamUtt{startMs: start, endMs: end, end: t0.Add(ms(int(end)))}
	}
	// turn: detected span; speech_stopped and the result come stop and
	// res ms after the stream's start (0: none).
	turn := func(start, end int64, stop, res int) *attempt {
		a := &attempt{audioStartMs: start, audioEndMs: end}
		if stop > 0 {
			a.finalSent = t0.Add(ms(stop))
		}
		if res > 0 {
			a.term = &terminal{code: "result", at: t0.Add(ms(res))}
		}
		return a
	}
	refused := &attempt{audioStartMs: -1, audioEndMs: -1, term: &terminal{code: "overloaded"}}
	utts := []streamUtt{utt(1000, 2500), utt(3500, 5000)}
	tests := []struct {
		name                   string
		utts                   []streamUtt
		turns                  []*attempt
		missed, merged, falseT int
		toStopped, toResult    []time.Duration
	}{
		{"one turn each", utts, []*attempt{turn(1200, 2450, 2960, 3800), turn(3700, 4950, 5470, 0)},
			0, 0, 0, []time.Duration{ms(460), ms(470)}, []time.Duration{ms(1300)}},
		{"the first one missed", utts, []*attempt{turn(3700, 4950, 5470, 6000)},
			1, 0, 0, []time.Duration{ms(470)}, []time.Duration{ms(1000)}},
		{"a refused turn covers one", utts, []*attempt{refused, turn(3700, 4950, 5470, 6000)},
			0, 0, 0, []time.Duration{ms(470)}, []time.Duration{ms(1000)}},
		{"merged into one turn", utts, []*attempt{turn(1200, 4950, 5470, 6000)},
			0, 1, 0, []time.Duration{ms(470)}, []time.Duration{ms(1000)}},
		{"a false turn in the gap", utts, []*attempt{turn(1200, 2450, 2960, 0), turn(2800, 3000, 3500, 0), turn(3700, 4950, 5470, 0)},
			0, 0, 1, []time.Duration{ms(460), ms(470)}, nil},
		{"a turn still open at the end", utts, []*attempt{turn(1200, 2450, 2960, 3000), turn(3700, -1, 0, 0)},
			0, 0, 0, []time.Duration{ms(460)}, []time.Duration{ms(500)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := matchTurns(tt.utts, tt.turns)
			require.Equal(t, tt.missed, o.missed, "missed")
			require.Equal(t, tt.merged, o.merged, "merged")
			require.Equal(t, tt.falseT, o.falseTurns, "false turns")
			require.Equal(t, tt.toStopped, o.toStopped)
			require.Equal(t, tt.toResult, o.toResult)
		})
	}
}

// TestHeardBefore keeps, of a stream cut short, the utterances up to the
// end of the last turn the server placed and the turns up to it.
func TestHeardBefore(t *testing.T) {
	utts := []streamUtt{{startMs: 1000, endMs: 2500}, {startMs: 3500, endMs: 5000}, {startMs: 6000, endMs: 7000}}
	placed := func(start, end int64) *attempt { return &attempt{audioStartMs: start, audioEndMs: end} }
	refused := &attempt{audioStartMs: -1, audioEndMs: -1}
	tests := []struct {
		name         string
		turns        []*attempt
		utts, turnsN int
	}{
		{"cut after the second turn", []*attempt{placed(1200, 2450), placed(3700, 4950)}, 2, 2},
		{"a refused turn after the last placed", []*attempt{placed(1200, 2450), refused}, 1, 1},
		{"a refused turn before it", []*attempt{refused, placed(3700, 4950)}, 2, 2},
		{"a turn open at the cut", []*attempt{placed(1200, 2450), placed(3700, -1)}, 3, 2},
		{"no turn placed", []*attempt{refused}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ts := heardBefore(utts, tt.turns)
			require.Len(t, u, tt.utts)
			require.Len(t, ts, tt.turnsN)
		})
	}
}
