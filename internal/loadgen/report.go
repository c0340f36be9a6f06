package loadgen

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/voiced/voiced/internal/protocol"
)

// Report is the outcome of a run. Durations are in milliseconds.
type Report struct {
	Target      string    `json:"target"`
	Mode        string    `json:"mode"` // closed-loop, open-loop or idle
	Started     time.Time `json:"started"`
	ElapsedS    float64   `json:"elapsedS"`
	Interrupted bool      `json:"interrupted"`

	Sessions      int      `json:"sessions"`
	Rate          float64  `json:"rate,omitempty"`
	ThinkMs       float64  `json:"thinkMs"`
	Fast          bool     `json:"fast"`
	BudgetMs      float64  `json:"budgetMs"`
	MaxBudgetMs   float64  `json:"serverMaxBudgetMs"`
	Mix           Mix      `json:"mix"`
	Utterances    []string `json:"utterances"`
	UtteranceMs   float64  `json:"utteranceMs"`
	LateTolerance float64  `json:"lateToleranceMs"`
	MaxErrorShare float64  `json:"maxErrorSharePercent"`
	// Seed is the random seed of the run: pass it as -seed to repeat the
	// same mix and timings.
	Seed uint64 `json:"seed"`

	// SessionsOpened counts successful session handshakes, including
	// re-dials after disconnects; DialErrors the failed ones by error.
	SessionsOpened int            `json:"sessionsOpened"`
	DialErrors     map[string]int `json:"dialErrors"`
	// IdleClosedByServer (idle runs) counts sessions the server closed
	// before the run's end (its -idle-timeout, say): the memory per idle
	// session is then not measured.
	IdleClosedByServer int `json:"idleClosedByServer,omitempty"`
	// ClockRTT is the round trip of the pings that aligned the clocks.
	ClockRTT Dist `json:"clockRttMs"`
	// ClientTimerLag is how late a 10 ms timer in voiceload fired: the
	// client's own scheduling delay, which every latency here includes.
	ClientTimerLag Dist `json:"clientTimerLagMs"`
	// FramesSent counts audio frames.
	FramesSent int64 `json:"framesSent"`
	// Turns (-turns server, -mulaw) is who ended the utterances and how
	// the audio was sent; UtterancesSent and TurnsDetected compare the
	// utterances streamed (one a closed session cut short included) with
	// the turns the server found in them, over every session of each
	// slot (a slot opens a new one when the server closes its own).
	Turns          string `json:"turns"`
	MuLaw          bool   `json:"mulaw,omitempty"`
	UtterancesSent int64  `json:"utterancesSent,omitempty"`
	TurnsDetected  int    `json:"turnsDetected,omitempty"`
	// Matched by position (audioStartMs, audioEndMs against where each
	// utterance lies in its stream): UtterancesMissed no turn covers
	// (a turn the server refused, which has no position, is taken to
	// cover one), UtterancesMerged share a turn with the next one (the
	// gap between them was too short for silenceMs), FalseTurns cover no
	// utterance. voiceload's gaps (at least 700 ms of silence) are longer
	// than the default silenceMs (500), so each of these is a violation.
	UtterancesMissed int `json:"utterancesMissed,omitempty"`
	UtterancesMerged int `json:"utterancesMerged,omitempty"`
	FalseTurns       int `json:"falseTurns,omitempty"`
	// SpeechEndToStopped and SpeechEndToResult are from an utterance's
	// true end (when the stream's real-time schedule reached it) to its
	// turn's input.speech_stopped and to its result.
	SpeechEndToStopped Dist `json:"speechEndToStoppedMs"`
	SpeechEndToResult  Dist `json:"speechEndToResultMs"`

	Requests Requests `json:"requests"`

	// Latency is from the final frame's send to the terminal message's
	// arrival, over requests whose final frame was sent.
	Latency Dist `json:"latencyMs"`
	// Slack is deadline minus terminal arrival (negative: late), over
	// requests with a deadline (final frame sent). SlackOnDeadline is the
	// same over the requests that ran into a time limit:
	// deadline_exceeded, or a result degraded by a stage timeout (which
	// may be the stage's cap rather than the request's deadline; with a
	// -budget below what the stages need, it is the deadline).
	Slack           Dist `json:"slackMs"`
	SlackOnDeadline Dist `json:"slackOnDeadlineMs"`
	// FinalTranscript is from the final frame's send to the final
	// transcript event: the STT finalisation latency as a client sees it.
	FinalTranscript Dist `json:"finalTranscriptMs"`
	// FirstAnswer is from the final frame's send to the first
	// answer.delta: when a voice client could start speaking.
	FirstAnswer Dist `json:"firstAnswerMs"`
	// FirstAudio (-speech) is from the final frame's send to the first
	// answer.audio; AudioKiBPerRequest the mean answer.audio PCM per
	// result.
	FirstAudio         Dist    `json:"firstAudioMs"`
	AudioKiBPerRequest float64 `json:"audioKiBPerRequest"`
	// Refusal is from a request's first frame to its terminal message,
	// over requests refused with overloaded: how fast excess load is
	// turned away.
	Refusal Dist `json:"overloadedRefusalMs"`
	// CancelToTerminal is from the cancel message's send to the terminal
	// message, over requests that ended cancelled.
	CancelToTerminal Dist `json:"cancelToTerminalMs"`

	Degraded     int            `json:"degraded"`
	Degradations map[string]int `json:"degradations"`
	// SessionErrors are error messages with no requestId, and messages
	// the client could not match, by code.
	SessionErrors map[string]int `json:"sessionErrors"`

	Invariants Invariants `json:"invariants"`
	// LateRequests are the latest terminal messages, at most 20, to
	// find them in the server's logs.
	LateRequests []LateRequest `json:"lateRequests,omitempty"`
	// Extras are requests (at most 20) with messages after their
	// terminal message, raced ones excepted.
	Extras []Extra `json:"extras,omitempty"`
	// MissingRequests are requests (at most 20) that got no terminal
	// message, to find them in the server's logs.
	MissingRequests []Missing `json:"missingRequests,omitempty"`

	// Resume (-resume) is what became of the sessions the server dropped.
	Resume *ResumeReport `json:"resume,omitempty"`

	Server *ServerStats `json:"server,omitempty"`
	// Violations says in words which invariants were broken; empty when
	// the run is clean.
	Violations []string `json:"violations"`
}

// Extra is a request that got messages after its terminal message.
type Extra struct {
	RequestID string `json:"requestId"`
	Kind      string `json:"kind"`
	// FinalSent says whether the final frame had been sent when the
	// terminal message arrived.
	FinalSent bool `json:"finalSent"`
	// Messages are the terminal message and what followed it.
	Messages []string `json:"messages"`
}

// Missing is a request that got no terminal message.
type Missing struct {
	RequestID string `json:"requestId"`
	Kind      string `json:"kind"`
	// OpenedS is when it was opened, in seconds from the run's start.
	OpenedS   float64 `json:"openedS"`
	FinalSent bool    `json:"finalSent"`
	// Dropped (-resume) says how its connection dropped before it ended:
	// server_closed (with a close frame) or instance_killed.
	Dropped string `json:"dropped,omitempty"`
}

// LateRequest is one terminal message that arrived after its deadline.
type LateRequest struct {
	RequestID string  `json:"requestId"`
	Kind      string  `json:"kind"`
	Code      string  `json:"code"`
	SlackMs   float64 `json:"slackMs"`
	// FinalToTerminalMs is from the final frame's send to the terminal.
	FinalToTerminalMs float64 `json:"finalToTerminalMs"`
	// DeadlineAt is the deadline checked, on the server's clock.
	DeadlineAt int64    `json:"deadlineAt"`
	Reasons    []string `json:"degradation,omitempty"`
}

// Requests counts requests (attempts: a replaced requestId counts twice).
type Requests struct {
	Started int `json:"started"`
	// Terminated got their terminal message.
	Terminated int `json:"terminated"`
	// ByCode counts terminal messages: "result" or the error code.
	ByCode map[string]int `json:"byCode"`
	// ByKind counts requests by the turn that opened them.
	ByKind map[string]int `json:"byKind"`
	// Disconnected ended with their connection without a terminal
	// message: expected after a client disconnect, unexpected after
	// ServerClosed.
	Disconnected int `json:"disconnected"`
	ServerClosed int `json:"serverClosed"`
	// Abandoned were still within their deadline and grace when the run
	// was interrupted.
	Abandoned int `json:"abandoned"`
	// DroppedArrivals are open-loop arrivals that found their session's
	// queue full: the client, not the server, fell behind.
	DroppedArrivals int64 `json:"droppedArrivals"`
	// Unplanned counts terminal error codes the run did not plan for, by
	// code (see Config.MaxErrorShare).
	Unplanned map[string]int `json:"unplannedByCode"`
}

// Invariants are the protocol's promises, counted where broken.
type Invariants struct {
	// Missing: no terminal message by deadline plus grace, connection
	// still up.
	Missing int `json:"missing"`
	// Duplicate: more than one terminal message for one request.
	Duplicate int `json:"duplicate"`
	// AfterTerminal: other messages after the terminal one.
	AfterTerminal int `json:"afterTerminal"`
	// Late: terminal messages that arrived after the deadline;
	// LateBeyondTolerance those later than LateTolerance, which are the
	// violations.
	Late                int `json:"late"`
	LateBeyondTolerance int `json:"lateBeyondTolerance"`
	// CaughtUp are late terminal messages the client read only when, at
	// deadline plus grace, it made sure it had read everything the server
	// sent (client.Sync): a client starved of CPU was that far behind.
	// Without the sync they would have counted missing.
	CaughtUp int `json:"caughtUp"`
	// Raced: error messages after the terminal one answering frames or a
	// cancel that were in flight when the terminal message was sent; the
	// server could not have known. Not violations.
	Raced int `json:"raced"`
	// Unplanned: requests that ended with an error code the run did not
	// plan for; a violation past MaxErrorShare percent of the terminated
	// requests.
	Unplanned int `json:"unplannedErrors"`
	// AudioOrder (-speech): requests whose answer.audio had a seq gap, a
	// chunk after the final one, or (for a result) no final chunk.
	AudioOrder int `json:"audioOrder"`
}

// planned reports whether a terminal code is one a turn of kind k plans
// for: a result, cancelled for a cancel turn, replaced for a replace or
// barge-in turn, and deadline_exceeded for any (the budget is the run's
// choice; whether the message came in time is the late check).
func planned(k kind, code string) bool {
	switch protocol.Code(code) {
	case protocol.CodeDeadlineExceeded:
		return true
	case protocol.CodeCancelled:
		return k == kindCancel
	case protocol.CodeReplaced:
		return k == kindReplace || k == kindBargeIn
	}
	return code == protocol.TypeResult
}

// UnplannedShare is the percentage of terminated requests that ended with
// an error code the run did not plan for.
func (r Report) UnplannedShare() float64 {
	if r.Requests.Terminated == 0 {
		return 0
	}
	return 100 * float64(r.Invariants.Unplanned) / float64(r.Requests.Terminated)
}

// OK reports whether no invariant was violated.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Dist summarises a distribution in milliseconds.
type Dist struct {
	Count int     `json:"count"`
	Min   float64 `json:"min"`
	P1    float64 `json:"p1"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// distOf summarises ds (nearest-rank percentiles); it sorts ds.
func distOf(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	slices.Sort(ds)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return msOf(ds[max(0, min(i, len(ds)-1))])
	}
	return Dist{Count: len(ds), Min: msOf(ds[0]), P1: q(0.01), P50: q(0.5), P90: q(0.9), P95: q(0.95), P99: q(0.99), Max: msOf(ds[len(ds)-1])}
}

// endedOnDeadline reports whether t is a request that ran into its
// deadline.
func endedOnDeadline(t *terminal) bool {
	if t.code == string(protocol.CodeDeadlineExceeded) {
		return true
	}
	for _, r := range t.reasons {
		if strings.HasSuffix(r, "_timeout") {
			return true
		}
	}
	return false
}

func (r *runner) report(start, end time.Time, budget, maxBudget time.Duration, scr *scraper, interrupted bool) Report {
	rep := r.newReport(start, end, budget, maxBudget, interrupted)
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(rep.SessionErrors, r.sessErrs)
	maps.Copy(rep.DialErrors, r.dialErrs)
	rep.SessionsOpened = len(r.connRTTs)
	rep.ClockRTT = distOf(slices.Clone(r.connRTTs))
	res := &ResumeReport{}
	if r.cfg.Resume {
		rep.Resume = r.resumeReport(res)
	}
	var times timings
	now := time.Now()
	for _, a := range r.attempts {
		r.tally(&rep, res, &times, a, start, now, interrupted)
	}
	slices.SortFunc(rep.LateRequests, func(a, b LateRequest) int { return cmp.Compare(a.SlackMs, b.SlackMs) })
	rep.LateRequests = rep.LateRequests[:min(len(rep.LateRequests), 20)]
	times.fill(&rep)
	rep.Invariants.CaughtUp = int(r.caughtUp.Load())
	if scr != nil {
		rep.Server = scr.stats()
	}
	rep.Violations = rep.violations(r.cfg, res, interrupted)
	return rep
}

// newReport is a report of the run's settings and mode, with nothing
// counted yet.
func (r *runner) newReport(start, end time.Time, budget, maxBudget time.Duration, interrupted bool) Report {
	cfg := r.cfg
	rep := Report{
		Target: r.url, Mode: "closed-loop", Started: start, ElapsedS: end.Sub(start).Seconds(),
		Interrupted: interrupted, Sessions: cfg.Sessions, Rate: cfg.Rate, ThinkMs: msOf(cfg.Think),
		Fast: cfg.Fast, BudgetMs: msOf(budget), MaxBudgetMs: msOf(maxBudget), Mix: cfg.Mix,
		LateTolerance: msOf(cfg.LateTolerance), MaxErrorShare: cfg.MaxErrorShare, Seed: cfg.Seed, FramesSent: r.frames.Load(),
		Degradations: map[string]int{}, SessionErrors: map[string]int{}, DialErrors: map[string]int{},
		Requests: Requests{ByCode: map[string]int{}, ByKind: map[string]int{}, Unplanned: map[string]int{}, DroppedArrivals: r.dropped.Load()},
	}
	rep.Turns, rep.MuLaw = cmp.Or(cfg.Turns, TurnsClient), cfg.MuLaw
	switch {
	case cfg.Turns == TurnsServer:
		rep.Mode = "server-turns"
		rep.UtterancesSent = r.uttsSent.Load()
		r.mu.Lock()
		o := r.turnsOut
		rep.UtterancesMissed, rep.UtterancesMerged, rep.FalseTurns = o.missed, o.merged, o.falseTurns
		rep.SpeechEndToStopped, rep.SpeechEndToResult = distOf(slices.Clone(o.toStopped)), distOf(slices.Clone(o.toResult))
		r.mu.Unlock()
	case cfg.Idle:
		rep.Mode = "idle"
		rep.IdleClosedByServer = int(r.serverCloses.Load())
	case cfg.Rate > 0:
		rep.Mode = "open-loop"
	}
	for _, u := range r.utts {
		rep.Utterances = append(rep.Utterances, u.Name)
		rep.UtteranceMs = max(rep.UtteranceMs, msOf(u.Duration()))
	}
	return rep
}

// resumeReport fills res with the drops and resumes of a -resume run;
// r.mu must be held.
func (r *runner) resumeReport(res *ResumeReport) *ResumeReport {
	rc := r.resume
	res.Killed, res.Closed, res.Drops = rc.killed, rc.closed, rc.killed+rc.closed
	res.Resumed, res.NotResumed, res.GaveUp = len(rc.times), rc.notResumed, rc.gaveUp
	res.Time = distOf(slices.Clone(rc.times))
	res.TimeAfterKill, res.TimeAfterClose = distOf(slices.Clone(rc.afterKill)), distOf(slices.Clone(rc.afterClose))
	return res
}

// timings collects the latencies of the run's requests.
type timings struct {
	lat, slack, slackDL, cancel, finalText, firstDelta, firstAudio, refusal []time.Duration
	audioBytes, results                                                     int
}

// fill puts the distributions into rep.
func (t *timings) fill(rep *Report) {
	rep.Latency = distOf(t.lat)
	rep.Slack = distOf(t.slack)
	rep.SlackOnDeadline = distOf(t.slackDL)
	rep.CancelToTerminal = distOf(t.cancel)
	rep.FinalTranscript = distOf(t.finalText)
	rep.FirstAnswer = distOf(t.firstDelta)
	rep.FirstAudio = distOf(t.firstAudio)
	if t.results > 0 {
		rep.AudioKiBPerRequest = float64(t.audioBytes) / 1024 / float64(t.results)
	}
	rep.Refusal = distOf(t.refusal)
}

// tally counts one request into rep, res and times; r.mu must be held.
func (r *runner) tally(rep *Report, res *ResumeReport, times *timings, a *attempt, start, now time.Time, interrupted bool) {
	if a.dropped != goneNone {
		res.Missed++
		switch {
		case a.replayed:
			res.Replayed++
		case a.term == nil && a.dropped == goneKilled:
			res.LostWithInstance++
		case a.term == nil && a.gone == goneServerClosed:
			res.LostNotResumed++
		}
	}
	if a.kind == kindTurn {
		rep.TurnsDetected++
	}
	rep.Requests.Started++
	rep.Requests.ByKind[string(a.kind)]++
	if a.term == nil {
		r.unterminated(rep, a, start, now, interrupted)
		return
	}
	r.judge(rep, res, a)
	if a.kept {
		return // kept while the client was away: no latency, not late
	}
	if a.audioBad {
		rep.Invariants.AudioOrder++
	}
	times.add(a)
	if !a.finalSent.IsZero() {
		r.checkDeadline(rep, times, a)
	}
}

// unterminated counts a request that got no terminal message: expected
// (disconnected, lost with its instance or its connection, or cut by the
// end of an interrupted run) or missing.
func (r *runner) unterminated(rep *Report, a *attempt, start, now time.Time, interrupted bool) {
	switch {
	case a.gone == goneDisconnect:
		rep.Requests.Disconnected++
	case a.dropped == goneKilled:
		// Lost with the killed instance (Resume.LostWithInstance).
	case a.gone == goneServerClosed:
		rep.Requests.ServerClosed++
	case interrupted && (a.finalSent.IsZero() || now.Before(a.deadline.Add(r.cfg.Grace))):
		rep.Requests.Abandoned++
	default:
		rep.Invariants.Missing++
		if len(rep.MissingRequests) < 20 {
			rep.MissingRequests = append(rep.MissingRequests, Missing{RequestID: a.id, Kind: string(a.kind),
				OpenedS: a.opened.Sub(start).Seconds(), FinalSent: !a.finalSent.IsZero(), Dropped: string(a.dropped)})
		}
	}
}

// judge counts a request's terminal message: its code, whether the run
// planned for it, its degradations, and what came after it.
func (r *runner) judge(rep *Report, res *ResumeReport, a *attempt) {
	t, inv := a.term, &rep.Invariants
	rep.Requests.Terminated++
	rep.Requests.ByCode[t.code]++
	ok := planned(a.kind, t.code)
	switch {
	case r.cfg.Shedding && t.code == string(protocol.CodeOverloaded):
		ok = true
	case a.replayed && t.code == string(protocol.CodeCancelled):
		ok = true // cut off by the lost connection, and replayed as such
	case r.cfg.Resume && t.code == string(protocol.CodeUnavailable) && t.message == protocol.MessageDraining:
		// Sent as the server began to drain, before the client heard.
		res.RefusedDraining++
		ok = true
	}
	if !ok {
		rep.Requests.Unplanned[t.code]++
		inv.Unplanned++
	}
	if t.degraded {
		rep.Degraded++
	}
	for _, reason := range t.reasons {
		rep.Degradations[reason]++
	}
	if len(a.extraTypes) == 0 {
		return
	}
	onlyErrors := !slices.ContainsFunc(a.extraTypes, func(typ string) bool { return !strings.HasPrefix(typ, protocol.TypeError+":") })
	switch {
	case a.extraTerm > 0:
		inv.Duplicate++
	case a.excusable && onlyErrors:
		inv.Raced++
		return
	default:
		inv.AfterTerminal++
	}
	if len(rep.Extras) < 20 {
		first := t.code
		if t.code != "result" {
			first = "error:" + t.code + " (" + t.message + ")"
		}
		rep.Extras = append(rep.Extras, Extra{RequestID: a.id, Kind: string(a.kind),
			FinalSent: !a.finalSent.IsZero(), Messages: append([]string{first}, a.extraTypes...)})
	}
}

// add records the latencies of a request that has its terminal message.
func (t *timings) add(a *attempt) {
	term := a.term
	if !a.finalSent.IsZero() {
		if !term.at.Before(a.finalSent) {
			t.lat = append(t.lat, term.at.Sub(a.finalSent))
		}
		if !a.finalText.IsZero() {
			t.finalText = append(t.finalText, a.finalText.Sub(a.finalSent))
		}
		if !a.firstDelta.IsZero() {
			t.firstDelta = append(t.firstDelta, a.firstDelta.Sub(a.finalSent))
		}
		if !a.firstAudio.IsZero() {
			t.firstAudio = append(t.firstAudio, a.firstAudio.Sub(a.finalSent))
		}
	}
	if term.code == "result" {
		t.results++
		t.audioBytes += a.audioBytes
	}
	if term.code == string(protocol.CodeOverloaded) && !a.firstSent.IsZero() {
		t.refusal = append(t.refusal, term.at.Sub(a.firstSent))
	}
	if !a.cancelSent.IsZero() && term.code == string(protocol.CodeCancelled) {
		t.cancel = append(t.cancel, term.at.Sub(a.cancelSent))
	}
}

// checkDeadline records the slack of a request whose final frame was
// sent, and counts it late when its terminal came after the deadline.
func (r *runner) checkDeadline(rep *Report, times *timings, a *attempt) {
	t := a.term
	s := a.deadlineOf().Sub(t.at)
	times.slack = append(times.slack, s)
	if endedOnDeadline(t) {
		times.slackDL = append(times.slackDL, s)
	}
	if s >= 0 {
		return
	}
	rep.LateRequests = append(rep.LateRequests, LateRequest{
		RequestID: a.id, Kind: string(a.kind), Code: t.code, SlackMs: msOf(s),
		FinalToTerminalMs: msOf(t.at.Sub(a.finalSent)), DeadlineAt: cmp.Or(t.budgetDeadlineAt, a.deadlineAt),
		Reasons: t.reasons,
	})
	rep.Invariants.Late++
	if -s > r.cfg.LateTolerance {
		rep.Invariants.LateBeyondTolerance++
	}
}

// violations lists the run's broken invariants, in words.
func (rep *Report) violations(cfg Config, res *ResumeReport, interrupted bool) []string {
	var v []string
	inv := &rep.Invariants
	if inv.Missing > 0 {
		v = append(v, fmt.Sprintf("%d requests got no terminal message", inv.Missing))
	}
	if inv.Duplicate > 0 {
		v = append(v, fmt.Sprintf("%d requests got more than one terminal message", inv.Duplicate))
	}
	if inv.AfterTerminal > 0 {
		v = append(v, fmt.Sprintf("%d requests got messages after their terminal message", inv.AfterTerminal))
	}
	if n := rep.Requests.ServerClosed; n > 0 && !interrupted {
		// Without -resume nothing excuses a request the server cut off
		// by closing its session (with -resume it is a drop, resumed).
		v = append(v, fmt.Sprintf("%d requests were cut off by the server closing their session", n))
	}
	if share := rep.UnplannedShare(); inv.Unplanned > 0 && share > cfg.MaxErrorShare {
		v = append(v, fmt.Sprintf("%d requests (%.2f%% of %d terminated) ended with error codes the run did not plan for (%s); -max-error-share allows %g%%",
			inv.Unplanned, share, rep.Requests.Terminated, kv(rep.Requests.Unplanned), cfg.MaxErrorShare))
	}
	if inv.AudioOrder > 0 {
		v = append(v, fmt.Sprintf("%d requests got answer.audio out of order, after its final chunk, or without a final chunk", inv.AudioOrder))
	}
	if n := rep.UtterancesMissed + rep.UtterancesMerged + rep.FalseTurns; rep.Mode == "server-turns" && n > 0 && !interrupted {
		v = append(v, fmt.Sprintf("%d utterances were streamed and the server detected %d turns: %d utterances missed, %d merged into the next one's turn, %d false turns",
			rep.UtterancesSent, rep.TurnsDetected, rep.UtterancesMissed, rep.UtterancesMerged, rep.FalseTurns))
	}
	if n := res.NotResumed + res.GaveUp; n > 0 {
		v = append(v, fmt.Sprintf("%d dropped sessions were not resumed (%d as new sessions, %d never reconnected)", n, res.NotResumed, res.GaveUp))
	}
	if inv.LateBeyondTolerance > 0 {
		v = append(v, fmt.Sprintf("%d terminal messages arrived after the deadline (tolerance %v)", inv.LateBeyondTolerance, cfg.LateTolerance))
	}
	return v
}

func msOf(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// progress prints a progress line every ProgressEvery.
func (r *runner) progress(ctx context.Context, start time.Time, scr *scraper) {
	t := time.NewTicker(r.cfg.ProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		started := len(r.attempts)
		r.mu.Unlock()
		ended, gone := r.ended.Load(), r.gone.Load()
		line := fmt.Sprintf("[%5.1fs] sessions %d | requests %d started, %d ended, %d gone with their connection, %d in flight | late %d, extra terminal %d, server closes %d",
			time.Since(start).Seconds(), r.connected.Load(), started, ended, gone, int64(started)-ended-gone,
			r.late.Load(), r.extraTerminals.Load(), r.serverCloses.Load())
		if scr != nil {
			if cur, prev, ok := scr.latest(); ok {
				if wall := cur.at.Sub(prev.at).Seconds(); wall > 0 {
					line += fmt.Sprintf(" | server %.2f cores, %.0f MiB RSS", (cur.cpu-prev.cpu)/wall, cur.rss/(1<<20))
				}
			}
		}
		fmt.Fprintln(r.cfg.Progress, line)
	}
}

// WriteTable writes the report for people, in sections whose columns
// align.
func (r Report) WriteTable(w io.Writer) error {
	t := &table{w: w}
	t.section()
	r.writeRun(t)
	t.section()
	r.writeRequests(t)
	t.section()
	r.writeLatencies(t)
	t.section()
	if r.Resume != nil {
		r.writeResume(t)
		t.section()
	}
	r.writeInvariants(t)
	if s := r.Server; s != nil {
		r.writeServer(t, s)
	}
	r.writeDetails(t)
	return t.flush()
}

// table writes a report as sections of aligned columns.
type table struct {
	w   io.Writer
	tw  *tabwriter.Writer
	err error // the first failed flush
}

// section ends the current section, if any, and starts the next.
func (t *table) section() {
	if t.tw != nil {
		if t.flush() == nil {
			fmt.Fprintln(t.w)
		}
	}
	t.tw = tabwriter.NewWriter(t.w, 0, 0, 2, ' ', 0)
}

func (t *table) p(format string, args ...any) { fmt.Fprintf(t.tw, format+"\n", args...) }

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	return t.err
}

// writeRun writes what was run: target, load, turns and sessions.
func (r Report) writeRun(t *table) {
	mode := r.Mode
	if r.Mode == "open-loop" {
		mode += fmt.Sprintf(" at %.1f req/s", r.Rate)
	}
	pace := "in real time"
	if r.Fast {
		pace = "as fast as possible"
	}
	interrupted := ""
	if r.Interrupted {
		interrupted = " (interrupted)"
	}
	t.p("target\t%s, %s, %d sessions, %.1f s%s", r.Target, mode, r.Sessions, r.ElapsedS, interrupted)
	t.p("utterance\t%.0f ms sent %s; budget %.0f ms (server max %.0f); think %.0f ms", r.UtteranceMs, pace, r.BudgetMs, r.MaxBudgetMs, r.ThinkMs)
	t.p("mix\tcancel %g%%, replace %g%%, barge-in %g%%, disconnect %g%%; seed %d", r.Mix.Cancel, r.Mix.Replace, r.Mix.BargeIn, r.Mix.Disconnect, r.Seed)
	if r.Mode == "server-turns" || r.MuLaw {
		enc := "16-bit PCM"
		if r.MuLaw {
			enc = "8 kHz mu-law"
		}
		if r.Mode == "server-turns" {
			t.p("turns\t%s turns, audio as %s; %d utterances streamed, %d turns detected", r.Turns, enc, r.UtterancesSent, r.TurnsDetected)
		} else {
			t.p("turns\t%s turns, audio as %s", r.Turns, enc)
		}
	}
	if r.Mode == "server-turns" {
		t.p("\t%d utterances missed, %d merged into the next one's turn, %d false turns", r.UtterancesMissed, r.UtterancesMerged, r.FalseTurns)
		e := func(name string, x Dist) {
			t.p("%s\tp50 %.1f, p95 %.1f, p99 %.1f, max %.1f ms (%d)", name, x.P50, x.P95, x.P99, x.Max, x.Count)
		}
		e("end of speech -> speech_stopped", r.SpeechEndToStopped)
		e("end of speech -> result", r.SpeechEndToResult)
	}
	dialErrs := ""
	if len(r.DialErrors) > 0 {
		dialErrs = " (" + kv(r.DialErrors) + ")"
	}
	t.p("sessions\t%d opened, %d dial errors%s; clock-sync RTT p50 %.2f ms, max %.2f ms (clock offsets are within half of it)",
		r.SessionsOpened, sum(r.DialErrors), dialErrs, r.ClockRTT.P50, r.ClockRTT.Max)
}

// writeRequests writes how the requests ended.
func (r Report) writeRequests(t *table) {
	t.p("requests\t%d\tstarted (%d frames sent)", r.Requests.Started, r.FramesSent)
	t.p("terminated\t%d\t", r.Requests.Terminated)
	for _, k := range sortedKeys(r.Requests.ByCode) {
		t.p("  %s\t%d\t", k, r.Requests.ByCode[k])
	}
	t.p("degraded\t%d\t%s", r.Degraded, kv(r.Degradations))
	t.p("disconnected by us\t%d\t(no terminal expected)", r.Requests.Disconnected)
	t.p("closed by the server\t%d\t", r.Requests.ServerClosed)
	if r.Requests.Abandoned > 0 || r.Requests.DroppedArrivals > 0 {
		t.p("abandoned\t%d\t(run interrupted)", r.Requests.Abandoned)
		t.p("arrivals dropped\t%d\t(client fell behind)", r.Requests.DroppedArrivals)
	}
	if len(r.SessionErrors) > 0 {
		t.p("session errors\t%d\t%s", sum(r.SessionErrors), kv(r.SessionErrors))
	}
}

// writeLatencies writes the latency distributions, in milliseconds.
func (r Report) writeLatencies(t *table) {
	t.p("ms\tcount\tmin\tp1\tp50\tp90\tp99\tmax")
	d := func(name string, x Dist) {
		t.p("%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f", name, x.Count, x.Min, x.P1, x.P50, x.P90, x.P99, x.Max)
	}
	d("final frame -> final transcript", r.FinalTranscript)
	d("final frame -> first answer", r.FirstAnswer)
	if r.FirstAudio.Count > 0 {
		d("final frame -> first audio", r.FirstAudio)
	}
	d("final frame -> terminal", r.Latency)
	d("deadline slack", r.Slack)
	d("  ended by a timeout", r.SlackOnDeadline)
	d("cancel -> terminal", r.CancelToTerminal)
	if r.Refusal.Count > 0 {
		d("first frame -> overloaded", r.Refusal)
	}
	d("client timer lag", r.ClientTimerLag)
}

// writeResume writes the drops and resumes of a -resume run.
func (r Report) writeResume(t *table) {
	x := r.Resume
	t.p("resume\t%d connections dropped by the server (%d killed: no close frame; %d closed), %d resumed, %d as new sessions, %d never reconnected",
		x.Drops, x.Killed, x.Closed, x.Resumed, x.NotResumed, x.GaveUp)
	for _, d := range []struct {
		name string
		x    Dist
	}{{"", x.Time}, {" after a kill", x.TimeAfterKill}, {" after a close", x.TimeAfterClose}} {
		t.p("  drop -> resumed session.ready%s\t%d: p50 %.1f ms, p99 %.1f ms, max %.1f ms", d.name, d.x.Count, d.x.P50, d.x.P99, d.x.Max)
	}
	t.p("  refused while draining\t%d (sent before session.draining arrived)", x.RefusedDraining)
	t.p("  missed terminals\t%d: %d replayed (each once: a second copy counts as duplicate), %d lost with a killed instance, %d not resumed, the rest missing",
		x.Missed, x.Replayed, x.LostWithInstance, x.LostNotResumed)
}

// writeInvariants writes the invariants' counts.
func (r Report) writeInvariants(t *table) {
	inv := r.Invariants
	t.p("missing terminal\t%d", inv.Missing)
	t.p("duplicate terminal\t%d", inv.Duplicate)
	t.p("after terminal\t%d", inv.AfterTerminal)
	t.p("late terminal\t%d (%d beyond tolerance %.0f ms; %d read only after the client caught up with what the server sent)",
		inv.Late, inv.LateBeyondTolerance, r.LateTolerance, inv.CaughtUp)
	t.p("raced\t%d (errors answering frames or a cancel in flight; not violations)", inv.Raced)
	if r.FirstAudio.Count > 0 || inv.AudioOrder > 0 {
		t.p("answer.audio out of order\t%d (%.1f KiB of audio per result)", inv.AudioOrder, r.AudioKiBPerRequest)
	}
	unplanned := ""
	if inv.Unplanned > 0 {
		unplanned = ": " + kv(r.Requests.Unplanned)
	}
	t.p("unplanned errors\t%d (%.2f%% of terminated, %g%% allowed)%s", inv.Unplanned, r.UnplannedShare(), r.MaxErrorShare, unplanned)
}

// writeServer writes what the server's /metrics said during the run.
func (r Report) writeServer(t *table, s *ServerStats) {
	if s.Scrapes == 0 {
		t.p("server\tmetrics unavailable: %s", s.LastError)
		return
	}
	perFrame := ""
	if s.CPUPerFrameUs != nil {
		perFrame = fmt.Sprintf("; %.1f us per audio frame accepted", *s.CPUPerFrameUs)
	}
	t.p("server CPU\t%.1f s: avg %.2f cores, peak %.2f cores%s", s.CPUSeconds, s.AvgCores, s.PeakCores, perFrame)
	t.p("server memory\tRSS %.1f -> max %.1f MiB; heap in use %.1f -> max %.1f MiB; goroutines %.0f -> max %.0f",
		s.RSSStartBytes/(1<<20), s.RSSMaxBytes/(1<<20), s.HeapInuseStart/(1<<20), s.HeapInuseMaxBytes/(1<<20), s.GoroutinesStart, s.GoroutinesMax)
	if s.LateTerminals != nil {
		t.p("server-side late\t%.0f (voiced_late_terminals_total during the run)", *s.LateTerminals)
	}
	if c := s.CancelToTerminal; c != nil {
		t.p("server cancel -> terminal\tp99 <= %g ms, max <= %g ms (%d cancels; voiced_cancel_to_terminal_seconds buckets)", c.P99Ms, c.MaxMs, c.Count)
	}
	if c := s.Refusal; c != nil {
		t.p("server frame -> overloaded\tp99 <= %g ms, max <= %g ms (%d refusals; voiced_refusal_seconds buckets)", c.P99Ms, c.MaxMs, c.Count)
	}
	if r.IdleClosedByServer > 0 {
		// Divided by the sessions opened, the memory of fewer sessions
		// held would read as a smaller figure per session.
		t.p("per idle session\tnot measured: %d idle sessions closed by the server before the run's end (its -idle-timeout?)", r.IdleClosedByServer)
	} else if r.Mode == "idle" && r.SessionsOpened > 0 && s.IdleRSSMaxBytes > 0 {
		// The peak while opening and holding the sessions, not while
		// closing them; and what the process kept at the end.
		n := float64(r.SessionsOpened) * 1024
		t.p("per idle session\tRSS %.1f KiB (peak; %.1f KiB held at the end), heap in use %.1f KiB (peak)",
			(s.IdleRSSMaxBytes-s.RSSStartBytes)/n, (s.IdleRSSHeldBytes-s.RSSStartBytes)/n,
			(s.IdleHeapInuseMaxBytes-s.HeapInuseStart)/n)
	}
}

// writeDetails writes the requests that broke an invariant, and the
// verdict.
func (r Report) writeDetails(t *table) {
	for _, x := range r.Extras {
		t.p("  after terminal\t%s (%s, final frame sent %v): %s", x.RequestID, x.Kind, x.FinalSent, strings.Join(x.Messages, ", "))
	}
	for _, m := range r.MissingRequests {
		t.p("  missing\t%s (%s) opened at %.2f s, final frame sent %v, connection dropped: %s", m.RequestID, m.Kind, m.OpenedS, m.FinalSent, cmp.Or(m.Dropped, "no"))
	}
	for _, l := range r.LateRequests {
		t.p("  late\t%s (%s): %s %.1f ms late, %.1f ms after the final frame", l.RequestID, l.Kind, l.Code, -l.SlackMs, l.FinalToTerminalMs)
	}
	if r.OK() {
		t.p("result\tOK: no invariant violated")
	} else {
		t.p("result\tFAIL: %s", strings.Join(r.Violations, "; "))
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func sortedKeys(m map[string]int) []string {
	ks := slices.Collect(maps.Keys(m))
	slices.SortFunc(ks, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	return ks
}

func kv(m map[string]int) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", k, m[k])
	}
	return b.String()
}
