package session

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/stages/tts"
)

// Synthesizer is the speech engine the server speaks answers with;
// *tts.Engine is the real one.
type Synthesizer interface {
	Name() string
	// Voices are the voices offered, the default first.
	Voices() []string
	SampleRates() []int
	Estimate(voice string, chars int) time.Duration
	// MinEstimate is the least expected synthesis time, a faster
	// fallback's included (see tts.Engine.MinEstimate).
	MinEstimate(voice string, chars int) time.Duration
	Synthesize(ctx context.Context, req tts.Request, emit func(pcm []int16)) (tts.Result, error)
}

var _ Synthesizer = (*tts.Engine)(nil)

// speaker adapts the server's Synthesizer to one request's pipeline
// Speaker, with the session's voice and rate.
type speaker struct {
	syn   Synthesizer
	voice string
	rate  int
}

var (
	_ pipeline.Speaker   = speaker{}
	_ pipeline.Utterance = tts.Result{}
)

func (s speaker) Engine() string  { return s.syn.Name() }
func (s speaker) Voice() string   { return s.voice }
func (s speaker) SampleRate() int { return s.rate }
func (s speaker) Estimate(chars int) time.Duration {
	return s.syn.Estimate(s.voice, chars)
}
func (s speaker) MinEstimate(chars int) time.Duration {
	return s.syn.MinEstimate(s.voice, chars)
}

func (s speaker) Speak(ctx context.Context, text string, emit func(pcm []int16)) (pipeline.Utterance, error) {
	res, err := s.syn.Synthesize(ctx, tts.Request{Text: text, Voice: s.voice, SampleRate: s.rate}, emit)
	if errors.Is(err, tts.ErrEmpty) {
		return res, nil // nothing to say in this sentence: go on with the next
	}
	return res, err
}

// speechInfo is what session.ready says of the server's synthesiser.
func (srv *Server) speechInfo() *protocol.SpeechInfo {
	syn := srv.cfg.Speech
	if syn == nil {
		return nil
	}
	return &protocol.SpeechInfo{Engine: syn.Name(), Voices: syn.Voices(), SampleRates: syn.SampleRates()}
}

// speechSettings checks a session.update's speech settings against the
// server's synthesiser, filling in the default voice.
func (srv *Server) speechSettings(u *protocol.SessionUpdate) (st *protocol.SpeechSettings, set bool, err error) {
	st, set, err = u.SpeechUpdate()
	if err != nil || st == nil {
		return st, set, err
	}
	syn := srv.cfg.Speech
	if syn == nil {
		return nil, true, protocol.Errorf(protocol.CodeBadMessage, "session.update: speech: this server has no speech synthesiser")
	}
	voices := syn.Voices()
	if st.Voice == "" {
		st.Voice = voices[0]
	} else if !slices.Contains(voices, st.Voice) {
		return nil, true, protocol.Errorf(protocol.CodeBadMessage, "session.update: speech: unknown voice %q: want one of %v",
			protocol.Truncate(st.Voice, 40), voices)
	}
	if rates := syn.SampleRates(); !slices.Contains(rates, st.SampleRate) {
		return nil, true, protocol.Errorf(protocol.CodeBadMessage, "session.update: speech: unsupported sampleRate %d: want one of %v",
			st.SampleRate, rates)
	}
	return st, true, nil
}

// maxSpoken is how many recent requests a session keeps what was spoken
// of, for playback.
const maxSpoken = 32

// spoken is what a session keeps of one recent request for playback.
type spoken struct {
	id     string
	answer string           // the answer as sent; "" until the result
	speech *pipeline.Speech // nil until the result, or without speech
	played time.Duration    // the last playback report; -1 for none
	turn   bool             // the exchange is in the history
}

// noteRequest starts the playback record of a request just opened (a
// replacement reusing the id starts afresh). s.mu must not be held.
func (s *Session) noteRequest(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spoken = slices.DeleteFunc(s.spoken, func(sp *spoken) bool { return sp.id == id })
	if len(s.spoken) == maxSpoken {
		s.spoken = slices.Delete(s.spoken, 0, 1)
	}
	s.spoken = append(s.spoken, &spoken{id: id, played: -1})
}

// spokenLocked finds a recent request's record; s.mu must be held.
func (s *Session) spokenLocked(id string) *spoken {
	for _, sp := range s.spoken {
		if sp.id == id {
			return sp
		}
	}
	return nil
}

// playback records that the client played playedMs of a request's audio,
// and cuts its answer in the history to what was heard by then.
func (s *Session) playback(p *protocol.Playback) {
	s.mu.Lock()
	sp := s.spokenLocked(p.RequestID)
	cut := false
	if sp != nil {
		// Saturated: a playedMs past what a Duration holds (about 292
		// years) wrapped around, to any length, and cut what was heard.
		sp.played = time.Duration(min(p.PlayedMs, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
		cut = s.cutLocked(sp)
	}
	s.mu.Unlock()
	switch {
	case sp == nil:
		s.badInput(protocol.Errorf(protocol.CodeBadMessage, "playback: no recent request %q", p.RequestID), "")
	case cut:
		s.saveCut()
	}
}

// cutSaveTimeout bounds the save of a history a playback report cut.
const cutSaveTimeout = 500 * time.Millisecond

// saveCut saves the history a playback report cut, so that a resumed
// session continues from what the user heard, not from the whole answer.
// The reader must not wait on the store: the save runs on a goroutine of
// the session's, one at a time, and takes the history as it is when it
// runs, so cuts reported meanwhile ride on the next save.
func (s *Session) saveCut() {
	s.mu.Lock()
	s.cutDirty = true
	start := !s.cutSaving
	s.cutSaving = true
	s.mu.Unlock()
	if start {
		s.wg.Go(s.saveCuts)
	}
}

// saveCuts saves until no cut is left unsaved.
func (s *Session) saveCuts() {
	for {
		s.mu.Lock()
		if !s.cutDirty {
			s.cutSaving = false
			s.mu.Unlock()
			return
		}
		s.cutDirty = false
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.srv.base, cutSaveTimeout)
		if err := s.saveConversation(ctx); err != nil {
			// Not counted: the turn it cuts was counted, if its own save
			// failed; this one changes no turn's being in the store.
			s.log.Debug("cut history not durable", "err", err)
		}
		cancel()
	}
}

// cutLocked cuts the assistant's turn of sp in the history to what the
// listener heard, once both the result and a playback report are in, and
// reports whether the history changed. s.mu must be held.
func (s *Session) cutLocked(sp *spoken) bool {
	if sp.speech == nil || sp.played < 0 || !sp.turn {
		return false
	}
	heard := sp.answer[:min(sp.speech.Heard(sp.played), len(sp.answer))]
	// The latest exchange with the id is sp's: an earlier request that
	// had the same id (a client may reuse one once its terminal came)
	// answered something else.
	for i := len(s.turns) - 1; i >= 0; i-- {
		if s.turns[i].id == sp.id {
			changed := s.turns[i].Assistant != heard
			s.turns[i].Assistant = heard
			return changed
		}
	}
	return false
}
