package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

type sttOutcome struct {
	text string
	err  error
}

// feeder owns a request's recognizer: it feeds frames as they arrive,
// sends throttled partial transcripts, and finalises when the pipeline
// hands it the STT stage's context.
type feeder struct {
	stt      Transcriber
	sink     Sink
	interval time.Duration

	final  chan Frame           // the final frame, once
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

func (f *feeder) loop(ctx context.Context, frames <-chan Frame) {
	var (
		rec      Recognizer
		lastSent string
		sentAt   time.Time
	)
	defer func() {
		if rec != nil {
			rec.Close()
		}
	}()
	fail := func(err error) { f.out <- sttOutcome{err: err} }
	defer func() {
		// A recognizer that panics fails its request, not the server.
		if p := recover(); p != nil {
			fail(fmt.Errorf("stt: recognizer panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	for {
		var fr Frame
		select {
		case <-ctx.Done():
			fail(context.Cause(ctx))
			return
		case fr = <-frames:
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
		if len(fr.PCM) > 0 {
			p, err := rec.Write(ctx, fr.PCM)
			if err != nil {
				fail(err)
				return
			}
			if p != "" {
				now := time.Now()
				send := p != lastSent && now.Sub(sentAt) >= f.interval && !fr.Final
				f.sendPartial(p, send)
				if send {
					lastSent, sentAt = p, now
				}
			}
		}
		if !fr.Final {
			continue
		}
		f.final <- fr
		select {
		case <-ctx.Done():
			fail(context.Cause(ctx))
		case sctx := <-f.finish:
			text, err := rec.Finish(sctx)
			if err == nil && sctx.Err() != nil {
				err = context.Cause(sctx)
			}
			if err != nil && text == "" && errors.Is(err, context.Canceled) && ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			f.out <- sttOutcome{text: text, err: err}
		}
		return
	}
}
