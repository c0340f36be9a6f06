package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

type sttOutcome struct {
	text string
	alts []Hypothesis // the recognizer's alternatives (Alternator), if any
	err  error
}

// feeder owns a request's recognizer: it feeds frames as they arrive,
// sends throttled partial transcripts, and finalises when the pipeline
// hands it the STT stage's context.
type feeder struct {
	stt      Transcriber
	sink     Sink
	interval time.Duration
	log      *slog.Logger

	final  chan struct{}        // closed when the recognizer reaches the final frame
	finish chan context.Context // the STT stage context, once
	out    chan sttOutcome      // the outcome, once

	mu      sync.Mutex
	partial string     // guarded by mu
	closed  bool       // the transcript is settled: no more partials; guarded by mu
	rec     Recognizer // once started; guarded by mu
	hurried bool       // the final frame has arrived; guarded by mu
}

// degradation is the recognizer's own degradation reason (see Degrader),
// "" if it has none or has not started.
func (f *feeder) degradation() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.rec.(Degrader); ok {
		return d.Degradation()
	}
	return ""
}

// hurry passes on that the final frame has arrived (see Hurrier), now or
// when the recognizer starts.
func (f *feeder) hurry() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hurried = true
	if h, ok := f.rec.(Hurrier); ok {
		h.Hurry()
	}
}

// started records the recognizer, for hurry.
func (f *feeder) started(rec Recognizer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rec = rec
	if h, ok := rec.(Hurrier); ok && f.hurried {
		h.Hurry()
	}
}

// close settles the transcript: after it the feeder sends no partials.
func (f *feeder) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
}

// sendPartial records p and sends it if the transcript is not settled,
// under mu so that it cannot follow the final transcript.
func (f *feeder) sendPartial(p string, send bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.partial = p
	if send {
		f.sink.Transcript(p, false)
	}
}

func (f *feeder) lastPartial() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.partial
}

// loop feeds the recognizer until the final frame, then finalises it
// under the STT stage context it is handed.
func (f *feeder) loop(ctx context.Context, audio *FrameQueue) {
	var rec Recognizer
	defer func() {
		if rec == nil {
			return
		}
		// Close runs after the recover below: its own panic is caught
		// here. The outcome is sent already, so it is only logged.
		defer func() {
			if p := recover(); p != nil {
				f.log.Error("stt: recognizer panicked in Close", "panic", p, "stack", string(debug.Stack()))
			}
		}()
		rec.Close()
	}()
	fail := func(err error) { f.out <- sttOutcome{err: err} }
	defer func() {
		// A recognizer that panics fails its request, not the server.
		if p := recover(); p != nil {
			fail(fmt.Errorf("stt: recognizer panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	var (
		batch []Frame
		ps    partials
	)
	for {
		batch = audio.Take(batch[:0])
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				fail(context.Cause(ctx))
				return
			case <-audio.Ready():
			}
			continue
		}
		for i := range batch {
			fr := &batch[i]
			if ctx.Err() != nil {
				// Cancelled with audio still queued: none of it matters.
				fail(context.Cause(ctx))
				return
			}
			if rec == nil {
				r, err := f.stt.Start(ctx, fr.SampleRate)
				if err != nil {
					fail(err)
					return
				}
				rec = r
				f.started(r)
			}
			err := f.write(ctx, rec, fr, &ps)
			fr.recycle() // the recognizer has copied it
			if err != nil {
				fail(err)
				return
			}
			if fr.Final {
				close(f.final)
				f.finalise(ctx, rec)
				return
			}
		}
		clear(batch) // the PCM is the recognizer's now; drop our references
	}
}

// partials is the feeder's record of the partial transcripts it sent.
type partials struct {
	lastSent string
	sentAt   time.Time
	covered  int64 // the samples the last partial passed to Heard covers
}

// write feeds one frame and passes on a changed partial transcript, at
// most one per interval, and none for the final frame (the final
// transcript follows it).
func (f *feeder) write(ctx context.Context, rec Recognizer, fr *Frame, ps *partials) error {
	if len(fr.PCM) == 0 {
		return nil
	}
	p, err := rec.Write(ctx, fr.PCM)
	if err != nil || p == "" {
		return err
	}
	// Heard first: a client that has seen a partial knows that its server
	// turn has heard those words.
	f.heard(rec, p, ps)
	now := time.Now()
	send := p != ps.lastSent && now.Sub(ps.sentAt) >= f.interval && !fr.Final
	f.sendPartial(p, send)
	if send {
		ps.lastSent, ps.sentAt = p, now
	}
	return nil
}

// heard passes p, with the audio it covers, to a HeardSink when that
// grew: every refresh, unthrottled, since a server turn's hold asks about
// the newest words.
func (f *feeder) heard(rec Recognizer, p string, ps *partials) {
	c, ok := rec.(Coverer)
	if !ok {
		return
	}
	hs, ok := f.sink.(HeardSink)
	if !ok {
		return
	}
	if n := c.Covered(); n > ps.covered {
		ps.covered = n
		hs.Heard(p, n)
	}
}

// finalise waits for the STT stage context and finishes the recognition
// under it.
func (f *feeder) finalise(ctx context.Context, rec Recognizer) {
	select {
	case <-ctx.Done():
		f.out <- sttOutcome{err: context.Cause(ctx)}
	case sctx := <-f.finish:
		text, err := rec.Finish(sctx)
		if err == nil && sctx.Err() != nil {
			err = context.Cause(sctx)
		}
		if err != nil && text == "" && errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		var alts []Hypothesis
		if a, ok := rec.(Alternator); ok && err == nil {
			alts = a.Alternatives()
		}
		f.out <- sttOutcome{text: text, alts: alts, err: err}
	}
}
