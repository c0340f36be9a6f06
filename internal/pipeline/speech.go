package pipeline

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"

	"github.com/voiced/voiced/internal/deadline"
	"github.com/voiced/voiced/internal/stages/tts/sentence"
)

// StageTTS is the speech stage's name.
const StageTTS = "tts"

// Speech degradation reasons.
const (
	ReasonSpeechTruncated = "speech_truncated" // the audio stops at a sentence boundary before the answer's end
	ReasonSpeechSkipped   = "speech_skipped"   // not even the first sentence could be spoken: no audio
)

// Speaker speaks one request's answer, one sentence at a time, with the
// voice and sample rate the client asked for. The session makes one per
// request of a session with speech on; an adapter over the TTS engine
// satisfies it.
type Speaker interface {
	// Engine and Voice name who speaks, for the result.
	Engine() string
	Voice() string
	// SampleRate is the rate of the audio emitted.
	SampleRate() int
	// Estimate is the expected synthesis time of chars characters, by
	// the engine that would speak them now: what the answer is sized by.
	Estimate(chars int) time.Duration
	// MinEstimate is the least synthesis time of chars characters the
	// speaker can be expected to take: Estimate, or less with a faster
	// fallback that speaks a sentence the engine cannot finish in time.
	// A sentence starts only if it fits in the time left.
	MinEstimate(chars int) time.Duration
	// Speak synthesises text and calls emit with each chunk (at most
	// 200 ms), in order, from the calling goroutine; emit owns the slice.
	// It returns when the audio is complete or soon after ctx ends. The
	// Utterance describes the audio emitted, even on an error; text with
	// nothing to say is no error.
	Speak(ctx context.Context, text string, emit func(pcm []int16)) (Utterance, error)
}

// Utterance is the record of one spoken sentence.
type Utterance interface {
	// Audio is the length of the audio emitted.
	Audio() time.Duration
	// Heard is how many bytes of the sentence a listener heard after
	// played of its audio (by the synthesiser's word timings).
	Heard(played time.Duration) int
}

// Speech is what was spoken of an answer.
type Speech struct {
	Engine, Voice string
	SampleRate    int
	// Sentences is how many sentences the answer had; Spoken those whose
	// audio was sent, in full or in part, in order.
	Sentences int
	Spoken    []SpokenSentence
	// Audio is the length of the audio sent.
	Audio time.Duration
	// FirstAudio is when the sink took the first chunk (after any wait
	// for the client's link); zero when it took none.
	FirstAudio time.Time
}

// SpokenSentence is one sentence whose audio was sent.
type SpokenSentence struct {
	// Offset is where the sentence starts in the answer, in bytes.
	Offset int
	// Start is where its audio starts in the answer's audio.
	Start time.Duration
	Utterance
}

// Heard is how many bytes of the answer a listener heard after played of
// its audio: up to the last word whose audio ended by then.
func (s *Speech) Heard(played time.Duration) int {
	heard := 0
	for _, sp := range s.Spoken {
		if played <= sp.Start {
			break
		}
		if h := sp.Heard(played - sp.Start); h > 0 {
			heard = sp.Offset + h
		}
	}
	return heard
}

// speechRun speaks one answer while it streams: feed splits the text into
// sentences, and a goroutine synthesises each as soon as it is complete,
// if its expected synthesis time fits in the stage's budget. Audio goes to
// the sink through a gate that finish (or stop) closes, so no chunk
// follows the final one, and none comes after the run gave up waiting.
type speechRun struct {
	r       *run
	sp      Speaker
	ctx     context.Context // the stage's budget; nil when skipped
	cancel  context.CancelFunc
	started time.Time
	ended   time.Time // when loop returned: written before done is closed
	done    chan struct{}
	wake    chan struct{}

	mu     sync.Mutex // input side
	split  sentence.Splitter
	queue  []sentence.Sentence
	total  int
	closed bool // no more input

	gmu      sync.Mutex // output gate
	shut     bool
	behind   bool // the client did not keep up: a chunk was dropped
	chunks   int
	samples  int
	first    time.Time
	spoken   []SpokenSentence
	complete int // sentences spoken to their end (or with nothing to say)
	// sen is the sentence being spoken, starting at senAt in the audio;
	// senSent once a chunk of it was sent (it is then last in spoken).
	sen     sentence.Sentence
	senAt   time.Duration
	senSent bool
	taken   bool // finish has reported spoken: it must not change any more
}

// startSpeech starts the speech stage under its budget, or returns nil
// when the request has no speaker. Without time for the stage, the run
// only counts sentences and reports speech_skipped.
func (r *run) startSpeech(dctx context.Context) *speechRun {
	if r.speaker == nil {
		return nil
	}
	cfg := &r.p.cfg
	s := &speechRun{r: r, sp: r.speaker, split: sentence.Splitter{FirstClause: true}, started: time.Now(),
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	tctx, cancelT, err := cfg.TTS.Start(dctx, cfg.Reserve)
	if err != nil {
		r.p.metrics.stage(StageTTS, "skipped", 0)
		close(s.done)
		return s
	}
	s.ctx, s.cancel = tctx, cancelT
	r.wg.Go(s.loop)
	return s
}

// feed adds a piece of the answer. It never blocks. s may be nil.
func (s *speechRun) feed(text string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	ss := s.split.Feed(text)
	s.queue = append(s.queue, ss...)
	s.total += len(ss)
	s.mu.Unlock()
	if len(ss) > 0 {
		s.signal()
	}
}

// synthesis is the speaker's expected synthesis time, for the generator
// to size the answer by, or nil when nothing will be spoken. s may be nil.
func (s *speechRun) synthesis() func(chars int) time.Duration {
	if s == nil || s.ctx == nil {
		return nil
	}
	return s.sp.Estimate
}

func (s *speechRun) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// next waits for the next sentence; false when there is none to come or
// the budget is over.
func (s *speechRun) next() (sentence.Sentence, bool) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			sen := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return sen, true
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return sentence.Sentence{}, false
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
			return sentence.Sentence{}, false
		}
	}
}

func (s *speechRun) loop() {
	// spoke is when the last synthesis returned: the speech's end when no
	// sentence follows, however long the loop then waited for one.
	var spoke time.Time
	idle := false
	defer func() {
		// The speech ends with its last synthesis, or where it stopped
		// (no time for the next sentence, a failure), however long the
		// answer's text goes on: the stage's time is its audio's.
		s.ended = time.Now()
		if idle && !spoke.IsZero() {
			s.ended = spoke
		}
		close(s.done)
	}()
	defer func() {
		// A speaker that panics cuts the speech short (the answer stays
		// text, the result degraded), not the server.
		if p := recover(); p != nil {
			s.r.log.Error("speech synthesis panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	for {
		sen, ok := s.next()
		if !ok {
			idle = true // no sentence came after the last one spoken
			return
		}
		// A sentence starts only if it can be expected to finish, by
		// the fallback if need be: a thin budget gives the speech the
		// fallback can say rather than none. None starts once the stage
		// is over (the request ended, the client fell behind), which the
		// time left does not show: a speaker may end the sentence it was
		// speaking without an error.
		if s.ctx.Err() != nil || s.sp.MinEstimate(len(sen.Text)) > deadline.Remaining(s.ctx) {
			return
		}
		s.gmu.Lock()
		s.sen, s.senAt, s.senSent = sen, s.audioLocked(), false
		s.gmu.Unlock()
		u, err := s.speak(sen.Text)
		spoke = time.Now()
		s.gmu.Lock()
		if s.senSent && !s.taken {
			if u == nil {
				u = cutUtterance{audio: s.audioLocked() - s.senAt}
			}
			s.spoken[len(s.spoken)-1].Utterance = u
		}
		if err == nil && !s.behind {
			s.complete++
		}
		s.gmu.Unlock()
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, errSpeakerPanicked) {
				s.r.log.Warn("speech synthesis failed", "err", err)
			}
			return
		}
	}
}

// errSpeakerPanicked ends a sentence whose speaker panicked (logged).
var errSpeakerPanicked = errors.New("speech synthesis panicked")

// speak synthesises one sentence and hands its chunks to emit, in order,
// on this goroutine; it returns once every chunk went through emit. The
// synthesis runs on a goroutine of its own, whose emit only collects the
// chunks: emit may wait for the client's link (Sink.AnswerAudio), and a
// synthesiser's emit must not block (Flite calls it from its audio
// callback, holding one of the engine's slots and an OS thread). A
// sentence is synthesised at the engine's speed whatever the link, so
// the engine's learned speed is its own, and a slow client keeps no slot
// from other sessions.
func (s *speechRun) speak(text string) (Utterance, error) {
	var (
		mu     sync.Mutex
		chunks [][]int16
		ended  bool
		u      Utterance
		err    error
	)
	ready := make(chan struct{}, 1)
	wake := func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	}
	s.r.wg.Go(func() {
		var (
			uu Utterance
			e  error
		)
		defer func() {
			if p := recover(); p != nil {
				s.r.log.Error("speech synthesis panicked", "panic", p, "stack", string(debug.Stack()))
				e = errSpeakerPanicked
			}
			mu.Lock()
			u, err, ended = uu, e, true
			mu.Unlock()
			wake()
		}()
		uu, e = s.sp.Speak(s.ctx, text, func(pcm []int16) {
			mu.Lock()
			chunks = append(chunks, pcm)
			mu.Unlock()
			wake()
		})
	})
	for {
		mu.Lock()
		batch, done := chunks, ended
		chunks = nil
		mu.Unlock()
		for _, pcm := range batch {
			s.emit(pcm) // drops it once the speech has stopped
		}
		if done {
			// Every chunk came before the end, so batch held the last.
			return u, err
		}
		<-ready
	}
}

// audioLocked is the length of the audio sent; gmu must be held.
func (s *speechRun) audioLocked() time.Duration {
	if rate := s.sp.SampleRate(); rate > 0 {
		return time.Duration(s.samples) * time.Second / time.Duration(rate)
	}
	return 0
}

func (s *speechRun) emit(pcm []int16) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if s.shut || len(pcm) == 0 {
		return
	}
	if !s.r.sink.AnswerAudio(s.ctx, pcm, s.sp.SampleRate(), false) {
		// The rest of the answer stays text: a client on a slow link
		// gets a shorter spoken answer, not a late or closed session.
		s.behind, s.shut = true, true
		s.r.log.Debug("speech stopped: client not keeping up with the audio")
		s.cancel()
		return
	}
	if s.chunks == 0 {
		// Only a chunk the sink took is audio sent, once it took it: the
		// sink may have waited for the client's link.
		s.first = time.Now()
	}
	if !s.senSent {
		// Recorded with its first chunk: a sentence cut later, even after
		// finish stopped waiting for it, was spoken in part.
		s.senSent = true
		s.spoken = append(s.spoken, SpokenSentence{Offset: s.sen.Offset, Start: s.senAt})
	}
	s.chunks++
	s.samples += len(pcm)
}

// cutUtterance stands for a sentence whose synthesis had not returned
// when the speech was reported: its audio is known, its word timings are
// not, so none of its words count as heard.
type cutUtterance struct{ audio time.Duration }

func (u cutUtterance) Audio() time.Duration  { return u.audio }
func (cutUtterance) Heard(time.Duration) int { return 0 }

// finish ends the input, waits for the audio within the stage's budget,
// sends the final chunk (unless ctx, the request's, has ended) and reports
// what was spoken, degrading the result when speech stopped early.
func (s *speechRun) finish(ctx context.Context) *Speech {
	s.mu.Lock()
	ss := s.split.Flush()
	s.queue = append(s.queue, ss...)
	s.total += len(ss)
	s.closed = true
	s.mu.Unlock()
	s.signal()
	outcome := "ok"
	var ended time.Time
	if s.ctx != nil {
		select {
		case <-s.done:
			ended = s.ended
		case <-s.ctx.Done():
			outcome = outcomeOf(context.Cause(s.ctx))
			ended = time.Now()
		}
	}
	s.gmu.Lock()
	s.shut, s.taken = true, true
	if n := len(s.spoken); n > 0 && s.spoken[n-1].Utterance == nil {
		s.spoken[n-1].Utterance = cutUtterance{audio: s.audioLocked() - s.spoken[n-1].Start}
	}
	if s.chunks > 0 && ctx.Err() == nil {
		s.r.sink.AnswerAudio(ctx, nil, s.sp.SampleRate(), true)
	}
	out := &Speech{
		Engine: s.sp.Engine(), Voice: s.sp.Voice(), SampleRate: s.sp.SampleRate(),
		Sentences: s.total, Spoken: s.spoken, Audio: s.audioLocked(), FirstAudio: s.first,
	}
	complete, chunks := s.complete, s.chunks
	s.gmu.Unlock()
	s.stop()
	if s.ctx != nil {
		s.r.timed(StageTTS, outcome, ended.Sub(s.started))
	}
	if complete < s.total {
		if chunks == 0 {
			s.r.degrade(ReasonSpeechSkipped)
		} else {
			s.r.degrade(ReasonSpeechTruncated)
		}
	}
	return out
}

// stop ends the speech stage at once (the request ended, or finish is
// done): synthesis is cancelled and no more audio goes out.
func (s *speechRun) stop() {
	s.gmu.Lock()
	s.shut = true
	s.gmu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
}
