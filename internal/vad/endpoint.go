package vad

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Config sets the endpointer's timing. The zero value means the defaults,
// which are OpenAI Realtime's server_vad defaults.
type Config struct {
	// SilenceMs is how long non-speech must last after speech for the
	// turn to end. 0 means 500; range 100..5000.
	SilenceMs int
	// PrefixMs is the audio before the detected start of speech that the
	// turn's audio includes (pre-roll), so soft first syllables the
	// detector misses still reach the recogniser. 0 means 300; negative
	// means none; range up to 2000.
	PrefixMs int
	// MinSpeechMs is how much speech (frames judged speech) must
	// accumulate before a turn starts; shorter bursts (clicks, coughs,
	// door bangs) start none. 0 means 200; range 20..2000.
	MinSpeechMs int
	// HangoverMs is the longest pause inside that first MinSpeechMs of
	// speech that still counts as one burst; a longer one starts the
	// count again. 0 means 100; negative means none; range up to 400.
	HangoverMs int
	// MaxTurnMs ends a turn whose audio (pre-roll included) reaches this
	// length, with Event.Cut set; a turn held past SilenceMs (HoldMs)
	// ends where its speech did instead, not cut. When the pre-roll and
	// the speech counted to start the turn are longer already, the turn
	// keeps their newest MaxTurnMs and ends at the next frame. 0 means no
	// limit; range 1000..600000.
	MaxTurnMs int
	// HoldMs is how much longer than SilenceMs a turn waits when the
	// words heard up to its end of speech are unfinished (the
	// endpointer's Words says so): a speaker pausing after "i want to
	// return the" goes on within it, in the same turn. 0 means no hold;
	// range up to 5000.
	HoldMs int
}

// Defaults and limits of Config, in milliseconds.
const (
	DefaultSilenceMs   = 500
	DefaultPrefixMs    = 300
	DefaultMinSpeechMs = 200
	DefaultHangoverMs  = 100

	// ResumeMs is how much speech, frames in a row, restarts the silence
	// count inside a turn: a click or a burst of noise the detector takes
	// for one frame of speech does not hold the turn open.
	ResumeMs = 60

	MinSilenceMs, MaxSilenceMs     = 100, 5000
	MaxPrefixMs                    = 2000
	MinMinSpeechMs, MaxMinSpeechMs = 20, 2000
	MaxHangoverMs                  = 400
	MinMaxTurnMs, MaxMaxTurnMs     = 1000, 600000
	MaxHoldMs                      = 5000
)

// WithDefaults returns c with zero fields set to their defaults, or an
// error wrapping ErrConfig naming the first field out of range.
func (c Config) WithDefaults() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.SilenceMs, DefaultSilenceMs)
	def(&c.PrefixMs, DefaultPrefixMs)
	def(&c.MinSpeechMs, DefaultMinSpeechMs)
	def(&c.HangoverMs, DefaultHangoverMs)
	// "None" stays -1, so that the result gives the same endpointer again.
	c.PrefixMs = max(c.PrefixMs, -1)
	c.HangoverMs = max(c.HangoverMs, -1)
	for _, f := range []struct {
		name     string
		v        int
		min, max int
	}{
		{"silenceMs", c.SilenceMs, MinSilenceMs, MaxSilenceMs},
		{"prefixMs", c.PrefixMs, -1, MaxPrefixMs},
		{"minSpeechMs", c.MinSpeechMs, MinMinSpeechMs, MaxMinSpeechMs},
		{"hangoverMs", c.HangoverMs, -1, MaxHangoverMs},
		{"holdMs", c.HoldMs, 0, MaxHoldMs},
	} {
		if f.v < f.min || f.v > f.max {
			return c, fmt.Errorf("%w: %s %d (want %d..%d)", ErrConfig, f.name, f.v, f.min, f.max)
		}
	}
	if c.MaxTurnMs != 0 && (c.MaxTurnMs < MinMaxTurnMs || c.MaxTurnMs > MaxMaxTurnMs) {
		return c, fmt.Errorf("%w: maxTurnMs %d (want 0 or %d..%d)", ErrConfig, c.MaxTurnMs, MinMaxTurnMs, MaxMaxTurnMs)
	}
	return c, nil
}

// Kind says what an Event reports.
type Kind uint8

// Event kinds.
const (
	// SpeechStarted: a turn began. Pos is where speech was judged to
	// start; Audio holds the pre-roll and the speech so far, from From.
	SpeechStarted Kind = iota + 1
	// TurnAudio: the turn's next samples, from From. Everything from the
	// start of the pre-roll to the end decision is handed out once, in
	// order, across SpeechStarted and TurnAudio events.
	TurnAudio
	// SpeechStopped: the turn ended. Pos is where speech was judged to
	// end (the end of its last speech frame), At where that was decided.
	SpeechStopped
)

func (k Kind) String() string {
	switch k {
	case SpeechStarted:
		return "speech_started"
	case TurnAudio:
		return "turn_audio"
	case SpeechStopped:
		return "speech_stopped"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one thing the endpointer found. Positions are sample offsets in
// the stream, counted from its first sample, at the endpointer's rate;
// they do not depend on when audio arrived.
type Event struct {
	Kind Kind
	Turn int   // 1, 2, … within the stream
	Pos  int64 // SpeechStarted: speech start; SpeechStopped: speech end
	At   int64 // the stream position when the event was decided
	From int64 // the position of Audio[0]
	// Audio is the turn's audio this event hands out (SpeechStarted,
	// TurnAudio). It is the caller's: the endpointer keeps no reference.
	Audio []int16
	Cut   bool // SpeechStopped: the turn reached MaxTurnMs
	// SpeechStopped: the pauses the turn waited through past SilenceMs
	// because its words were unfinished (Config.HoldMs), and how many of
	// them speech resumed in.
	Holds, Resumed int
}

// Words tells an endpointer whether the words of the turn in progress are
// unfinished, for Config.HoldMs. The endpointer asks it from its own
// goroutine (the one calling Write), at each frame of a pause past
// SilenceMs.
type Words interface {
	// Unfinished reports whether the words heard up to stream position
	// end, the turn's end of speech, are known and stop at a word that
	// cannot end a sentence. Words heard only up to an earlier position
	// (a recogniser behind its audio) are not known: the turn is not held
	// for them.
	Unfinished(end int64) bool
}

// Endpointer finds turns in one stream: it cuts the audio written to it
// into frames, asks a Detector about each, and reports where speech starts
// and ends. A turn starts once MinSpeechMs of speech frames have come
// (with pauses no longer than HangoverMs between them), at the first of
// those frames; it ends once SilenceMs pass without ResumeMs of speech in
// a row, at the end of the last such run; or, when its Words are
// unfinished there, once SilenceMs+HoldMs pass. Not safe for concurrent
// use.
type Endpointer struct {
	det   Detector
	rate  int
	flen  int
	cfg   Config
	words Words // nil: no hold
	// limits in samples
	silence, prefix, minSpeech, hang, maxTurn, resume, hold int64

	pos  int64   // samples framed so far: the end of the last frame
	part []int16 // the start of the next frame

	// quiet: recent audio kept for the pre-roll, from histStart
	hist       []int16
	histStart  int64
	candStart  int64 // first speech frame of the burst being counted; -1 none
	candVoiced int64
	candGap    int64

	// in a turn
	turn          int
	inTurn        bool
	audioStart    int64 // where the turn's audio (pre-roll included) starts
	lastSpeechEnd int64
	silent        int64
	run           int64   // speech frames in a row, in samples
	pend          []int16 // turn audio not yet handed out
	pendFrom      int64
	holding       bool // in a pause past SilenceMs, held for unfinished words
	holds         int  // the turn's holds (Event.Holds)
	resumed       int  // and those speech resumed in
}

// NewEndpointer returns an endpointer over det, a detector for a stream
// at rate Hz. The endpointer owns det from then on and closes it in Close.
func NewEndpointer(det Detector, rate int, c Config) (*Endpointer, error) {
	if err := checkRate(rate); err != nil {
		return nil, err
	}
	c, err := c.WithDefaults()
	if err != nil {
		return nil, err
	}
	e := &Endpointer{det: det, rate: rate, flen: FrameLen(rate), cfg: c}
	frames := func(ms int) int64 { // whole frames, rounded up
		return int64((ms+FrameMs-1)/FrameMs) * int64(e.flen)
	}
	e.silence = frames(c.SilenceMs)
	e.minSpeech = frames(c.MinSpeechMs)
	e.resume = min(frames(ResumeMs), e.minSpeech)
	e.hang = int64(max(c.HangoverMs, 0)) * int64(rate) / 1000
	e.prefix = int64(max(c.PrefixMs, 0)) * int64(rate) / 1000
	e.maxTurn = int64(c.MaxTurnMs) * int64(rate) / 1000
	e.hold = frames(c.HoldMs)
	e.part = make([]int16, 0, e.flen)
	e.Reset()
	return e, nil
}

// SetWords gives the endpointer what it asks whether a turn's words are
// unfinished (Config.HoldMs); nil, the start, means never.
func (e *Endpointer) SetWords(w Words) { e.words = w }

// Config returns the endpointer's settings, defaults filled in (-1 for
// none); NewEndpointer given it makes the same endpointer.
func (e *Endpointer) Config() Config { return e.cfg }

// Rate returns the stream's sample rate.
func (e *Endpointer) Rate() int { return e.rate }

// Pos returns how many samples have been written.
func (e *Endpointer) Pos() int64 { return e.pos + int64(len(e.part)) }

// Duration converts a stream position to the time from the stream's start.
func (e *Endpointer) Duration(samples int64) time.Duration {
	return time.Duration(samples) * time.Second / time.Duration(e.rate)
}

// InTurn reports whether a turn is in progress.
func (e *Endpointer) InTurn() bool { return e.inTurn }

// Held reports whether the turn in progress is held past SilenceMs for
// its unfinished words (Config.HoldMs), and where its speech ended.
func (e *Endpointer) Held() (end int64, ok bool) {
	return e.lastSpeechEnd, e.inTurn && e.holding
}

// Write feeds samples of any length and returns what they revealed, in
// order. A detector error stops the write; the samples framed before it
// count.
func (e *Endpointer) Write(pcm []int16) ([]Event, error) {
	var evs []Event
	for len(pcm) > 0 {
		n := min(e.flen-len(e.part), len(pcm))
		e.part = append(e.part, pcm[:n]...)
		pcm = pcm[n:]
		if len(e.part) < e.flen {
			break
		}
		speech, err := e.det.Process(e.part)
		if err != nil {
			e.part = e.part[:0]
			return e.flushAudio(evs), err
		}
		evs = e.frame(evs, e.part, speech)
		e.part = e.part[:0]
	}
	return e.flushAudio(evs), nil
}

// frame advances the state machine by one frame.
func (e *Endpointer) frame(evs []Event, f []int16, speech bool) []Event {
	start := e.pos
	e.pos += int64(len(f))
	end := e.pos
	if e.inTurn {
		e.pend = append(e.pend, f...)
		e.silent += int64(len(f))
		if !speech {
			e.run = 0
		} else if e.run += int64(len(f)); e.run >= e.resume {
			e.lastSpeechEnd, e.silent = end, 0
			if e.holding {
				e.holding = false
				e.resumed++
			}
		}
		quiet := e.silent - e.run // a run still counting may yet resume the turn
		switch {
		case quiet >= e.silence && !e.held(quiet):
			return e.stop(evs, e.lastSpeechEnd, false)
		case e.maxTurn > 0 && end-e.audioStart >= e.maxTurn:
			if quiet >= e.silence {
				// Held: without the hold its silence would have ended
				// it where its speech did, uncut.
				return e.stop(evs, e.lastSpeechEnd, false)
			}
			return e.stop(evs, end, true)
		}
		return evs
	}
	e.hist = append(e.hist, f...)
	switch {
	case speech:
		if e.candStart < 0 {
			e.candStart, e.candVoiced = start, 0
		}
		e.candVoiced += int64(len(f))
		e.candGap = 0
		if e.candVoiced >= e.minSpeech {
			return e.begin(evs)
		}
	case e.candStart >= 0:
		e.candGap += int64(len(f))
		if e.candGap > e.hang {
			e.candStart = -1
		}
	}
	e.trimHistory()
	return evs
}

// held reports whether a turn quiet for quiet samples, SilenceMs or
// more, waits on because its words are unfinished, counting a new hold.
// It asks Words at every frame, so a newer partial that finishes the
// sentence ends the turn at once.
func (e *Endpointer) held(quiet int64) bool {
	if e.hold == 0 || e.words == nil || quiet >= e.silence+e.hold || !e.words.Unfinished(e.lastSpeechEnd) {
		return false
	}
	if !e.holding {
		e.holding = true
		e.holds++
	}
	return true
}

// begin starts a turn at the burst being counted.
func (e *Endpointer) begin(evs []Event) []Event {
	e.turn++
	e.inTurn = true
	from := max(e.histStart, e.candStart-e.prefix)
	if e.maxTurn > 0 {
		// The pre-roll and the speech counted to MinSpeechMs (pauses up
		// to HangoverMs included) can outlast MaxTurnMs: the turn keeps
		// its newest MaxTurnMs, and the next frame ends it, cut.
		from = max(from, e.pos-e.maxTurn)
	}
	e.audioStart = from
	audio := append([]int16(nil), e.hist[from-e.histStart:]...)
	evs = append(evs, Event{Kind: SpeechStarted, Turn: e.turn, Pos: e.candStart, At: e.pos, From: from, Audio: audio})
	e.lastSpeechEnd, e.silent, e.run = e.pos, 0, e.resume
	e.holding, e.holds, e.resumed = false, 0, 0
	e.pendFrom = e.pos
	e.hist, e.histStart, e.candStart = e.hist[:0], e.pos, -1
	return evs
}

// stop ends the turn with speech ending at end.
func (e *Endpointer) stop(evs []Event, end int64, cut bool) []Event {
	evs = e.flushAudio(evs)
	evs = append(evs, Event{Kind: SpeechStopped, Turn: e.turn, Pos: end, At: e.pos, Cut: cut, Holds: e.holds, Resumed: e.resumed})
	e.inTurn = false
	// The next turn's pre-roll starts after this turn's audio.
	e.hist, e.histStart, e.candStart = e.hist[:0], e.pos, -1
	return evs
}

// flushAudio hands out the turn audio not yet handed out.
func (e *Endpointer) flushAudio(evs []Event) []Event {
	if len(e.pend) == 0 {
		return evs
	}
	evs = append(evs, Event{Kind: TurnAudio, Turn: e.turn, At: e.pos, From: e.pendFrom, Audio: e.pend})
	e.pendFrom += int64(len(e.pend))
	e.pend = nil
	return evs
}

// trimHistory drops audio too old to be pre-roll, copying only when at
// least half the buffer is dead, so trimming is amortised O(1) a sample.
func (e *Endpointer) trimHistory() {
	keep := e.pos
	if e.candStart >= 0 {
		keep = e.candStart
	}
	dead := keep - e.prefix - e.histStart
	if dead <= 0 || dead < int64(len(e.hist))-dead {
		return
	}
	n := copy(e.hist, e.hist[dead:])
	e.hist = e.hist[:n]
	e.histStart += dead
}

// Flush ends the stream: a turn in progress ends where its speech did,
// after the rest of its audio (a partial frame included).
func (e *Endpointer) Flush() []Event {
	if !e.inTurn {
		return nil
	}
	e.pend = append(e.pend, e.part...)
	e.pos += int64(len(e.part))
	e.part = e.part[:0]
	return e.stop(nil, e.lastSpeechEnd, false)
}

// Reset forgets the stream, for a new one whose positions start at 0 (the
// detector is reset too).
func (e *Endpointer) Reset() {
	e.det.Reset()
	e.pos, e.part = 0, e.part[:0]
	e.hist, e.histStart, e.candStart = e.hist[:0], 0, -1
	e.turn, e.inTurn, e.pend = 0, false, nil
}

// Close closes the detector.
func (e *Endpointer) Close() { e.det.Close() }

// Heard is the Words of one turn, told from another goroutine: the
// recogniser's Sets what its newest partial transcript covers, the
// endpointer's asks. It is one atomic word, so neither waits for the
// other. The zero value knows nothing, and holds no turn.
type Heard struct {
	v atomic.Int64 // covered<<1 | 1 if unfinished
}

// Set records that the words heard in the stream up to position covered
// are unfinished, or not.
func (h *Heard) Set(covered int64, unfinished bool) {
	v := covered << 1
	if unfinished {
		v |= 1
	}
	h.v.Store(v)
}

// Unfinished reports whether the newest words set are unfinished and
// cover the stream up to end at least.
func (h *Heard) Unfinished(end int64) bool {
	v := h.v.Load()
	return v&1 == 1 && v>>1 >= end
}
