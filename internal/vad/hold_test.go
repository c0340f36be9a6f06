package vad_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

// scriptWords answers Unfinished from a table of the words heard: the
// partial covering the stream up to covered frames ends unfinished or not.
// From the call numbered revisedAt on (0: never) the words are finished,
// as when a newer partial completes the sentence during a hold.
type scriptWords struct {
	covered    map[int]bool // speech end (frames) -> unfinished, for partials covering it
	revisedAt  int
	calls      int
	heardUpTo  int // frames the newest partial covers; 0: every end in covered
	askedAtEnd []int
}

func (w *scriptWords) Unfinished(end int64) bool {
	w.calls++
	f := int(end / fl)
	w.askedAtEnd = append(w.askedAtEnd, f)
	if w.revisedAt > 0 && w.calls >= w.revisedAt {
		return false
	}
	if w.heardUpTo > 0 && w.heardUpTo < f {
		return false // the recogniser is behind: nothing known about these words
	}
	return w.covered[f]
}

type stopped struct{ pos, at, holds, resumed int }

// runHold runs script through an endpointer with small timings and a
// hold of holdFrames, words answering, and returns each turn's stop.
func runHold(t *testing.T, holdFrames int, script string, words vad.Words, chunk int) []stopped {
	t.Helper()
	cfg := small
	cfg.HoldMs = holdFrames * vad.FrameMs
	cfg.MaxTurnMs = 0
	e, err := vad.NewEndpointer(vadtest.New(rate, script), rate, cfg)
	require.NoError(t, err)
	defer e.Close()
	e.SetWords(words)
	in := stream(len(script))
	var all []vad.Event
	for i := 0; i < len(in); i += chunk {
		evs, err := e.Write(in[i:min(i+chunk, len(in))])
		require.NoError(t, err)
		all = append(all, evs...)
	}
	checkAudio(t, in, all)
	var out []stopped
	for _, x := range all {
		if x.Kind == vad.SpeechStopped {
			out = append(out, stopped{int(x.Pos / fl), int(x.At / fl), x.Holds, x.Resumed})
		}
	}
	return out
}

// TestHold: silence is 5 frames; a turn whose words are unfinished at its
// end of speech waits holdFrames more, and speech resuming within them
// continues it.
func TestHold(t *testing.T) {
	const pause7 = "SSS......." + "SSS" + "............"   // speech ends at 3, again at 13
	const pause12 = "SSS............" + "SSS" + "........" // speech ends at 3, again at 18
	for _, tt := range []struct {
		name   string
		hold   int // frames
		script string
		words  *scriptWords
		want   []stopped
	}{
		{"finished words end at silenceMs", 5, pause7, &scriptWords{covered: map[int]bool{3: false}},
			[]stopped{{3, 8, 0, 0}, {13, 18, 0, 0}}},
		{"unfinished words: the pause is held and speech resumes in the same turn", 5, pause7,
			&scriptWords{covered: map[int]bool{3: true, 13: false}},
			[]stopped{{13, 18, 1, 1}}},
		{"unfinished at the end too: held again, ends at silence+hold", 5, pause7,
			&scriptWords{covered: map[int]bool{3: true, 13: true}},
			[]stopped{{13, 23, 2, 1}}},
		{"a pause longer than the hold ends the turn at the hold's end, speech end unchanged", 5, pause12,
			&scriptWords{covered: map[int]bool{3: true}},
			[]stopped{{3, 13, 1, 0}, {18, 23, 0, 0}}},
		{"no hold: the old behaviour", 0, pause7,
			&scriptWords{covered: map[int]bool{3: true, 13: true}},
			[]stopped{{3, 8, 0, 0}, {13, 18, 0, 0}}},
		{"a partial behind the end of speech holds nothing", 5, pause7,
			&scriptWords{covered: map[int]bool{3: true}, heardUpTo: 2},
			[]stopped{{3, 8, 0, 0}, {13, 18, 0, 0}}},
		{"a newer partial that finishes the words ends the hold there", 5, pause12,
			&scriptWords{covered: map[int]bool{3: true}, revisedAt: 3},
			[]stopped{{3, 10, 1, 0}, {18, 23, 0, 0}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, chunk := range []int{fl, 37, len(tt.script) * fl} {
				w := *tt.words
				w.askedAtEnd = nil
				require.Equal(t, tt.want, runHold(t, tt.hold, tt.script, &w, chunk), "chunk %d", chunk)
				for _, end := range w.askedAtEnd {
					require.Contains(t, []int{3, 13, 18}, end, "asked about an end of speech")
				}
			}
		})
	}
}

// TestHoldWithoutWords: an endpointer given no Words never holds,
// whatever HoldMs says.
func TestHoldWithoutWords(t *testing.T) {
	require.Equal(t, []stopped{{3, 8, 0, 0}, {13, 18, 0, 0}},
		runHold(t, 5, "SSS.......SSS............", nil, fl))
}

// TestHoldAndMaxTurn: a turn that reaches MaxTurnMs while held in a
// pause past SilenceMs ends where its speech ended, not cut (its silence
// would have ended it there without the hold); one that reaches it while
// speaking, a hold before or not, is cut there.
func TestHoldAndMaxTurn(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		want   vad.Event
	}{
		{"held in the pause", "SSS" + repeat('.', 80),
			vad.Event{Kind: vad.SpeechStopped, Turn: 1, Pos: 3 * fl, At: 50 * fl, Holds: 1}},
		{"speaking after a hold", "SSS" + repeat('.', 10) + repeat('S', 70),
			vad.Event{Kind: vad.SpeechStopped, Turn: 1, Pos: 50 * fl, At: 50 * fl, Cut: true, Holds: 1, Resumed: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := small
			cfg.HoldMs, cfg.MaxTurnMs = 2000, 1000 // 100 frames of hold, cut at 50
			e, err := vad.NewEndpointer(vadtest.New(rate, tt.script), rate, cfg)
			require.NoError(t, err)
			defer e.Close()
			e.SetWords(&scriptWords{covered: map[int]bool{3: true}})
			evs, err := e.Write(stream(len(tt.script)))
			require.NoError(t, err)
			var stops []vad.Event
			for _, ev := range evs {
				if ev.Kind == vad.SpeechStopped {
					stops = append(stops, ev)
				}
			}
			require.Equal(t, []vad.Event{tt.want}, stops)
		})
	}
}

// TestHeard: the handoff from the recogniser's goroutine. Words are known
// only when they cover the end of speech asked about.
func TestHeard(t *testing.T) {
	for _, tt := range []struct {
		name       string
		set        bool
		covered    int64
		unfinished bool
		end        int64
		want       bool
	}{
		{"nothing heard", false, 0, false, 0, false},
		{"nothing heard, end 100", false, 0, false, 100, false},
		{"unfinished, covering the end", true, 100, true, 100, true},
		{"unfinished, covering past the end", true, 160, true, 100, true},
		{"unfinished, behind the end", true, 99, true, 100, false},
		{"finished, covering the end", true, 200, false, 100, false},
		{"large positions", true, 1 << 40, true, 1<<40 - 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var h vad.Heard
			if tt.set {
				h.Set(tt.covered, tt.unfinished)
			}
			require.Equal(t, tt.want, h.Unfinished(tt.end))
		})
	}
}

func TestHoldRange(t *testing.T) {
	for _, tt := range []struct {
		hold int
		ok   bool
	}{{0, true}, {700, true}, {vad.MaxHoldMs, true}, {-1, false}, {vad.MaxHoldMs + 1, false}} {
		_, err := vad.Config{HoldMs: tt.hold}.WithDefaults()
		require.Equal(t, tt.ok, err == nil, "holdMs %d: %v", tt.hold, err)
	}
}
