//go:build cgo && !nosphinx

package sphinx

/*
#cgo pkg-config: pocketsphinx sphinxbase
#include <stdlib.h>
#include <malloc.h>
#include <pocketsphinx.h>
#include <sphinxbase/err.h>
#include <sphinxbase/ngram_model.h>
#include <sphinxbase/feat.h>
#include <sphinxbase/cmn.h>
#include <sphinxbase/fe.h>
#include <sphinxbase/ckd_alloc.h>

static void vd_quiet(void) { err_set_logfp(NULL); }

// vd_cmn_get copies the live cepstral mean (n values); -1 if the decoder
// has no live CMN of that size.
static int vd_cmn_get(ps_decoder_t *ps, mfcc_t *out, int n) {
	feat_t *f = ps_get_feat(ps);
	if (f == NULL || f->cmn_struct == NULL || f->cmn_struct->veclen != n) return -1;
	cmn_live_get(f->cmn_struct, out);
	return 0;
}

static void vd_cmn_set(ps_decoder_t *ps, const mfcc_t *v) {
	cmn_live_set(ps_get_feat(ps)->cmn_struct, v);
}

// vd_cmn_estimate computes the mean cepstrum of n samples with fe (a front
// end configured like the decoder's, so frames its voice activity
// detection drops are left out, as the decoder would) and, if at least
// min_frames were voiced, makes it the decoder's live CMN. Returns the
// number of frames used, or -1 on error.
static int vd_cmn_estimate(ps_decoder_t *ps, fe_t *fe, const int16 *data, size_t n, int min_frames) {
	enum { chunk = 16 };
	int ncep = fe_get_output_size(fe);
	if (ncep <= 0 || ncep > 64) return -1;
	mfcc_t **buf = (mfcc_t **)ckd_calloc_2d(chunk, ncep, sizeof(mfcc_t));
	double sum[64] = {0};
	int total = 0;
	if (fe_start_utt(fe) < 0) { ckd_free_2d(buf); return -1; }
	while (n > 0) {
		size_t before = n;
		int32 nfr = chunk;
		if (fe_process_frames(fe, &data, &n, buf, &nfr, NULL) < 0) break;
		for (int i = 0; i < nfr; i++)
			for (int j = 0; j < ncep; j++) sum[j] += buf[i][j];
		total += nfr;
		if (nfr == 0 && n == before) break;
	}
	int32 nfr = 0;
	fe_end_utt(fe, buf[0], &nfr);
	if (nfr > 0) {
		for (int j = 0; j < ncep; j++) sum[j] += buf[0][j];
		total += nfr;
	}
	ckd_free_2d(buf);
	if (total >= min_frames && total > 0) {
		mfcc_t mean[64];
		for (int j = 0; j < ncep; j++) mean[j] = (mfcc_t)(sum[j] / total);
		cmn_live_set(ps_get_feat(ps)->cmn_struct, mean);
	}
	return total;
}

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
	// cmn0 is the cepstral mean the acoustic model starts with; see
	// Config.KeepCMN.
	cmn0    [cepLen]C.mfcc_t
	keepCMN bool
	fe      *C.fe_t // for CMN estimates; separate from the decoder's own
}

// cepLen is the number of cepstral coefficients of the en-us model.
const cepLen = 13

// lmSpec says which language model(s) a decoder searches with.
type lmSpec struct {
	general, domain string // paths; either may be empty
	weight          float64
}

func newDecoder(cfg Config, spec lmSpec, prons []pron) (*decoder, error) {
	quietOnce.Do(func() { C.vd_quiet() })
	args := cfg.decoderArgs()
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
	d := &decoder{ps: ps, keepCMN: cfg.KeepCMN}
	if C.vd_cmn_get(ps, &d.cmn0[0], cepLen) < 0 {
		d.free()
		return nil, errors.New("sphinx: acoustic model without live cepstral mean normalisation")
	}
	if d.fe = C.fe_init_auto_r(C.ps_get_config(ps)); d.fe == nil {
		d.free()
		return nil, errors.New("sphinx: cannot initialise front end")
	}
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
	if !d.keepCMN {
		C.vd_cmn_set(d.ps, &d.cmn0[0])
	}
	if C.ps_start_utt(d.ps) < 0 {
		return errors.New("sphinx: cannot start utterance")
	}
	d.inUtt = true
	return nil
}

// minCMNFrames is the least number of voiced 10 ms frames an estimate of
// the cepstral mean is made from; with fewer the model's initial mean is
// kept.
const minCMNFrames = 20

// estimateCMN sets the decoder's cepstral mean from the start of the
// utterance (see Config.CMNWindow). It returns the voiced frames used.
func (d *decoder) estimateCMN(pcm []int16) int {
	if d.keepCMN || len(pcm) == 0 {
		return 0
	}
	return int(C.vd_cmn_estimate(d.ps, d.fe, (*C.int16)(unsafe.Pointer(&pcm[0])), C.size_t(len(pcm)), minCMNFrames))
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
	if d.fe != nil {
		C.fe_free(d.fe)
		d.fe = nil
	}
	if d.ps != nil {
		C.ps_free(d.ps)
		d.ps = nil
	}
}

const cgoAvailable = true

// trimCHeap returns freed C heap memory to the OS (glibc keeps it
// otherwise), so RSS measurements show what is really still allocated.
func trimCHeap() { C.malloc_trim(0) }
