package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 30 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// quick is a short real-time run against addr.
func quick(addr string) Config {
	return Config{
		Addr: addr, Sessions: 6, Duration: 2 * time.Second, Think: 50 * time.Millisecond,
		Synthetic: 200 * time.Millisecond, Grace: 300 * time.Millisecond, Seed: 1,
	}
}

func TestRunAgainstFakeServer(t *testing.T) {
	f := &fakeServer{proc: 150 * time.Millisecond, maxBudget: 1700 * time.Millisecond}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Mix = Mix{Cancel: 20, Replace: 15, BargeIn: 15, Disconnect: 10}
	var progress bytes.Buffer
	cfg.Progress, cfg.ProgressEvery = &progress, 500*time.Millisecond
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)

	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Log("\n" + table.String())
	require.True(t, rep.OK(), "violations: %v", rep.Violations)
	require.Zero(t, rep.Invariants.Missing)
	require.Zero(t, rep.Invariants.Duplicate)
	require.Zero(t, rep.Invariants.LateBeyondTolerance)
	require.Greater(t, rep.Requests.Started, 20)
	for _, code := range []string{"result", "cancelled", "replaced"} {
		require.Positive(t, rep.Requests.ByCode[code], "no %s terminal", code)
	}
	require.Positive(t, rep.Requests.ByKind["disconnect"])
	require.Zero(t, rep.Invariants.Unplanned, "cancelled and replaced were planned: %v", rep.Requests.Unplanned)
	// Every request is accounted for exactly once.
	r := rep.Requests
	require.Equal(t, r.Started, r.Terminated+r.Disconnected+r.ServerClosed+r.Abandoned+rep.Invariants.Missing)
	require.Zero(t, r.ServerClosed)
	require.Greater(t, rep.SessionsOpened, cfg.Sessions, "disconnects re-dial")
	// Latency from the final frame is at least the fake's processing.
	require.GreaterOrEqual(t, rep.Latency.P50, 150.0)
	require.Positive(t, rep.CancelToTerminal.Count)
	// The fake sends the final transcript and the answer with its result.
	require.Equal(t, rep.Requests.ByCode["result"], rep.FinalTranscript.Count)
	require.Equal(t, rep.Requests.ByCode["result"], rep.FirstAnswer.Count)
	require.GreaterOrEqual(t, rep.FinalTranscript.P50, 150.0)
	require.Zero(t, rep.Refusal.Count)
	require.Positive(t, rep.Slack.Min, "the fake answers well before the deadline")
	require.NotNil(t, rep.Server)
	require.Positive(t, rep.Server.Scrapes)
	require.Positive(t, rep.Server.RSSMaxBytes)
	require.Contains(t, progress.String(), "requests")
	require.Contains(t, table.String(), "OK")
}

// TestSessionsCloseAfterTheLastTurn: at the end of a run no session is
// closed while another's request still runs (a thousand sessions closing
// together would slow the last requests down on a shared machine).
// Sessions think for different times, so when the run stops some are
// idle while others are mid-request: closed as each finished, they would
// close busy.
func TestSessionsCloseAfterTheLastTurn(t *testing.T) {
	for _, rate := range []float64{0, 40} {
		t.Run(fmt.Sprintf("rate %g", rate), func(t *testing.T) {
			f := &fakeServer{proc: 150 * time.Millisecond, maxBudget: 1700 * time.Millisecond}
			srv := f.start(t)
			cfg := quick(addrOf(srv))
			cfg.Sessions, cfg.Think, cfg.Rate = 20, 300*time.Millisecond, rate
			cfg.Duration = time.Second
			rep, err := Run(testCtx(t), cfg)
			require.NoError(t, err)
			require.True(t, rep.OK(), "violations: %v", rep.Violations)
			require.Positive(t, rep.Requests.Started)
			require.Zero(t, f.closedBusy.Load(), "sessions closed while requests ran")
			require.Zero(t, f.running.Load())
		})
	}
}

func TestDetectsBrokenPromises(t *testing.T) {
	for _, tc := range []struct {
		bug   string
		check func(t *testing.T, inv Invariants)
	}{
		{"duplicate", func(t *testing.T, inv Invariants) { require.Positive(t, inv.Duplicate) }},
		{"missing", func(t *testing.T, inv Invariants) { require.Positive(t, inv.Missing) }},
		{"late", func(t *testing.T, inv Invariants) {
			require.Positive(t, inv.LateBeyondTolerance)
			require.Equal(t, inv.Late, inv.LateBeyondTolerance)
		}},
		{"after", func(t *testing.T, inv Invariants) { require.Positive(t, inv.AfterTerminal) }},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			t.Parallel()
			f := &fakeServer{proc: 50 * time.Millisecond, maxBudget: 1700 * time.Millisecond, bug: tc.bug}
			srv := f.start(t)
			cfg := quick(addrOf(srv))
			cfg.Duration, cfg.Budget, cfg.MetricsURL = time.Second, 300*time.Millisecond, "off"
			rep, err := Run(testCtx(t), cfg)
			require.NoError(t, err)
			require.False(t, rep.OK())
			require.NotEmpty(t, rep.Violations)
			tc.check(t, rep.Invariants)
		})
	}
}

// TestBehindIsLateNotMissing: terminal messages a client reads only when
// it catches up with what the server sent (a ping's pong follows them)
// count late, not missing.
func TestBehindIsLateNotMissing(t *testing.T) {
	f := &fakeServer{proc: 50 * time.Millisecond, maxBudget: 1700 * time.Millisecond, bug: "behind"}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Duration, cfg.Budget, cfg.MetricsURL = time.Second, 300*time.Millisecond, "off"
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	inv := rep.Invariants
	require.Zero(t, inv.Missing)
	require.Positive(t, inv.CaughtUp)
	require.Equal(t, inv.CaughtUp, inv.Late, "every result came after deadline plus grace")
	require.False(t, rep.OK(), "late is still a broken promise")
}

func TestRequestBoundAndFastMode(t *testing.T) {
	f := &fakeServer{proc: 20 * time.Millisecond, maxBudget: 1700 * time.Millisecond}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Requests, cfg.Duration, cfg.Fast, cfg.Think = 7, 20*time.Second, true, -1
	cfg.Synthetic = 2 * time.Second // 100 frames: real time would take 2 s each
	start := time.Now()
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.True(t, rep.OK(), "violations: %v", rep.Violations)
	require.Equal(t, 7, rep.Requests.Started)
	require.Equal(t, 7, rep.Requests.ByCode["result"])
	require.Equal(t, int64(700), rep.FramesSent)
	require.Less(t, time.Since(start), 10*time.Second, "the request bound ends the run")
}

func TestOpenLoop(t *testing.T) {
	f := &fakeServer{proc: 100 * time.Millisecond, maxBudget: 1700 * time.Millisecond}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Rate, cfg.Duration = 40, 1500*time.Millisecond
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.True(t, rep.OK(), "violations: %v", rep.Violations)
	require.Equal(t, "open-loop", rep.Mode)
	// 40/s for 1.5 s is 60 arrivals on average; Poisson keeps it well
	// within these bounds.
	require.InDelta(t, 60, rep.Requests.Started, 30)
	require.Equal(t, rep.Requests.Started, rep.Requests.ByCode["result"])
}

func TestIdleSessions(t *testing.T) {
	f := &fakeServer{maxBudget: 1700 * time.Millisecond}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Idle, cfg.Sessions, cfg.Duration = true, 20, 500*time.Millisecond
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.Equal(t, "idle", rep.Mode)
	require.Equal(t, 20, rep.SessionsOpened)
	require.Zero(t, rep.Requests.Started)
	require.GreaterOrEqual(t, rep.Server.Scrapes, 2)
	require.Positive(t, rep.Server.IdleRSSHeldBytes, "a scrape with every session open")
}

func TestInterruptIsNotMissing(t *testing.T) {
	f := &fakeServer{proc: time.Second, maxBudget: 1700 * time.Millisecond}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Duration, cfg.MetricsURL = 10*time.Second, "off"
	ctx, cancel := context.WithTimeout(testCtx(t), 1500*time.Millisecond)
	defer cancel()
	rep, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.True(t, rep.Interrupted)
	require.Zero(t, rep.Invariants.Missing)
	require.Positive(t, rep.Requests.Abandoned)
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"remote refused", Config{Addr: "10.1.2.3:8080"}, ErrNotLoopback},
		{"hostname refused", Config{Addr: "example.invalid:8080"}, ErrNotLoopback},
		{"not host:port", Config{Addr: "127.0.0.1"}, ErrConfig},
		{"mix over 100", Config{Addr: "127.0.0.1:1", Mix: Mix{Cancel: 60, Replace: 50}}, ErrConfig},
		{"negative share", Config{Addr: "127.0.0.1:1", Mix: Mix{Cancel: -1}}, ErrConfig},
		{"negative rate", Config{Addr: "127.0.0.1:1", Rate: -1}, ErrConfig},
		{"negative ramp", Config{Addr: "127.0.0.1:1", Ramp: -time.Second}, ErrConfig},
		// Negative sessions, duration, grace and utterance ran with the
		// defaults (10, 30 s, 1 s, 1.5 s) instead of being refused.
		{"negative sessions", Config{Addr: "127.0.0.1:1", Sessions: -5}, ErrConfig},
		{"negative duration", Config{Addr: "127.0.0.1:1", Duration: -time.Second}, ErrConfig},
		{"negative grace", Config{Addr: "127.0.0.1:1", Grace: -time.Second}, ErrConfig},
		{"negative utterance", Config{Addr: "127.0.0.1:1", Synthetic: -time.Second}, ErrConfig},
		{"ramp past the run", Config{Addr: "127.0.0.1:1", Ramp: time.Minute, Duration: time.Minute}, ErrConfig},
		{"ramp open loop", Config{Addr: "127.0.0.1:1", Ramp: time.Second, Rate: 5}, ErrConfig},
		{"resume open loop", Config{Addr: "127.0.0.1:1", Resume: true, Rate: 5}, ErrConfig},
		{"resume server turns", Config{Addr: "127.0.0.1:1", Resume: true, Turns: TurnsServer}, ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(testCtx(t), tc.cfg)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestCheckTarget(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		allow []string
		ok    bool
	}{
		{"127.0.0.1:8080", nil, true},
		{"127.8.9.10:80", nil, true},
		{"[::1]:8080", nil, true},
		{"localhost:8080", nil, true},
		{"192.168.1.5:8080", nil, false},
		{"192.168.1.5:8080", []string{"192.168.1.5:8080"}, true},
		{"192.168.1.5:9090", []string{"192.168.1.5:8080"}, false},
		{"voice.example.com:443", nil, false},
		{"0.0.0.0:8080", nil, false},
	} {
		err := checkTarget(tc.addr, tc.allow)
		require.Equal(t, tc.ok, err == nil, "%s allow %v: %v", tc.addr, tc.allow, err)
	}
}

func TestUnreachableServer(t *testing.T) {
	// Port 1 on loopback: nothing listens there.
	_, err := Run(testCtx(t), Config{Addr: "127.0.0.1:1", MetricsURL: "off"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "first session")
}

func TestWAV(t *testing.T) {
	u := Synthetic(100*time.Millisecond, 3)
	var b bytes.Buffer
	require.NoError(t, WriteWAV(&b, u))
	got, err := ReadWAV(bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	require.Equal(t, u.SampleRate, got.SampleRate)
	require.Equal(t, u.Samples, got.Samples)
	require.Len(t, got.Frames(), 5)
	require.Len(t, got.Frames()[0], 320)

	// Two channels are mixed down to one.
	stereo := append([]byte(nil), b.Bytes()...)
	stereo[22] = 2
	mixed, err := ReadWAV(bytes.NewReader(stereo))
	require.NoError(t, err)
	require.Len(t, mixed.Samples, len(u.Samples)/2)
	require.Equal(t, int16((int(u.Samples[0])+int(u.Samples[1]))/2), mixed.Samples[0])
	rate := append([]byte(nil), b.Bytes()...)
	rate[24], rate[25] = 0x11, 0x2b // 11025 Hz
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no RIFF header"},
		{"not riff", []byte("RIFX0000WAVEfmt "), "not a RIFF WAVE"},
		{"sample rate", rate, "sample rate 11025"},
		{"no data", b.Bytes()[:36], "no data chunk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadWAV(bytes.NewReader(tc.data))
			require.ErrorIs(t, err, ErrWAV)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDistOf(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	require.Equal(t, Dist{}, distOf(nil))
	require.Equal(t, Dist{Count: 1, Min: 5, P1: 5, P50: 5, P90: 5, P95: 5, P99: 5, Max: 5}, distOf(ms(5)))
	var hundred []int
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, i)
	}
	require.Equal(t, Dist{Count: 100, Min: 1, P1: 1, P50: 50, P90: 90, P95: 95, P99: 99, Max: 100}, distOf(ms(hundred...)))
	require.Equal(t, -3.0, distOf(ms(-3, 4)).Min)
}

func TestEndedOnDeadline(t *testing.T) {
	require.True(t, endedOnDeadline(&terminal{code: string(protocol.CodeDeadlineExceeded)}))
	require.True(t, endedOnDeadline(&terminal{code: "result", reasons: []string{"llm_timeout"}}))
	require.False(t, endedOnDeadline(&terminal{code: "result", reasons: []string{"retrieval_failed"}}))
	require.False(t, endedOnDeadline(&terminal{code: string(protocol.CodeCancelled)}))
}

func TestBearerToken(t *testing.T) {
	f := &fakeServer{proc: 10 * time.Millisecond, maxBudget: 1700 * time.Millisecond, token: "s3cret-token"}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Requests, cfg.MetricsURL = 2, "off"
	_, err := Run(testCtx(t), cfg)
	require.ErrorContains(t, err, "VOICELOAD_TOKEN")
	require.NotContains(t, err.Error(), "s3cret-token")

	cfg.Token = "s3cret-token"
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.True(t, rep.OK(), "violations: %v", rep.Violations)
	require.Equal(t, 2, rep.Requests.ByCode["result"])
	var js bytes.Buffer
	require.NoError(t, rep.WriteTable(&js))
	require.NotContains(t, js.String(), "s3cret-token")
}

func TestOverloadedRefusals(t *testing.T) {
	// One request in flight per session, and open-loop arrivals that
	// overlap: the excess is refused at its first frame. Overload is not
	// what a run plans for, so it fails the run unless -max-error-share
	// allows it.
	f := &fakeServer{proc: 300 * time.Millisecond, maxBudget: 1700 * time.Millisecond, inFlight: 1}
	srv := f.start(t)
	cfg := quick(addrOf(srv))
	cfg.Sessions, cfg.Rate, cfg.Duration, cfg.MetricsURL = 2, 40, time.Second, "off"
	rep, err := Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.False(t, rep.OK())
	require.Contains(t, unplannedViolation(rep), "error codes the run did not plan for (overloaded ")
	require.Equal(t, rep.Requests.ByCode["overloaded"], rep.Invariants.Unplanned)
	require.Equal(t, rep.Requests.ByCode["overloaded"], rep.Requests.Unplanned["overloaded"])

	cfg.MaxErrorShare = 100
	rep, err = Run(testCtx(t), cfg)
	require.NoError(t, err)
	require.Empty(t, unplannedViolation(rep))
	require.Positive(t, rep.Requests.ByCode["overloaded"])
	require.Equal(t, rep.Requests.ByCode["overloaded"], rep.Refusal.Count)
	require.Less(t, rep.Refusal.P50, 100.0, "refused at the first frame, not after the utterance")
}

// unplannedViolation returns the report's violation about unplanned error
// codes, or "". (A loaded machine may add late ones; other tests check
// lateness.)
func unplannedViolation(rep Report) string {
	for _, v := range rep.Violations {
		if strings.Contains(v, "did not plan for") {
			return v
		}
	}
	return ""
}

func TestPlanned(t *testing.T) {
	for _, tc := range []struct {
		k    kind
		code string
		want bool
	}{
		{kindPlain, "result", true},
		{kindPlain, "deadline_exceeded", true},
		{kindCancel, "deadline_exceeded", true},
		{kindCancel, "cancelled", true},
		{kindReplace, "replaced", true},
		{kindBargeIn, "replaced", true},
		{kindPlain, "cancelled", false},
		{kindPlain, "replaced", false},
		{kindCancel, "replaced", false},
		{kindReplace, "cancelled", false},
		{kindPlain, "overloaded", false},
		{kindCancel, "overloaded", false},
		{kindPlain, "unavailable", false},
		{kindPlain, "internal", false},
		{kindPlain, "bad_audio", false},
		{kindPlain, "bad_message", false},
		{kindPlain, "rate_limited", false},
		{kindPlain, "", false},
	} {
		require.Equal(t, tc.want, planned(tc.k, tc.code), "%s ending %q", tc.k, tc.code)
	}
}

// TestMaxErrorShare: the share is a percentage of terminated requests,
// compared strictly: exactly at the limit passes.
func TestMaxErrorShare(t *testing.T) {
	for _, tc := range []struct {
		unplanned, terminated int
		max                   float64
		ok                    bool
	}{
		{0, 10, 0, true},
		{1, 10, 0, false},
		{1, 10, 10, true},
		{2, 10, 10, false},
		{1, 200, 0.5, true},
		{2, 200, 0.5, false},
	} {
		r := &runner{cfg: Config{MaxErrorShare: tc.max}}
		for i := range tc.terminated {
			code := "result"
			if i < tc.unplanned {
				code = "overloaded"
			}
			r.attempts = append(r.attempts, &attempt{kind: kindPlain, term: &terminal{code: code}})
		}
		rep := r.report(time.Now(), time.Now(), 0, 0, nil, false)
		require.Equal(t, tc.ok, rep.OK(), "%d of %d with %g%% allowed: %v", tc.unplanned, tc.terminated, tc.max, rep.Violations)
		require.Equal(t, tc.unplanned, rep.Invariants.Unplanned)
	}
}
