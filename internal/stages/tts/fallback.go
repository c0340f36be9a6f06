package tts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// fallbackMargin is kept on top of the secondary's expected synthesis
// time when the primary's wait for its first audio is cut short.
const fallbackMargin = 20 * time.Millisecond

// errReserve cancels the primary when it has sent no audio by the time
// the secondary needs to start to finish before the deadline. It wraps
// provider.ErrNoProgress, so the remote engine reports KindTimeout.
var errReserve = fmt.Errorf("no audio before the time kept for the fallback: %w", provider.ErrNoProgress)

// fallback speaks with primary (the remote engine) and, when a sentence
// fails before any of its audio was emitted, speaks it with secondary
// (Flite) instead: timeouts, the first-byte limit, 5xx, 429, 401, 400 and
// cut streams all fall back, without a retry of the primary. A failure
// after some audio is returned as it is: speaking the sentence again
// would repeat what the listener already heard. Our own cancellation
// never falls back. After a failure (other than 400, which is about that
// sentence) the primary is skipped for cooldown, or the Retry-After of a
// 429 if longer, so an outage does not cost every sentence the first-byte
// wait.
type fallback struct {
	primary, secondary Synthesizer
	cooldown           time.Duration
	// observe records the primary's failures (the caller records the
	// final outcome).
	observe func(context.Context, Result, error)
	// reserve is an engine's expected time for chars characters: the
	// secondary's is kept for it, and the primary's decides whether it is
	// worth starting.
	reserve func(engine, voice string, chars int) time.Duration
	m       *metrics

	skipUntil atomic.Int64 // unix nanoseconds
	// abandons counts the sentences in a row whose primary was abandoned
	// for the time kept for the secondary, with no answer of the primary
	// in between: one is a late sentence, abandonLimit of them an outage.
	abandons atomic.Int32
}

// abandonLimit is how many sentences in a row the primary may be
// abandoned on (no audio before the time kept for the secondary) before
// it is taken for down and skipped for the cooldown: a remote that
// answers nothing is otherwise abandoned, not timed out, whenever a
// sentence has less time left than its first-byte limit.
const abandonLimit = 3

func newFallback(primary, secondary Synthesizer, cooldown time.Duration, observe func(context.Context, Result, error),
	reserve func(engine, voice string, chars int) time.Duration, m *metrics) *fallback {
	if cooldown == 0 {
		cooldown = 10 * time.Second
	}
	return &fallback{primary: primary, secondary: secondary, cooldown: cooldown, observe: observe, reserve: reserve, m: m}
}

func (f *fallback) Name() string     { return f.primary.Name() }
func (f *fallback) Voices() []string { return f.primary.Voices() }

func (f *fallback) skipping() bool { return time.Now().UnixNano() < f.skipUntil.Load() }

func (f *fallback) route(voice string) (string, string) {
	if f.skipping() {
		return routeOf(f.secondary, voice)
	}
	return routeOf(f.primary, voice)
}

func (f *fallback) Synthesize(ctx context.Context, req Request, emit func(pcm []int16)) (Result, error) {
	if f.skipping() {
		return f.second(ctx, req, emit, "cooldown")
	}
	limit := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		second := f.expected(f.secondary, req.Voice, len(req.Text))
		first := f.expected(f.primary, req.Voice, len(req.Text))
		limit = left - second - fallbackMargin
		// Not even time for the secondary: it is the faster one. Nor is
		// the primary started on a sentence it is not expected to finish
		// when the secondary is quicker: its first chunk may well come
		// within limit, and the sentence would then be cut midway where
		// the secondary says all of it (see Engine.MinEstimate).
		if limit <= 0 || (first > left && second < first) {
			return f.second(ctx, req, emit, "no_time")
		}
	}
	res, sent, abandoned, err := f.first(ctx, req, emit, limit)
	if err == nil {
		f.abandons.Store(0) // the primary answers (its audio reset it already)
	}
	if err == nil || ctx.Err() != nil {
		return res, err // our own cancellation is not the primary's failure
	}
	kind := kindOf(ctx, err)
	// Abandoned for the time this sentence keeps for the secondary: a
	// matter of its deadline, not a sign of an outage, so no cooldown
	// (else one sentence started late would send every session's speech
	// to the secondary for the cooldown), unless the primary was
	// abandoned on abandonLimit sentences in a row: then it answers
	// nothing.
	outage := !abandoned
	if abandoned && f.abandons.Add(1) >= abandonLimit {
		f.abandons.Store(0)
		outage = true
	}
	if f.cooldown > 0 && outage && kind != provider.KindInvalidRequest.String() && !errors.Is(err, ErrRate) && !errors.Is(err, ErrEmpty) {
		wait := f.cooldown
		if pe, ok := errors.AsType[*provider.Error](err); ok {
			wait = max(wait, pe.RetryAfter) // a 429's Retry-After
		}
		// Only ever later: a 5xx's 10 s must not cut short the minute a
		// concurrent sentence's 429 asked for.
		until := time.Now().Add(wait).UnixNano()
		for cur := f.skipUntil.Load(); cur < until && !f.skipUntil.CompareAndSwap(cur, until); cur = f.skipUntil.Load() {
		}
	}
	if !fallsBack(sent, err) {
		return res, err
	}
	f.observe(ctx, res, err)
	return f.second(ctx, req, emit, kind)
}

// expected is s's expected synthesis time of chars characters in voice
// (or s's default voice, when s does not have it).
func (f *fallback) expected(s Synthesizer, voice string, chars int) time.Duration {
	eng, v := routeOf(s, voice)
	return f.reserve(eng, v, chars)
}

// minEstimate is the least synthesis time of chars characters in voice
// that Synthesize can be expected to take: the primary's, or the
// secondary's when less (a sentence the primary is not expected to
// finish in time goes to the secondary). During a cooldown, the
// secondary's.
func (f *fallback) minEstimate(voice string, chars int) time.Duration {
	second := f.expected(f.secondary, voice, chars)
	if f.skipping() {
		return second
	}
	return min(f.expected(f.primary, voice, chars), second)
}

// first runs the primary. With a limit >= 0, the primary is cancelled
// with errReserve unless its first chunk comes within limit; a chunk
// that comes after that is dropped, so the secondary's audio is all the
// listener gets.
// It reports whether any audio was passed on, and whether the primary
// was abandoned at limit.
func (f *fallback) first(ctx context.Context, req Request, emit func(pcm []int16), limit time.Duration) (res Result, sent, gaveUp bool, err error) {
	// Any audio of the primary, this sentence's or another's still
	// streaming, ends a run of give-ups: it answers. Counted as it comes,
	// not when its synthesis returns (seconds later for a long
	// sentence), since a give-up counts when it happens.
	answered := func() {
		if f.abandons.Load() != 0 {
			f.abandons.Store(0)
		}
	}
	if limit < 0 {
		res, err := f.primary.Synthesize(ctx, req, func(pcm []int16) {
			answered()
			emit(pcm)
		})
		return res, res.Chunks > 0, false, err
	}
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	const waiting, started, abandoned = 0, 1, 2
	var state atomic.Int32
	timer := time.AfterFunc(limit, func() {
		if state.CompareAndSwap(waiting, abandoned) {
			cancel(errReserve)
		}
	})
	defer timer.Stop()
	res, err = f.primary.Synthesize(pctx, req, func(pcm []int16) {
		if state.CompareAndSwap(waiting, started) || state.Load() == started {
			answered()
			emit(pcm)
		}
	})
	st := state.Load()
	return res, st == started, st == abandoned, err
}

func (f *fallback) second(ctx context.Context, req Request, emit func(pcm []int16), kind string) (Result, error) {
	f.m.fallbacks.WithLabelValues(f.primary.Name(), kind).Inc()
	if !slices.Contains(f.secondary.Voices(), req.Voice) {
		req.Voice = "" // the secondary's default
	}
	return f.secondary.Synthesize(ctx, req, emit)
}

// fallsBack says whether a sentence whose primary failed with err is
// spoken by the secondary. sent is whether any of its audio was passed on.
func fallsBack(sent bool, err error) bool {
	switch {
	case sent: // some audio went out: a second voice would repeat it
		return false
	case errors.Is(err, ErrRate), errors.Is(err, ErrEmpty): // the same for every engine
		return false
	}
	return true
}
