//go:build cgo && !nosphinx

package sphinx

/*
#cgo pkg-config: pocketsphinx sphinxbase
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <malloc.h>
#include <pocketsphinx.h>
#include <sphinxbase/err.h>
#include <sphinxbase/ngram_model.h>
#include <sphinxbase/feat.h>
#include <sphinxbase/cmn.h>
#include <sphinxbase/fe.h>
#include <sphinxbase/ckd_alloc.h>

// VD_PRIME_SAMPLES is the silence each utterance's fresh stream starts
// with (50 ms at 16 kHz; see primeSilence).
#define VD_PRIME_SAMPLES 800

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
	// A fresh stream (no noise level carried over from another
	// utterance), primed with silence as the decoder's is (primeSilence);
	// the silence's frames are flushed before the window's utterance.
	fe_start_stream(fe);
	if (fe_start_utt(fe) < 0) { ckd_free_2d(buf); return -1; }
	{
		static const int16 silence[VD_PRIME_SAMPLES];
		const int16 *sp = silence;
		size_t sn = VD_PRIME_SAMPLES;
		while (sn > 0) {
			size_t sbefore = sn;
			int32 snfr = chunk;
			if (fe_process_frames(fe, &sp, &sn, buf, &snfr, NULL) < 0) break;
			if (snfr == 0 && sn == sbefore) break;
		}
		int32 snfr = 0;
		fe_end_utt(fe, buf[0], &snfr);
	}
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

// vd_use_mllr moves the acoustic model's means by mllr (PocketSphinx
// reloads them from the model's files and transforms them). The decoder
// takes a reference of its own: the caller keeps its one.
static int vd_use_mllr(ps_decoder_t *ps, ps_mllr_t *mllr) {
	ps_mllr_retain(mllr);
	if (ps_update_mllr(ps, mllr) == NULL) {
		ps_mllr_free(mllr);
		return -1;
	}
	return 0;
}

// vd_prob is the transcript's posterior in natural-log units (ps_get_prob
// computes the lattice's posteriors the first time it is asked).
static double vd_prob(ps_decoder_t *ps) {
	return logmath_log_to_ln(ps_get_logmath(ps), ps_get_prob(ps));
}

// VD_CHUNK is how many frames a warped front end computes at a time.
#define VD_CHUNK 16

// fe_warp_inverse_linear_set_parameters is sphinxbase's; exported, but
// not in its installed headers.
void fe_warp_inverse_linear_set_parameters(char const *param_str, float sampling_rate);

// vd_fe_init makes a front end with config c. sphinxbase keeps the
// inverse linear warp's parameters in globals that each front end's
// initialisation sets and then builds its filters from, and it skips
// parsing a parameter string equal to the last one parsed even when a
// front end without a warp has since made the globals neutral: the next
// front end with that warp would get none. So a string no configuration
// uses is parsed first, and the caller holds feInit.
static fe_t *vd_fe_init(cmd_ln_t *c) {
	fe_warp_inverse_linear_set_parameters("0", 16000);
	return fe_init_auto_r(c);
}

// vd_warped_config returns the configuration of a decoder made with argv,
// with the acoustic model's feature parameters (featparams, or NULL)
// read after them as PocketSphinx reads them, and the frequency warp
// warp_params (inverse linear); the caller frees it. NULL on failure.
static cmd_ln_t *vd_warped_config(char **argv, int argc, const char *featparams, const char *warp_params) {
	cmd_ln_t *c = cmd_ln_parse_r(NULL, ps_args(), argc, argv, FALSE);
	if (c == NULL) return NULL;
	// PocketSphinx goes on when it cannot parse feat.params, with the
	// values read before the error, and so does this front end, to hear
	// what the decoder hears. sphinxbase never frees a configuration it
	// was given to update: c stays ours either way.
	if (featparams != NULL) cmd_ln_parse_file_r(c, ps_args(), featparams, FALSE);
	cmd_ln_set_str_r(c, "-warp_type", "inverse_linear");
	cmd_ln_set_str_r(c, "-warp_params", warp_params);
	return c;
}

// vd_process_fe decodes n samples whose features fe computes, instead of
// the decoder's own front end.
static int vd_process_fe(ps_decoder_t *ps, fe_t *fe, mfcc_t **buf, const int16 *data, size_t n) {
	while (n > 0) {
		size_t before = n;
		int32 nfr = VD_CHUNK;
		if (fe_process_frames(fe, &data, &n, buf, &nfr, NULL) < 0) return -1;
		if (nfr > 0 && ps_process_cep(ps, buf, nfr, FALSE, FALSE) < 0) return -1;
		if (nfr == 0 && n == before) break;
	}
	return 0;
}

// vd_end_fe decodes the last frame fe holds, before the utterance ends.
static int vd_end_fe(ps_decoder_t *ps, fe_t *fe, mfcc_t **buf) {
	int32 nfr = 0;
	if (fe_end_utt(fe, buf[0], &nfr) < 0) return -1;
	if (nfr > 0 && ps_process_cep(ps, buf, nfr, FALSE, FALSE) < 0) return -1;
	return 0;
}

// vd_start_fe starts an utterance on fe, in a fresh stream if fresh.
static int vd_start_fe(fe_t *fe, int fresh) {
	if (fresh) fe_start_stream(fe);
	return fe_start_utt(fe);
}

static mfcc_t **vd_cep_buf(void) { return (mfcc_t **)ckd_calloc_2d(VD_CHUNK, 64, sizeof(mfcc_t)); }
static void vd_cep_free(mfcc_t **buf) { ckd_free_2d(buf); }

// vd_knows reports whether the decoder's dictionary has word.
static int vd_knows(ps_decoder_t *ps, const char *word) {
	char *ph = ps_lookup_word(ps, word);
	if (ph == NULL) return 0;
	ckd_free(ph);
	return 1;
}

// vd_new parses the arguments and builds a decoder; NULL on failure.
static ps_decoder_t *vd_new(char **argv, int argc) {
	cmd_ln_t *c = cmd_ln_parse_r(NULL, ps_args(), argc, argv, FALSE);
	if (c == NULL) return NULL;
	ps_decoder_t *ps = ps_init(c);
	cmd_ln_free_r(c); // the decoder holds its own reference
	return ps;
}

// vd_load_lm reads one model, or general and domain interpolated (weights
// 1-w and w) when both are given. The caller owns the reference returned;
// NULL on failure, with *code saying which step failed.
static ngram_model_t *vd_load_lm(ps_decoder_t *ps, const char *general, const char *domain, float w, int *code) {
	cmd_ln_t *c = ps_get_config(ps);
	logmath_t *lmath = ps_get_logmath(ps);
	if (general == NULL || domain == NULL) {
		ngram_model_t *lm = ngram_model_read(c, general != NULL ? general : domain, NGRAM_AUTO, lmath);
		if (lm == NULL) *code = -1;
		return lm;
	}
	ngram_model_t *g = ngram_model_read(c, general, NGRAM_AUTO, lmath);
	if (g == NULL) { *code = -1; return NULL; }
	ngram_model_t *d = ngram_model_read(c, domain, NGRAM_AUTO, lmath);
	if (d == NULL) { ngram_model_free(g); *code = -2; return NULL; }
	ngram_model_t *models[2] = {g, d};
	char *names[2] = {"general", "domain"};
	float32 weights[2] = {1 - w, w};
	ngram_model_t *lm = ngram_model_set_init(c, models, names, weights, 2);
	// The set holds its own references to its members.
	ngram_model_free(g);
	ngram_model_free(d);
	if (lm == NULL) *code = -3;
	return lm;
}

// vd_add_search adds a search named name over lm, pruned as argv (option
// name/value pairs) says. PocketSphinx reads a search's options from the
// decoder's configuration when it makes the search, so they are set there
// first; every search sets the same options, so none inherits another's.
// The decoder and the search keep their own references to lm.
static int vd_add_search(ps_decoder_t *ps, const char *name, ngram_model_t *lm, char **argv, int argc) {
	if (cmd_ln_parse_r(ps_get_config(ps), ps_args(), argc, argv, FALSE) == NULL) return -4;
	if (ps_set_lm(ps, name, lm) < 0) return -5;
	return 0;
}

// vd_nbest_read copies up to max hypotheses of the utterance just ended,
// best first, from PocketSphinx's A* search over the final pass's lattice
// into buf (NUL-terminated, one after another, size bytes in all): the
// i-th starts at buf+offs[i], and scores[i] is its path score in
// natural-log units. The A* search returns the same words many times over
// (paths differing only in silences, fillers or word boundaries), so it
// is cut off after tries paths. Returns the number copied, or -1 when
// there is no lattice (no speech, or a search without one).
static int vd_nbest_read(ps_decoder_t *ps, int max, int tries, char *buf, size_t size, size_t *offs, double *scores) {
	ps_nbest_t *nb = ps_nbest(ps);
	if (nb == NULL) return -1;
	logmath_t *lmath = ps_get_logmath(ps);
	int n = 0;
	size_t used = 0;
	for (int t = 0; nb != NULL && n < max && t < tries; t++, nb = ps_nbest_next(nb)) {
		int32 score = 0;
		char const *h = ps_nbest_hyp(nb, &score);
		if (h == NULL) continue;
		size_t len = strlen(h);
		if (used + len + 1 > size) break;
		memcpy(buf + used, h, len + 1);
		offs[n] = used;
		scores[n] = logmath_log_to_ln(lmath, score);
		used += len + 1;
		n++;
	}
	if (nb != NULL) ps_nbest_free(nb);
	return n;
}

// vd_nbest is vd_nbest_read, setting *cpu_ns to the thread's CPU time it
// took, which unlike the wall-clock time does not count the time the
// thread waited for a CPU.
static int vd_nbest(ps_decoder_t *ps, int max, int tries, char *buf, size_t size, size_t *offs, double *scores, long long *cpu_ns) {
	struct timespec t0, t1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	int n = vd_nbest_read(ps, max, tries, buf, size, offs, scores);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	*cpu_ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
	return n;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/pool"
)

var quietOnce sync.Once

// feInit serialises the making of front ends (ps_init makes one too):
// sphinxbase sets a frequency warp through process globals (vd_fe_init),
// and decoders are built on several goroutines.
var feInit sync.Mutex

// decoder is one PocketSphinx decoder. It is used by one goroutine at a
// time (the pool hands it out exclusively).
type decoder struct {
	ps    *C.ps_decoder_t
	inUtt bool
	// broken: a call into PocketSphinx failed, leaving the decoder in a
	// state nothing here can vouch for; its reset fails, so that the pool
	// destroys and rebuilds it rather than hand it out again.
	broken bool
	// searches are the decoder's searches by setting name, as C strings
	// for ps_set_search; search is the one in use.
	searches map[string]*C.char
	search   string
	// secondPass says which searches end an utterance with a second pass
	// (reset).
	secondPass map[string]bool
	// cmn0 is the cepstral mean the acoustic model starts with; see
	// Config.KeepCMN.
	cmn0    [cepLen]C.mfcc_t
	keepCMN bool
	// channels are the transforms of the model's means by channel
	// (identity for wideband audio, Config.NarrowbandAcoustic's,
	// Config.SecondModel's); nil without them. ch says which the model
	// has now.
	channels [numChannels]*C.ps_mllr_t
	ch       channel
	// fes are the front ends that compute the features the decoder
	// searches, in place of its built-in one, as it is configured
	// (fes[0]) and with the speaker warp (fes[1], Config.SpeakerWarp;
	// nil without it). PocketSphinx's own carries state from one
	// utterance to the next that ps_start_stream does not reset: the
	// same audio scored differently after other audio (seen in the
	// N-best scores); a front end started afresh for each utterance
	// does not. cmnFes are the same, for the cepstral mean estimates.
	// warp says which the utterance in progress uses; cep is their
	// output buffer.
	fes, cmnFes [2]*C.fe_t
	cep         **C.mfcc_t
	warp        bool
}

// cepLen is the number of cepstral coefficients of the en-us model.
const cepLen = 13

// lmSpec says which language model(s) a decoder searches with.
type lmSpec struct {
	general, domain string // paths; either may be empty
	weight          float64
}

// cArgs copies args to C memory for a PocketSphinx argv; free releases it.
func cArgs(args []string) (argv **C.char, argc C.int, free func()) {
	strs := make([]*C.char, len(args))
	for i, a := range args {
		strs[i] = C.CString(a)
	}
	// The array is C memory too: C may not keep pointers into Go memory.
	argv = (**C.char)(C.malloc(C.size_t(max(1, len(strs))) * C.size_t(unsafe.Sizeof(strs[0]))))
	copy(unsafe.Slice(argv, len(strs)), strs)
	return argv, C.int(len(strs)), func() {
		for _, p := range strs {
			C.free(unsafe.Pointer(p))
		}
		C.free(unsafe.Pointer(argv))
	}
}

func newDecoder(cfg Config, spec lmSpec, prons []lm.Pronunciation) (*decoder, error) {
	quietOnce.Do(func() { C.vd_quiet() })
	argv, argc, freeArgs := cArgs(cfg.decoderArgs())
	feInit.Lock() // ps_init makes the decoder's own front end
	ps := C.vd_new(argv, argc)
	feInit.Unlock()
	freeArgs()
	if ps == nil {
		return nil, fmt.Errorf("sphinx: cannot initialise decoder (model %s, dictionary %s)", cfg.ModelDir, cfg.Dict)
	}
	d := &decoder{ps: ps, keepCMN: cfg.KeepCMN, searches: map[string]*C.char{}, secondPass: map[string]bool{}}
	if C.vd_cmn_get(ps, &d.cmn0[0], cepLen) < 0 {
		d.free()
		return nil, errors.New("sphinx: acoustic model without live cepstral mean normalisation")
	}
	if err := d.initFrontEnds(cfg); err != nil {
		d.free()
		return nil, err
	}
	for i, path := range cfg.channels {
		if path != "" {
			cp := C.CString(path)
			d.channels[i] = C.ps_mllr_read(cp)
			C.free(unsafe.Pointer(cp))
			if d.channels[i] == nil {
				d.free()
				return nil, fmt.Errorf("sphinx: cannot read the acoustic transform %s", path)
			}
		}
	}
	// PocketSphinx refuses a word its dictionary has: of a word the file
	// lists twice the first counts (as in lm.Lexicon), and a word the
	// general dictionary has gets the domain's pronunciation as an
	// alternate ("word(2)").
	added := map[string]bool{}
	for _, p := range prons {
		if added[p.Word] {
			continue
		}
		added[p.Word] = true
		word, ok := d.entryName(p.Word)
		if !ok {
			continue
		}
		w, ph := C.CString(word), C.CString(p.Phones)
		rv := C.ps_add_word(ps, w, ph, 0)
		C.free(unsafe.Pointer(w))
		C.free(unsafe.Pointer(ph))
		if rv < 0 {
			d.free()
			return nil, fmt.Errorf("sphinx: pronunciations %s:%d: cannot add %q /%s/ (unknown phone?)", cfg.pronunciationsName(), p.Line, p.Word, p.Phones)
		}
	}
	if err := d.addSearches(cfg, spec); err != nil {
		d.free()
		return nil, err
	}
	return d, nil
}

// entryName is the dictionary entry a pronunciation of word is added
// under: word itself when the dictionary lacks it, else its first free
// alternate, "word(2)", "word(3)"...; false for an alternate the
// dictionary already has ("read(2)").
func (d *decoder) entryName(word string) (string, bool) {
	if !d.knows(word) {
		return word, true
	}
	if strings.ContainsRune(word, '(') {
		return "", false
	}
	for k := 2; ; k++ {
		if alt := fmt.Sprintf("%s(%d)", word, k); !d.knows(alt) {
			return alt, true
		}
	}
}

// knows reports whether the decoder's dictionary has word.
func (d *decoder) knows(word string) bool {
	w := C.CString(word)
	defer C.free(unsafe.Pointer(w))
	return C.vd_knows(d.ps, w) != 0
}

// initFrontEnds makes the decoder's front ends (see decoder.fes).
func (d *decoder) initFrontEnds(cfg Config) error {
	feInit.Lock()
	defer feInit.Unlock()
	d.cep = C.vd_cep_buf()
	for _, fe := range []**C.fe_t{&d.fes[0], &d.cmnFes[0]} {
		if *fe = C.vd_fe_init(C.ps_get_config(d.ps)); *fe == nil {
			return errors.New("sphinx: cannot initialise front end")
		}
	}
	if cfg.SpeakerWarp <= 0 {
		return nil
	}
	argv, argc, freeArgs := cArgs(cfg.decoderArgs())
	defer freeArgs()
	var featparams *C.char
	if p := filepath.Join(cfg.ModelDir, "feat.params"); fileExists(p) {
		featparams = C.CString(p)
		defer C.free(unsafe.Pointer(featparams))
	}
	warp := C.CString(strconv.FormatFloat(cfg.SpeakerWarp, 'f', -1, 64))
	defer C.free(unsafe.Pointer(warp))
	c := C.vd_warped_config(argv, argc, featparams, warp)
	if c == nil {
		return fmt.Errorf("sphinx: cannot configure a front end with frequency warp %g", cfg.SpeakerWarp)
	}
	defer C.cmd_ln_free_r(c) // each front end holds its own reference
	for _, fe := range []**C.fe_t{&d.fes[1], &d.cmnFes[1]} {
		if *fe = C.vd_fe_init(c); *fe == nil {
			return fmt.Errorf("sphinx: cannot make a front end with frequency warp %g", cfg.SpeakerWarp)
		}
	}
	return nil
}

// feIndex returns the index in fes and cmnFes of the utterance's front ends.
func (d *decoder) feIndex() int {
	if d.warp {
		return 1
	}
	return 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// addSearches loads the language model and makes a search of each of the
// configuration's settings over it. The searches share the decoder's
// acoustic model, and making a search sets whether the model keeps the
// whole utterance's features, which a second pass rereads: a search with
// a second pass is made last (orderSearches), or a second pass after a
// search without one would find its features gone and fail on utterances
// over about 1.3 s.
func (d *decoder) addSearches(cfg Config, spec lmSpec) error {
	var cg, cd *C.char
	if spec.general != "" {
		cg = C.CString(spec.general)
		defer C.free(unsafe.Pointer(cg))
	}
	if spec.domain != "" {
		cd = C.CString(spec.domain)
		defer C.free(unsafe.Pointer(cd))
	}
	var code C.int
	lm := C.vd_load_lm(d.ps, cg, cd, C.float(spec.weight), &code)
	if lm == nil {
		return fmt.Errorf("sphinx: cannot load language model (general %q, domain %q): code %d", spec.general, spec.domain, int(code))
	}
	defer C.ngram_model_free(lm) // the searches keep their own references
	for _, name := range cfg.orderSearches() {
		cname := C.CString(name)
		d.searches[name] = cname // freed with the decoder
		d.secondPass[name] = cfg.secondPass(name)
		args := cfg.searchArgs(name)
		argv, argc, freeArgs := cArgs(args)
		rv := C.vd_add_search(d.ps, cname, lm, argv, argc)
		freeArgs()
		if rv < 0 {
			return fmt.Errorf("sphinx: cannot make the %s search (options %q): code %d", name, args, int(rv))
		}
	}
	return d.use(cfg.Search)
}

// use makes the decoder search with setting name from the next utterance.
func (d *decoder) use(name string) error {
	if d.search == name {
		return nil
	}
	cname := d.searches[name]
	if cname == nil || C.ps_set_search(d.ps, cname) < 0 {
		return fmt.Errorf("sphinx: cannot switch to the %s search", name)
	}
	d.search = name
	return nil
}

// start begins an utterance searched with setting search, heard through
// channel ch's transform, of a speaker whose spectrum is warped
// (decoder.fes) or not.
func (d *decoder) start(search string, ch channel, warp bool) (err error) {
	defer func() { d.broken = d.broken || err != nil }()
	if d.inUtt {
		if err := d.reset(); err != nil {
			return err
		}
	}
	if warp && d.fes[1] == nil {
		return errors.New("sphinx: decoder without a warped front end")
	}
	d.warp = warp
	fresh := C.int(1)
	if d.keepCMN {
		fresh = 0 // the noise level carries over too, as PocketSphinx's own does
	}
	if C.vd_start_fe(d.fes[d.feIndex()], fresh) < 0 {
		return errors.New("sphinx: cannot start the front end")
	}
	if err := d.use(search); err != nil {
		return err
	}
	if err := d.channel(ch); err != nil {
		return err
	}
	if !d.keepCMN {
		// Every channel parameter starts afresh: the cepstral mean, and
		// the noise level and voice activity state the front end keeps
		// for a stream, which would otherwise carry over from whoever
		// used the decoder before.
		if C.ps_start_stream(d.ps) < 0 {
			return errors.New("sphinx: cannot start stream")
		}
		C.vd_cmn_set(d.ps, &d.cmn0[0])
	}
	if C.ps_start_utt(d.ps) < 0 {
		return errors.New("sphinx: cannot start utterance")
	}
	d.inUtt = true
	if !d.keepCMN {
		if err := d.process(primeSilence[:]); err != nil {
			return err
		}
	}
	return nil
}

// primeSilence starts each utterance's fresh stream: the front end's
// noise level starts from its first frame, and from silence it starts at
// the floor, as it would after a quiet utterance, rather than from the
// caller's first word.
var primeSilence [C.VD_PRIME_SAMPLES]int16

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
	return int(C.vd_cmn_estimate(d.ps, d.cmnFes[d.feIndex()], (*C.int16)(unsafe.Pointer(&pcm[0])), C.size_t(len(pcm)), minCMNFrames))
}

// process decodes 16 kHz samples. The slice is only read during the call.
func (d *decoder) process(pcm []int16) error {
	if len(pcm) == 0 {
		return nil
	}
	if C.vd_process_fe(d.ps, d.fes[d.feIndex()], d.cep, (*C.int16)(unsafe.Pointer(&pcm[0])), C.size_t(len(pcm))) < 0 {
		d.broken = true
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
	if err := d.endUtt(); err != nil {
		return "", err
	}
	return d.hyp(), nil
}

// endUtt finishes the utterance: its final pass, without the best-path
// search over the lattice that the hypothesis runs (hyp), which an
// abandoned utterance (reset) has no use for.
func (d *decoder) endUtt() error {
	d.inUtt = false
	if C.vd_end_fe(d.ps, d.fes[d.feIndex()], d.cep) < 0 {
		C.ps_end_utt(d.ps)
		d.broken = true
		return errors.New("sphinx: cannot end utterance")
	}
	if C.ps_end_utt(d.ps) < 0 {
		d.broken = true
		return errors.New("sphinx: cannot end utterance")
	}
	return nil
}

// nbestTries bounds the A* paths read per distinct hypothesis wanted.
const nbestTries = 10

// nbestBuf bounds the text of the paths read (a few hundred words).
const nbestBuf = 8 << 10

// nbest returns up to n distinct hypotheses of the utterance just ended
// (after end), best first, with their path scores: nil when the search
// keeps no lattice. Paths whose words (fillers and silences left out, as
// in hyp) repeat an earlier one are skipped. cpu is the CPU time the
// search took.
func (d *decoder) nbest(n int) (alts []pipeline.Hypothesis, cpu time.Duration) {
	if n < 1 || d.inUtt {
		return nil, 0
	}
	tries := n * nbestTries
	buf := (*C.char)(C.malloc(nbestBuf))
	defer C.free(unsafe.Pointer(buf))
	offs := make([]C.size_t, tries)
	scores := make([]C.double, tries)
	var ns C.longlong
	got := int(C.vd_nbest(d.ps, C.int(tries), C.int(tries), buf, nbestBuf, &offs[0], &scores[0], &ns))
	seen := map[string]bool{}
	for i := 0; i < got && len(alts) < n; i++ {
		text := strings.Join(strings.Fields(C.GoString((*C.char)(unsafe.Add(unsafe.Pointer(buf), offs[i])))), " ")
		if seen[text] {
			continue
		}
		seen[text] = true
		alts = append(alts, pipeline.Hypothesis{Text: text, Score: float64(scores[i])})
	}
	return alts, time.Duration(ns)
}

// channel gives the acoustic model channel ch's means, if it does not
// have them: 4-7 ms of CPU on a quiet machine, 15 ms on a busy one
// (BenchmarkChannelSwitch), paid only when a decoder changes from one to
// another. A channel without a transform is heard as wideband audio.
func (d *decoder) channel(ch channel) error {
	if d.channels[ch] == nil {
		ch = chanWide
	}
	if d.ch == ch || d.channels[ch] == nil {
		return nil
	}
	if C.vd_use_mllr(d.ps, d.channels[ch]) < 0 {
		return errors.New("sphinx: cannot transform the acoustic model")
	}
	d.ch = ch
	return nil
}

// prob returns the posterior probability (natural log) of the utterance's
// transcript in the final pass's lattice, after end: how sure the decoder
// is of it against every other path it kept. PocketSphinx's path scores
// cannot compare two acoustic models (they are normalised by each frame's
// best senone, per model), but a posterior is a probability whatever the
// model. 0 (certain) when the search keeps no lattice.
func (d *decoder) prob() float64 {
	return float64(C.vd_prob(d.ps))
}

// discardFrames is the length of an abandoned utterance, in frames
// decoded (100 a second), above which a new decoder costs less CPU than
// ending it. PocketSphinx ends an utterance only with its final pass
// (ps_end_utt runs the second pass over all of it; its API has no
// abort): 27-31 ms of CPU a second of speech with the fast search, 31-37
// with the full one, against 0.42-0.52 s to free a decoder and build
// another. They broke even between 14 and 19.5 s over three runs on a
// busy 2-core machine (docs/benchmarks.md, "Abandoned utterances: end or
// rebuild"): above 20 s a rebuild was cheaper in every run, and at the
// longest utterance accepted (60 s) it saves about 1.3 s of CPU.
const discardFrames = 2000

// reset abandons an utterance in progress, leaving the decoder ready; it
// fails for a broken decoder, which the pool then rebuilds. An utterance
// searched with a second pass and longer than discardFrames is not ended:
// reset reports pool.ErrDiscard, and the pool replaces the decoder.
func (d *decoder) reset() error {
	if d.broken {
		return errBroken
	}
	if !d.inUtt {
		return nil
	}
	if n := int(C.ps_get_n_frames(d.ps)); d.secondPass[d.search] && n > discardFrames {
		return fmt.Errorf("sphinx: abandoned utterance of %d frames costs more to end than a new decoder: %w", n, pool.ErrDiscard)
	}
	return d.endUtt()
}

func (d *decoder) free() {
	for _, fe := range []**C.fe_t{&d.fes[0], &d.fes[1], &d.cmnFes[0], &d.cmnFes[1]} {
		if *fe != nil {
			C.fe_free(*fe)
			*fe = nil
		}
	}
	if d.cep != nil {
		C.vd_cep_free(d.cep)
		d.cep = nil
	}
	if d.ps != nil {
		C.ps_free(d.ps) // and its reference to the transform in use
		d.ps = nil
	}
	for i, t := range d.channels {
		if t != nil {
			C.ps_mllr_free(t)
			d.channels[i] = nil
		}
	}
	for name, p := range d.searches {
		C.free(unsafe.Pointer(p))
		delete(d.searches, name)
	}
}

const cgoAvailable = true

// trimCHeap returns freed C heap memory to the OS (glibc keeps it
// otherwise), so RSS measurements show what is really still allocated.
func trimCHeap() { C.malloc_trim(0) }
