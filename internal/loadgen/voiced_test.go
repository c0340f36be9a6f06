package loadgen

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/sim"
	"github.com/voiced/voiced/internal/stages/tts"
	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/voicedtest"
)

// requireInvariants checks the protocol's promises on a report: exactly
// one terminal message per request (none missing, none duplicated,
// nothing after it) and none after the deadline.
//
// Lateness is checked with the machine in mind. voiced ends a request
// about 110 ms before its deadline (reserve and margin), so only a stall
// of the process longer than that can make it late; on a shared 2-core
// machine such stalls happen, and the client's timer-lag probe (same
// process as the server here) sees them. After a stall every timer that
// was due fires at once and the burst is worked off at -race speed, so a
// terminal message can end up later than the stall itself: it may be
// late by at most 50 ms plus twice the longest stall seen. A server that
// ignored its deadlines would be late by the stages' tails, seconds with
// the sim defaults, far beyond that. voiced's own count of late terminal
// messages must be zero when no stall over 50 ms was seen.
func requireInvariants(t *testing.T, rep Report) {
	t.Helper()
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Log("\n" + table.String())
	inv := rep.Invariants
	require.Zero(t, inv.Missing, "requests with no terminal message")
	require.Zero(t, inv.Duplicate, "requests with more than one terminal message")
	require.Zero(t, inv.AfterTerminal, "messages after a terminal message")
	require.Zero(t, rep.Requests.ServerClosed, "sessions closed by the server")
	require.Empty(t, rep.SessionErrors)
	r := rep.Requests
	require.Equal(t, r.Started, r.Terminated+r.Disconnected)
	requireOnTime(t, rep)
}

// requireOnTime checks lateness against the stalls the run measured: a
// terminal may arrive late at the client only by what its own stalls
// explain, and voiced must count none late unless the machine stalled.
func requireOnTime(t *testing.T, rep Report) {
	t.Helper()
	stall := rep.ClientTimerLag.Max
	if len(rep.LateRequests) > 0 {
		worst := rep.LateRequests[0]
		require.Greater(t, worst.SlackMs, -(50 + 2*stall),
			"%s arrived %.1f ms after its deadline; the longest stall seen was %.1f ms", worst.RequestID, -worst.SlackMs, stall)
	}
	if rep.Server != nil && rep.Server.LateTerminals != nil {
		if stall < 50 {
			require.Zero(t, *rep.Server.LateTerminals, "terminal messages after the deadline, as voiced counted them")
		} else if *rep.Server.LateTerminals > 0 {
			t.Logf("voiced counted %.0f late terminal messages during a %.1f ms stall of the machine", *rep.Server.LateTerminals, stall)
		}
	}
}

// TestVoicedSimInvariants runs voiceload for a few seconds against a real
// voiced in sim mode, with every cancellation path in the mix.
func TestVoicedSimInvariants(t *testing.T) {
	addr := voicedtest.Start(t, sim.Config{Seed: 11})
	cfg := Config{
		Addr: addr, Sessions: 16, Duration: 4 * time.Second, Think: 100 * time.Millisecond,
		Synthetic: 400 * time.Millisecond, Seed: 11,
		Mix: Mix{Cancel: 15, Replace: 10, BargeIn: 10, Disconnect: 5},
	}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Greater(t, rep.Requests.Started, 50)
	require.Positive(t, rep.Requests.ByCode["result"])
	require.Positive(t, rep.Requests.ByCode["cancelled"]+rep.Requests.ByCode["replaced"], "no cancellation observed")
	require.NotNil(t, rep.Server)
	require.Positive(t, rep.Server.Scrapes)
	require.Positive(t, rep.Server.CPUSeconds)
}

// TestVoicedSimTightDeadlines gives requests less time than the stages
// need, so that many end on their deadline: degraded or
// deadline_exceeded, and still never late.
func TestVoicedSimTightDeadlines(t *testing.T) {
	addr := voicedtest.Start(t, sim.Config{Seed: 12, FailShare: -1})
	cfg := Config{
		Addr: addr, Sessions: 16, Duration: 3 * time.Second, Think: 100 * time.Millisecond,
		Synthetic: 300 * time.Millisecond, Budget: 450 * time.Millisecond, Seed: 12,
	}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Equal(t, 450.0, rep.BudgetMs)
	require.Positive(t, rep.SlackOnDeadline.Count, "no request ran into its deadline")
	require.Positive(t, rep.Degraded+rep.Requests.ByCode["deadline_exceeded"])
	require.Zero(t, rep.Invariants.Unplanned, "deadline_exceeded is planned: %v", rep.Requests.Unplanned)
	require.NotNil(t, rep.Server.LateTerminals, "voiced exports voiced_late_terminals_total")
}

// TestVoicedSimUnplannedErrors: stages failing as unavailable are errors
// a run does not plan for; they fail it unless -max-error-share allows
// their share.
func TestVoicedSimUnplannedErrors(t *testing.T) {
	addr := voicedtest.Start(t, sim.Config{Seed: 13, FailShare: 0.3, SlowShare: -1})
	cfg := Config{
		Addr: addr, Sessions: 8, Duration: 2 * time.Second, Think: 50 * time.Millisecond,
		Synthetic: 300 * time.Millisecond, Seed: 13, MetricsURL: "off",
	}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Positive(t, rep.Requests.ByCode["unavailable"], "no sim failure ended a request")
	require.Equal(t, rep.Requests.ByCode["unavailable"], rep.Requests.Unplanned["unavailable"])
	require.False(t, rep.OK())
	require.Contains(t, unplannedViolation(rep), "did not plan for (unavailable ")

	cfg.MaxErrorShare = 100
	rep, err = Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Empty(t, unplannedViolation(rep))
}

// TestVoicedSimShutdownUnderLoad: a drain in the middle of a real-time run
// keeps the promise: every request the client started got its terminal
// message (a result, or unavailable for one started as the drain began),
// none was cut off by the close, and the clients stopped starting
// requests when told the server was draining.
func TestVoicedSimShutdownUnderLoad(t *testing.T) {
	addr, srv := voicedtest.StartServer(t, sim.Config{Seed: 14, FailShare: -1, SlowShare: -1})
	cfg := Config{
		Addr: addr, Sessions: 24, Duration: 6 * time.Second, Think: 50 * time.Millisecond,
		Synthetic: time.Second, Seed: 14, MaxErrorShare: 100,
	}
	drained := make(chan error, 1)
	timer := time.AfterFunc(2500*time.Millisecond, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		drained <- srv.Shutdown(ctx)
	})
	defer timer.Stop()
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.NoError(t, <-drained, "the drain ended by itself, within its time")
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Log("\n" + table.String())
	inv := rep.Invariants
	require.Zero(t, inv.Missing, "requests with no terminal message")
	require.Zero(t, inv.Duplicate)
	require.Zero(t, inv.AfterTerminal)
	require.Zero(t, rep.Requests.ServerClosed, "requests cut off by the server's close")
	require.Positive(t, rep.Requests.ByCode["result"])
	for code := range rep.Requests.Unplanned {
		require.Equal(t, "unavailable", code, "only a request started as the drain began may be refused")
	}
}

// TestVoicedSimSpeech runs voiceload -speech against a real voiced in
// sim mode that speaks with the real embedded engine, cancellations in
// the mix: answer.audio in order, one final, nothing after a terminal.
func TestVoicedSimSpeech(t *testing.T) {
	eng, err := tts.New(tts.Config{}, nil, nil)
	if errors.Is(err, tts.ErrUnavailable) {
		t.Skip("no embedded speech synthesiser in this build")
	}
	require.NoError(t, err)
	addr := voicedtest.StartSpeech(t, sim.Config{Seed: 12}, eng)
	cfg := Config{
		Addr: addr, Sessions: 8, Duration: 3 * time.Second, Think: 100 * time.Millisecond,
		Synthetic: 400 * time.Millisecond, Seed: 12, Speech: true,
		Mix: Mix{Cancel: 15, BargeIn: 10},
	}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Zero(t, rep.Invariants.AudioOrder)
	require.Positive(t, rep.Requests.ByCode["result"])
	require.Positive(t, rep.FirstAudio.Count, "no answer.audio")
	require.Positive(t, rep.AudioKiBPerRequest)
}

// TestVoicedSimServerTurns streams continuous audio with gaps to a real
// voiced (sim stages, the real turn detector), as 16 kHz PCM and as 8 kHz
// μ-law: every utterance becomes one detected turn with exactly one
// terminal message, in time, and nothing after it.
func TestVoicedSimServerTurns(t *testing.T) {
	if !vad.Available {
		t.Skip("no voice activity detector in this build")
	}
	for _, muLaw := range []bool{false, true} {
		t.Run(map[bool]string{false: "pcm16", true: "mulaw"}[muLaw], func(t *testing.T) {
			addr := voicedtest.Start(t, sim.Config{Seed: 15, FailShare: -1})
			cfg := Config{
				Addr: addr, Sessions: 6, Duration: 4 * time.Second, Think: 900 * time.Millisecond,
				Synthetic: 600 * time.Millisecond, Seed: 15, Turns: TurnsServer, MuLaw: muLaw,
			}
			rep, err := Run(testCtx(t), cfg)
			require.NoError(t, err)
			requireInvariants(t, rep)
			require.Equal(t, "server-turns", rep.Mode)
			require.Positive(t, rep.UtterancesSent)
			require.Equal(t, int(rep.UtterancesSent), rep.TurnsDetected, "one turn per utterance")
			require.Zero(t, rep.UtterancesMissed+rep.UtterancesMerged+rep.FalseTurns)
			require.Equal(t, rep.TurnsDetected, rep.Requests.Terminated)
			// The end of a turn is decided silenceMs (500) after the last
			// speech frame, which on the synthetic tone is the true end;
			// the client hears it a network hop later, or much later on
			// a machine that stalls (no upper bound holds there).
			stopped := rep.SpeechEndToStopped
			require.Equal(t, int(rep.UtterancesSent), stopped.Count)
			require.GreaterOrEqual(t, stopped.Min, 450.0)
			require.Equal(t, rep.Requests.ByCode["result"], rep.SpeechEndToResult.Count)
			if rep.SpeechEndToResult.Count == stopped.Count {
				// The same utterances, each answered after its
				// speech_stopped: so is every percentile.
				require.Greater(t, rep.SpeechEndToResult.P50, stopped.P50)
			}
			require.Positive(t, rep.Requests.ByCode["result"])
			// Lateness is requireInvariants' to judge (the machine may
			// stall); every other promise holds.
			require.Zero(t, rep.Invariants.Unplanned, "%v", rep.Requests.Unplanned)
		})
	}
}

// turnSaturation refuses every other turn the server starts, and nothing
// else, however many times the server asks it otherwise (the admission of
// the run's probe session and of its session, or any later caller). A
// call is a turn's start when the session's detector has heard speech
// since the previous call, as it must have for a turn to start; no session
// hears any before it is admitted.
type turnSaturation struct {
	heard atomic.Bool // speech since the last call
	turns atomic.Int64
}

func (s *turnSaturation) Saturated() bool {
	if !s.heard.Swap(false) {
		return false // not a turn's start
	}
	return s.turns.Add(1)%2 == 0
}

// detector is session.Config.Detector: the server's default detector,
// telling s when it hears speech.
func (s *turnSaturation) detector(rate int) (vad.Detector, error) {
	d, err := vad.New(rate, vad.Options{})
	if err != nil {
		return nil, err
	}
	return hearing{Detector: d, heard: &s.heard}, nil
}

type hearing struct {
	vad.Detector
	heard *atomic.Bool
}

func (h hearing) Process(frame []int16) (bool, error) {
	speech, err := h.Detector.Process(frame)
	if speech {
		h.heard.Store(true)
	}
	return speech, err
}

// TestVoicedSimRefusedTurns: a turn the server detects but refuses gets
// only its overloaded terminal (no input.speech_started); voiceload counts
// it as a detected turn that ended overloaded, not as a message of an
// unknown request and a missed utterance.
func TestVoicedSimRefusedTurns(t *testing.T) {
	if !vad.Available {
		t.Skip("no voice activity detector in this build")
	}
	load := &turnSaturation{}
	addr, _ := voicedtest.StartConfig(t, sim.Config{Seed: 16, FailShare: -1}, session.Config{Load: load, Detector: load.detector})
	cfg := Config{
		Addr: addr, Sessions: 1, Duration: 4 * time.Second, Think: 900 * time.Millisecond,
		Synthetic: 600 * time.Millisecond, Seed: 16, Turns: TurnsServer, MaxErrorShare: 100,
	}
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	requireInvariants(t, rep)
	require.Empty(t, rep.SessionErrors)
	require.Equal(t, int(rep.UtterancesSent), rep.TurnsDetected)
	require.Positive(t, rep.Requests.ByCode["overloaded"])
	require.Positive(t, rep.Requests.ByCode["result"])
	require.Zero(t, rep.UtterancesMissed+rep.UtterancesMerged+rep.FalseTurns)
	require.Equal(t, int(load.turns.Load()/2), rep.Requests.ByCode["overloaded"], "every other turn refused")
}

// TestVoicedSimResume: the network drops every connection in the middle
// of a real-time run (requests streaming and requests running). With
// -resume each session reconnects with its token and continues; the
// terminal messages it missed are replayed on the resumed session exactly
// once (results as they were, and the requests whose audio was cut off
// as cancelled), and none is missing or late. A request whose frames the
// cut lost before the server read any is unknown to the server: the report
// counts it with those lost at a drop without a close frame.
func TestVoicedSimResume(t *testing.T) {
	addr := voicedtest.Start(t, sim.Config{Seed: 15, FailShare: -1, SlowShare: -1, LLMMedian: 300 * time.Millisecond})
	proxy := voicedtest.NewProxy(t, addr)
	const sessions = 12
	cfg := Config{
		Addr: proxy.Addr, Sessions: sessions, Duration: 4 * time.Second, Think: 100 * time.Millisecond,
		Synthetic: 400 * time.Millisecond, Seed: 15, MetricsURL: "off", Resume: true,
	}
	ctx := testCtx(t)
	var cuts atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Cut once every session is connected (and the run is under way),
		// however slowly a loaded machine dials them.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		start := time.Now()
		for proxy.Open() < sessions || time.Since(start) < 2*time.Second {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
		cuts.Store(int64(proxy.Cut()))
	}()
	rep, err := Run(ctx, cfg)
	<-done
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Log("\n" + table.String())
	res := rep.Resume
	require.NotNil(t, res)
	require.GreaterOrEqual(t, cuts.Load(), int64(sessions), "every session was open at the cut")
	require.GreaterOrEqual(t, res.Drops, sessions)
	require.Equal(t, res.Drops, res.Resumed, "every dropped session resumed")
	require.Positive(t, res.Missed, "requests were in flight at the cut")
	require.Positive(t, res.Replayed, "terminals replayed")
	require.Equal(t, res.Missed, res.Replayed+res.LostWithInstance, "every missed terminal replayed, or its request never reached the server")
	require.LessOrEqual(t, res.LostWithInstance, sessions, "at most the request in flight of each session")
	require.Zero(t, rep.Invariants.Missing)
	require.Zero(t, rep.Invariants.Duplicate, "a terminal twice")
	require.Zero(t, rep.Invariants.AfterTerminal)
	require.Zero(t, rep.Invariants.Unplanned, "%v", rep.Requests.Unplanned)
	require.Equal(t, rep.Requests.Started, rep.Requests.Terminated+res.LostWithInstance)
	// Lateness and the resume time, judged against the stalls the run
	// measured: on a loaded machine the client itself runs late.
	requireOnTime(t, rep)
	require.Less(t, res.Time.Max, 2000.0+2*rep.ClientTimerLag.Max, "resumed within 2 s (beyond the stalls seen)")
}
