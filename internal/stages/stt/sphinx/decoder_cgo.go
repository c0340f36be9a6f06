//go:build cgo && !nosphinx

package sphinx

/*
#cgo pkg-config: pocketsphinx sphinxbase
#include <stdlib.h>
#include <malloc.h>
#include <pocketsphinx.h>
#include <sphinxbase/err.h>
#include <sphinxbase/ngram_model.h>

static void vd_quiet(void) { err_set_logfp(NULL); }

// vd_new parses the arguments and builds a decoder; NULL on failure.
static ps_decoder_t *vd_new(char **argv, int argc) {
	cmd_ln_t *c = cmd_ln_parse_r(NULL, ps_args(), argc, argv, FALSE);
	if (c == NULL) return NULL;
	ps_decoder_t *ps = ps_init(c);
	cmd_ln_free_r(c); // the decoder holds its own reference
	return ps;
}

// vd_set_lm makes the decoder search with one model, or with general and
// domain interpolated (weights 1-w and w) when both are given. The decoder
// keeps the only references to the models. Returns < 0 on failure.
static int vd_set_lm(ps_decoder_t *ps, const char *general, const char *domain, float w) {
	cmd_ln_t *c = ps_get_config(ps);
	logmath_t *lmath = ps_get_logmath(ps);
	ngram_model_t *lm;
	if (general != NULL && domain != NULL) {
		ngram_model_t *g = ngram_model_read(c, general, NGRAM_AUTO, lmath);
		if (g == NULL) return -1;
		ngram_model_t *d = ngram_model_read(c, domain, NGRAM_AUTO, lmath);
		if (d == NULL) { ngram_model_free(g); return -2; }
		ngram_model_t *models[2] = {g, d};
		char *names[2] = {"general", "domain"};
		float32 weights[2] = {1 - w, w};
		lm = ngram_model_set_init(c, models, names, weights, 2);
		// The set holds its own references to its members.
		ngram_model_free(g);
		ngram_model_free(d);
		if (lm == NULL) return -3;
	} else {
		lm = ngram_model_read(c, general != NULL ? general : domain, NGRAM_AUTO, lmath);
		if (lm == NULL) return -1;
	}
	int rv = ps_set_lm(ps, "lm", lm);
	ngram_model_free(lm); // the decoder retains it
	if (rv < 0) return -4;
	if (ps_set_search(ps, "lm") < 0) return -5;
	return 0;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

var quietOnce sync.Once

// decoder is one PocketSphinx decoder. It is used by one goroutine at a
// time (the pool hands it out exclusively).
type decoder struct {
	ps    *C.ps_decoder_t
	inUtt bool
}

// lmSpec says which language model(s) a decoder searches with.
type lmSpec struct {
	general, domain string // paths; either may be empty
	weight          float64
}

func newDecoder(cfg Config, spec lmSpec, prons []pron) (*decoder, error) {
	quietOnce.Do(func() { C.vd_quiet() })
	args := []string{
		"-hmm", cfg.ModelDir,
		"-dict", cfg.Dict,
		"-samprate", "16000",
	}
	if cfg.NoFwdflat {
		args = append(args, "-fwdflat", "no")
	}
	argv := make([]*C.char, len(args))
	for i, a := range args {
		argv[i] = C.CString(a)
	}
	defer func() {
		for _, p := range argv {
			C.free(unsafe.Pointer(p))
		}
	}()
	// argv is C memory (CString), so the array of pointers to it may be
	// passed, but the array itself is Go memory holding C pointers only.
	carr := (**C.char)(C.malloc(C.size_t(len(argv)) * C.size_t(unsafe.Sizeof(argv[0]))))
	defer C.free(unsafe.Pointer(carr))
	copy(unsafe.Slice(carr, len(argv)), argv)
	ps := C.vd_new(carr, C.int(len(argv)))
	if ps == nil {
		return nil, fmt.Errorf("sphinx: cannot initialise decoder (model %s, dictionary %s)", cfg.ModelDir, cfg.Dict)
	}
	d := &decoder{ps: ps}
	for _, p := range prons {
		w, ph := C.CString(p.word), C.CString(p.phones)
		rv := C.ps_add_word(ps, w, ph, 0)
		C.free(unsafe.Pointer(w))
		C.free(unsafe.Pointer(ph))
		if rv < 0 {
			d.free()
			return nil, fmt.Errorf("sphinx: pronunciations line %d: cannot add %q /%s/ (unknown phone?)", p.line, p.word, p.phones)
		}
	}
	var cg, cd *C.char
	if spec.general != "" {
		cg = C.CString(spec.general)
		defer C.free(unsafe.Pointer(cg))
	}
	if spec.domain != "" {
		cd = C.CString(spec.domain)
		defer C.free(unsafe.Pointer(cd))
	}
	if rv := C.vd_set_lm(ps, cg, cd, C.float(spec.weight)); rv < 0 {
		d.free()
		return nil, fmt.Errorf("sphinx: cannot load language model (general %q, domain %q): code %d", spec.general, spec.domain, int(rv))
	}
	return d, nil
}

func (d *decoder) start() error {
	if d.inUtt {
		if err := d.reset(); err != nil {
			return err
		}
	}
	if C.ps_start_utt(d.ps) < 0 {
		return errors.New("sphinx: cannot start utterance")
	}
	d.inUtt = true
	return nil
}

// process decodes 16 kHz samples. The slice is only read during the call.
func (d *decoder) process(pcm []int16) error {
	if len(pcm) == 0 {
		return nil
	}
	if C.ps_process_raw(d.ps, (*C.int16)(unsafe.Pointer(&pcm[0])), C.size_t(len(pcm)), 0, 0) < 0 {
		return errors.New("sphinx: decoding failed")
	}
	return nil
}

// hyp returns the current best hypothesis.
func (d *decoder) hyp() string {
	h := C.ps_get_hyp(d.ps, nil)
	if h == nil {
		return ""
	}
	return C.GoString(h)
}

// end finishes the utterance and returns the final hypothesis.
func (d *decoder) end() (string, error) {
	d.inUtt = false
	if C.ps_end_utt(d.ps) < 0 {
		return "", errors.New("sphinx: cannot end utterance")
	}
	return d.hyp(), nil
}

// reset abandons an utterance in progress, leaving the decoder ready.
func (d *decoder) reset() error {
	if !d.inUtt {
		return nil
	}
	_, err := d.end()
	return err
}

func (d *decoder) free() {
	if d.ps != nil {
		C.ps_free(d.ps)
		d.ps = nil
	}
}

const cgoAvailable = true

// trimCHeap returns freed C heap memory to the OS (glibc keeps it
// otherwise), so RSS measurements show what is really still allocated.
func trimCHeap() { C.malloc_trim(0) }
