//go:build cgo && !noflite

package flite

/*
#cgo LDFLAGS: -lflite_cmu_us_slt -lflite_cmu_us_kal -lflite_cmu_us_awb -lflite_cmu_us_rms -lflite_usenglish -lflite_cmulex -lflite -lm
#include <stdint.h>
#include <stdlib.h>
#include <flite/flite.h>

// No header declares the voices' registration functions.
cst_voice *register_cmu_us_slt(const char *voxdir);
cst_voice *register_cmu_us_kal(const char *voxdir);
cst_voice *register_cmu_us_awb(const char *voxdir);
cst_voice *register_cmu_us_rms(const char *voxdir);

extern int vdFliteAudio(cst_wave *w, int start, int size, int last, uintptr_t call);

static int vd_audio(const cst_wave *w, int start, int size, int last, cst_audio_streaming_info *asi) {
	return vdFliteAudio((cst_wave *)w, start, size, last, (uintptr_t)asi->userdata);
}

// vd_synth synthesises text with v, streaming the audio to vdFliteAudio
// with call as its argument. The streaming info is attached to the
// utterance (not the shared voice), which owns and frees it. Returns the
// utterance (free with delete_utterance) or NULL.
static cst_utterance *vd_synth(const char *text, cst_voice *v, uintptr_t call) {
	cst_utterance *u = new_utterance();
	utt_set_input_text(u, text);
	cst_audio_streaming_info *asi = new_audio_streaming_info();
	asi->asc = vd_audio;
	asi->userdata = (void *)call;
	feat_set(u->features, "streaming_info", audio_streaming_info_val(asi));
	return flite_do_synth(u, v, utt_synth);
}

static const cst_item *vd_first_word(cst_utterance *u) {
	return relation_head(utt_relation(u, "Word"));
}

// vd_word reads one word's name, its token (the item and its name) and
// its start and end in seconds: from the end of the segment before its
// first segment to the end of its last segment.
static const cst_item *vd_word(const cst_item *w, const char **name, const cst_item **tok, const char **tokname, float *start, float *end) {
	*name = item_feat_string(w, "name");
	*tok = item_parent(item_as(w, "Token"));
	*tokname = *tok ? item_feat_string(*tok, "name") : "";
	*start = flite_ffeature_float(w, "R:SylStructure.daughter1.daughter1.R:Segment.p.end");
	*end = flite_ffeature_float(w, "R:SylStructure.daughtern.daughtern.R:Segment.end");
	return item_next(w);
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime/cgo"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// minChunk is the audio held back before a chunk is emitted: Flite calls
// back with ~16-50 ms at a time, much faster than real time, so
// collecting 100 ms costs ~2 ms of latency and halves the messages.
const minChunk = 100 * time.Millisecond

type voice = *C.cst_voice

var (
	registerOnce sync.Once
	voices       map[string]voice
	registerErr  error
)

// register initialises Flite and registers every voice, once per
// process: registration writes unlocked globals in Flite, so it must
// happen before any synthesis and never again.
func register() error {
	registerOnce.Do(func() {
		C.flite_init()
		voices = map[string]voice{
			"slt": C.register_cmu_us_slt(nil),
			"kal": C.register_cmu_us_kal(nil),
			"awb": C.register_cmu_us_awb(nil),
			"rms": C.register_cmu_us_rms(nil),
		}
		for name, v := range voices {
			if v == nil {
				registerErr = fmt.Errorf("voice %s did not register", name)
			}
		}
	})
	return registerErr
}

func voiceByName(name string) (voice, error) {
	v, ok := voices[name]
	if !ok {
		return nil, fmt.Errorf("flite: %w %q (want one of %s)", speech.ErrVoice, name, strings.Join(voiceNames, ", "))
	}
	return v, nil
}

// call is one synthesis's state, reached from Flite's audio callback
// through a cgo.Handle.
type call struct {
	ctx     context.Context
	filters *speech.Filters
	start   time.Time
	res     *speech.Result
	emit    func([]int16)
	out     *speech.Output
	err     error
	stopped bool
	panic   any // a panic of emit, raised again once Flite has returned
	// rate and samples count the audio Flite produced, at its own rate:
	// the time a piece's words start from (heard).
	rate, samples int
}

//export vdFliteAudio
func vdFliteAudio(w *C.cst_wave, start, size, last C.int, h C.uintptr_t) (ret C.int) {
	c := cgo.Handle(h).Value().(*call)
	defer func() {
		// A panic must not unwind through Flite's frames, which would
		// leak the utterance: stop Flite, and panic again after it.
		if r := recover(); r != nil {
			c.panic = r
			ret = C.CST_AUDIO_STREAM_STOP
		}
	}()
	if c.ctx.Err() != nil {
		c.stopped = true
		return C.CST_AUDIO_STREAM_STOP
	}
	if c.out == nil {
		out, err := c.filters.NewOutput(int(w.sample_rate), minChunk, c.start, c.res, c.emit)
		if err != nil {
			c.err = err
			return C.CST_AUDIO_STREAM_STOP
		}
		c.out = out
	}
	if size > 0 {
		all := unsafe.Slice((*int16)(unsafe.Pointer(w.samples)), int(start+size))
		c.out.Write(all[start:])
		c.rate, c.samples = int(w.sample_rate), c.samples+int(size)
	}
	return C.CST_AUDIO_STREAM_CONT
}

func synth(ctx context.Context, v voice, text string, offsets []int, filters *speech.Filters, start time.Time, res *speech.Result, emit func([]int16)) error {
	c := &call{ctx: ctx, filters: filters, start: start, res: res, emit: emit}
	h := cgo.NewHandle(c)
	defer h.Delete()
	for _, p := range pieces(text, maxPiece) {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err := c.utter(v, h, text[p[0]:p[1]], offsets[p[0]:p[1]+1]); err != nil {
			return err
		}
	}
	if c.out == nil {
		return errors.New("flite: no audio")
	}
	c.out.Close()
	return nil
}

// utter synthesises one piece of the text as a Flite utterance, its
// words' times counted from the audio of the pieces before.
func (c *call) utter(v voice, h cgo.Handle, text string, offsets []int) error {
	at := c.heard()
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	u := C.vd_synth(ctext, v, C.uintptr_t(h))
	if c.panic != nil {
		if u != nil {
			C.delete_utterance(u)
		}
		panic(c.panic)
	}
	if u == nil {
		return errors.New("flite: synthesis failed")
	}
	defer C.delete_utterance(u)
	for _, w := range words(u, text, offsets) {
		w.Start += at
		w.End += at
		c.res.Words = append(c.res.Words, w)
	}
	switch {
	case c.err != nil:
		return fmt.Errorf("flite: %w", c.err)
	case c.stopped || c.ctx.Err() != nil:
		return context.Cause(c.ctx)
	}
	return nil
}

// heard is the length of the audio Flite has produced so far.
func (c *call) heard() time.Duration {
	if c.rate <= 0 {
		return 0
	}
	return time.Duration(c.samples) * time.Second / time.Duration(c.rate)
}

// maxPiece is the most text (bytes) Flite gets at once. Flite analyses
// an utterance's whole text before its first audio and only then looks
// at the context (in the audio callback): 2,000 bytes of spelled letters
// took it 6 s past a 200 ms deadline. A longer text is synthesised in
// pieces, cut at a clause mark or a space, with the context checked
// between them; a sentence of ordinary length is one piece, so its
// intonation is Flite's own.
const maxPiece = 300

// digitWeight is what a digit counts for against maxPiece: Flite says
// each digit of "5551234567" as a word, and "1234567" as eleven, where
// ordinary text has a word every 6-8 bytes, so a piece of numbers as
// long as one of text took it five to twenty times as long to analyse.
const digitWeight = 7

// pieces cuts text into [from, to) byte ranges of at most max bytes
// each (a digit counting digitWeight), ending after a clause mark
// followed by a space when one is in the second half of the range, else
// at its last space (Clean leaves no token longer than maxWord), else
// at max.
func pieces(text string, max int) [][2]int {
	var out [][2]int
	for from := 0; from < len(text); {
		to, w := from, 0
		for to < len(text) {
			c := 1
			if '0' <= text[to] && text[to] <= '9' {
				c = digitWeight
			}
			if w+c > max && to > from {
				break
			}
			w += c
			to++
		}
		if to < len(text) {
			n := to - from
			cut := strings.LastIndexByte(text[from:to], ' ')
			for _, mark := range []string{", ", "; ", ": ", ". ", "! ", "? "} {
				if i := strings.LastIndex(text[from:to], mark); i >= n/2 {
					cut = i + 1
					break
				}
			}
			if cut > 0 {
				to = from + cut
			}
		}
		out = append(out, [2]int{from, to})
		from = to
	}
	return out
}

// words reads the word timings of u and places each word's token in the
// original text: tokens are found in order in the cleaned text, whose
// offsets lead back to the original.
func words(u *C.cst_utterance, text string, offsets []int) []speech.Word {
	var out []speech.Word
	var prevTok *C.cst_item
	cursor, from, to := 0, 0, 0
	var prevEnd time.Duration
	for it := C.vd_first_word(u); it != nil; {
		var name, tokname *C.char
		var tok *C.cst_item
		var s, e C.float
		next := C.vd_word(it, &name, &tok, &tokname, &s, &e)
		if tok != prevTok || tok == nil {
			prevTok = tok
			if t := C.GoString(tokname); t != "" {
				if i := strings.Index(text[cursor:], t); i >= 0 {
					from, to = offsets[cursor+i], offsets[cursor+i+len(t)]
					cursor += i + len(t)
				}
			}
		}
		st, en := seconds(s), seconds(e)
		if en <= 0 { // a word without segments (should not happen): no time of its own
			st, en = prevEnd, prevEnd
		}
		st = min(max(st, 0), en)
		out = append(out, speech.Word{Text: C.GoString(name), From: from, To: to, Start: st, End: en})
		prevEnd = en
		it = next
	}
	return out
}

func seconds(f C.float) time.Duration { return time.Duration(float64(f) * float64(time.Second)) }
