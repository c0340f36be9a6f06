package vad_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

const (
	rate = 8000
	fl   = rate * vad.FrameMs / 1000 // samples per frame
)

// small timings so scripts stay short: 5 frames of silence end a turn, 3
// speech frames start one, a 2-frame pause is tolerated while counting
// them, and 2 frames of pre-roll.
var small = vad.Config{SilenceMs: 100, MinSpeechMs: 60, HangoverMs: 40, PrefixMs: 40}

// ev is an event without its audio, positions in frames.
type ev struct {
	kind          vad.Kind
	turn          int
	pos, at, from int
	cut           bool
}

func (e ev) String() string {
	return fmt.Sprintf("%s#%d pos=%d at=%d from=%d cut=%v", e.kind, e.turn, e.pos, e.at, e.from, e.cut)
}

// stream is a test signal whose every sample says where it is, so the
// audio handed out can be checked against the positions reported.
func stream(frames int) []int16 {
	s := make([]int16, frames*fl)
	for i := range s {
		s[i] = int16(i % 32749)
	}
	return s
}

// run writes the script's stream in chunks of chunk samples, flushes if
// asked, checks the audio invariants and returns the events, audio
// removed and positions in frames (TurnAudio events are dropped: how
// audio is split between them depends on the chunking).
func run(t *testing.T, cfg vad.Config, script string, chunk int, flush bool) []ev {
	t.Helper()
	det := vadtest.New(rate, script)
	e, err := vad.NewEndpointer(det, rate, cfg)
	require.NoError(t, err)
	in := stream(len(script))
	var all []vad.Event
	for i := 0; i < len(in); i += chunk {
		evs, err := e.Write(in[i:min(i+chunk, len(in))])
		require.NoError(t, err)
		all = append(all, evs...)
	}
	if flush {
		all = append(all, e.Flush()...)
	}
	e.Close()
	require.True(t, det.Closed(), "Close closes the detector")
	checkAudio(t, in, all)
	var out []ev
	for _, x := range all {
		if x.Kind == vad.TurnAudio {
			continue
		}
		require.Zero(t, x.Pos%fl)
		out = append(out, ev{x.Kind, x.Turn, int(x.Pos / fl), int(x.At / fl), int(x.From / fl), x.Cut})
	}
	return out
}

// checkAudio: each turn's audio runs without gap or overlap from its
// SpeechStarted's From to its SpeechStopped's At, and is exactly the
// input there; events come in order.
func checkAudio(t *testing.T, in []int16, evs []vad.Event) {
	t.Helper()
	next := int64(-1) // where the turn's next audio must start; -1 outside a turn
	lastAt := int64(0)
	for _, x := range evs {
		require.GreaterOrEqual(t, x.At, lastAt, "events in stream order")
		lastAt = x.At
		switch x.Kind {
		case vad.SpeechStarted:
			require.Equal(t, int64(-1), next, "start inside a turn")
			require.LessOrEqual(t, x.From, x.Pos, "pre-roll starts before speech")
			next = x.From
		case vad.SpeechStopped:
			require.Equal(t, x.At, next, "turn audio ends where the turn was decided over")
			require.LessOrEqual(t, x.Pos, x.At)
			next = -1
			continue
		}
		require.Equal(t, next, x.From, "%s audio contiguous", x.Kind)
		require.Equal(t, in[x.From:x.From+int64(len(x.Audio))], x.Audio)
		next += int64(len(x.Audio))
	}
}

func TestEndpointer(t *testing.T) {
	long := "SSS" + repeat('S', 60)
	for _, tt := range []struct {
		name   string
		cfg    vad.Config
		script string
		flush  bool
		want   []ev
	}{
		{name: "silence", script: "..........", want: nil},
		{name: "a click is too short", script: "..SS..........", want: nil},
		{name: "scattered clicks", script: "..S...S...S...S...S....", want: nil},
		{name: "one turn", script: "....SSSS.......", want: []ev{
			{vad.SpeechStarted, 1, 4, 7, 2, false},
			{vad.SpeechStopped, 1, 8, 13, 0, false},
		}},
		{name: "a pause within the hangover counts as one burst", script: "..S.SS......", want: []ev{
			{vad.SpeechStarted, 1, 2, 6, 0, false},
			{vad.SpeechStopped, 1, 6, 11, 0, false},
		}},
		{name: "a longer pause starts the count again", script: "..S...SS.S.........", want: []ev{
			{vad.SpeechStarted, 1, 6, 10, 4, false},
			{vad.SpeechStopped, 1, 10, 15, 0, false},
		}},
		{name: "a pause shorter than silenceMs keeps the turn", script: "SSS....SSS.......", want: []ev{
			{vad.SpeechStarted, 1, 0, 3, 0, false},
			{vad.SpeechStopped, 1, 10, 15, 0, false},
		}},
		{name: "single speech frames in the silence do not hold the turn", script: "SSS..S.S..S.S......", want: []ev{
			{vad.SpeechStarted, 1, 0, 3, 0, false},
			{vad.SpeechStopped, 1, 3, 9, 0, false},
		}},
		{name: "speech resuming at the silence's edge keeps the turn", script: "SSS....SSS.......", want: []ev{
			{vad.SpeechStarted, 1, 0, 3, 0, false},
			{vad.SpeechStopped, 1, 10, 15, 0, false},
		}},
		{name: "two turns; the second's pre-roll stops at the first's end", script: "SSS.....SSS.......", want: []ev{
			{vad.SpeechStarted, 1, 0, 3, 0, false},
			{vad.SpeechStopped, 1, 3, 8, 0, false},
			{vad.SpeechStarted, 2, 8, 11, 8, false},
			{vad.SpeechStopped, 2, 11, 16, 0, false},
		}},
		{name: "no pre-roll", cfg: vad.Config{SilenceMs: 100, MinSpeechMs: 60, HangoverMs: 40, PrefixMs: -1}, script: "....SSS......", want: []ev{
			{vad.SpeechStarted, 1, 4, 7, 4, false},
			{vad.SpeechStopped, 1, 7, 12, 0, false},
		}},
		{name: "long turn is cut, then a new one starts", cfg: vad.Config{SilenceMs: 100, MinSpeechMs: 60, HangoverMs: 40, PrefixMs: 40, MaxTurnMs: 1000}, script: long + ".....", want: []ev{
			{vad.SpeechStarted, 1, 0, 3, 0, false},
			{vad.SpeechStopped, 1, 50, 50, 0, true},
			{vad.SpeechStarted, 2, 50, 53, 50, false},
			{vad.SpeechStopped, 2, 63, 68, 0, false},
		}},
		{name: "flush ends a turn in progress", script: "..SSSSS", flush: true, want: []ev{
			{vad.SpeechStarted, 1, 2, 5, 0, false},
			{vad.SpeechStopped, 1, 7, 7, 0, false},
		}},
		{name: "flush outside a turn does nothing", script: "SSS......", flush: true, want: []ev{
			{vad.SpeechStarted, 1, 0, 3, 0, false},
			{vad.SpeechStopped, 1, 3, 8, 0, false},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg == (vad.Config{}) {
				cfg = small
			}
			// Frame-sized writes, odd-sized writes and one write must all
			// give the same events.
			for _, chunk := range []int{fl, 37, 3*fl + 1, len(tt.script) * fl} {
				require.Equal(t, tt.want, run(t, cfg, tt.script, chunk, tt.flush), "chunk %d", chunk)
			}
		})
	}
}

func repeat(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// TestDefaults: with the zero Config a turn needs 200 ms of speech and
// ends 500 ms after it, with 300 ms of pre-roll.
func TestDefaults(t *testing.T) {
	got := run(t, vad.Config{}, repeat('.', 20)+repeat('S', 10)+repeat('.', 30), fl, false)
	require.Equal(t, []ev{
		{vad.SpeechStarted, 1, 20, 30, 5, false},
		{vad.SpeechStopped, 1, 30, 55, 0, false},
	}, got)
	e, err := vad.NewEndpointer(vadtest.New(rate, ""), rate, vad.Config{})
	require.NoError(t, err)
	require.Equal(t, vad.Config{SilenceMs: 500, PrefixMs: 300, MinSpeechMs: 200, HangoverMs: 100}, e.Config())
	require.Equal(t, 1500*time.Millisecond, e.Duration(12000))
	// Config round-trips, "none" included.
	none := vad.Config{PrefixMs: -5, HangoverMs: -1}
	e, err = vad.NewEndpointer(vadtest.New(rate, ""), rate, none)
	require.NoError(t, err)
	require.Equal(t, -1, e.Config().PrefixMs)
	e2, err := vad.NewEndpointer(vadtest.New(rate, ""), rate, e.Config())
	require.NoError(t, err)
	require.Equal(t, e.Config(), e2.Config())
}

func TestConfigRanges(t *testing.T) {
	for _, tt := range []struct {
		cfg vad.Config
		ok  bool
	}{
		{vad.Config{}, true},
		{vad.Config{SilenceMs: 100, PrefixMs: 2000, MinSpeechMs: 20, HangoverMs: 400, MaxTurnMs: 1000}, true},
		{vad.Config{SilenceMs: 5000, PrefixMs: -1, MinSpeechMs: 2000, HangoverMs: -1, MaxTurnMs: 600000}, true},
		{vad.Config{SilenceMs: 99}, false},
		{vad.Config{SilenceMs: 5001}, false},
		{vad.Config{SilenceMs: -5}, false},
		{vad.Config{PrefixMs: 2001}, false},
		{vad.Config{MinSpeechMs: 19}, false},
		{vad.Config{MinSpeechMs: 2001}, false},
		{vad.Config{HangoverMs: 401}, false},
		{vad.Config{MaxTurnMs: 999}, false},
		{vad.Config{MaxTurnMs: 600001}, false},
	} {
		_, err := tt.cfg.WithDefaults()
		if tt.ok {
			require.NoError(t, err, "%+v", tt.cfg)
		} else {
			require.ErrorIs(t, err, vad.ErrConfig, "%+v", tt.cfg)
		}
		_, err = vad.NewEndpointer(vadtest.New(rate, ""), rate, tt.cfg)
		require.Equal(t, tt.ok, err == nil)
	}
	_, err := vad.NewEndpointer(vadtest.New(rate, ""), 11025, vad.Config{})
	require.ErrorIs(t, err, vad.ErrRate)
}

// TestDetectorError: a detector that rejects the frames (made for another
// rate) fails the write with ErrFrame.
func TestDetectorError(t *testing.T) {
	e, err := vad.NewEndpointer(vadtest.New(16000, "SSS"), rate, vad.Config{})
	require.NoError(t, err)
	_, err = e.Write(make([]int16, fl))
	require.ErrorIs(t, err, vad.ErrFrame)
}

// TestResetStartsAgain: after Reset, positions and turn numbers start at
// zero and the script (the detector) starts again.
func TestResetStartsAgain(t *testing.T) {
	e, err := vad.NewEndpointer(vadtest.New(rate, "..SSS......"), rate, small)
	require.NoError(t, err)
	in := stream(11)
	a, err := e.Write(in)
	require.NoError(t, err)
	e.Reset()
	require.Zero(t, e.Pos())
	b, err := e.Write(in)
	require.NoError(t, err)
	require.Equal(t, a, b)
}

// TestPositionsAreSampleBased: audio that arrives late, in bursts, or at
// an uneven pace gets the same positions: they count samples, never the
// clock (the fake clock here jumps by up to seconds between writes).
func TestPositionsAreSampleBased(t *testing.T) {
	script := "....SSSSSS..SSS.........SSSS........"
	in := stream(len(script))
	collect := func(pause func(i int)) []vad.Event {
		e, err := vad.NewEndpointer(vadtest.New(rate, script), rate, small)
		require.NoError(t, err)
		var all []vad.Event
		for i := 0; i < len(in); i += fl {
			pause(i / fl)
			evs, err := e.Write(in[i : i+fl])
			require.NoError(t, err)
			all = append(all, evs...)
		}
		return all
	}
	want := collect(func(int) {})
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		got := collect(func(i int) { time.Sleep(time.Duration(i%7) * 300 * time.Millisecond) })
		require.Greater(t, time.Since(start), 10*time.Second, "the fake clock moved")
		require.Equal(t, want, got)
	})
}
