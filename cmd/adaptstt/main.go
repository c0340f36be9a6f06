// Command adaptstt adapts the embedded recogniser's acoustic model (the
// general en-us model of Debian's pocketsphinx-en-us) to the domain's
// speech, following CMU's "adapting the default acoustic model": the
// training text is synthesised with several voices, the general model's
// statistics are collected on it with SphinxTrain's bw, and mllr_solve
// (an MLLR transform of the means) and map_adapt (MAP re-estimated means
// and variances) turn them into adapted parameters.
//
// Only the training split is spoken (domain.Domain.Training: the training
// split's intent examples and the articles), never the tuning or held-out
// text, so the evaluation sets stay unseen. Everything is deterministic:
// the voices speak the same audio, the front end has no dither, and bw
// and the solvers have no randomness, so the same inputs give the same
// files.
//
// It needs SphinxTrain and two PocketSphinx tools at build time only
// (apt-get install sphinxtrain sphinxbase-utils pocketsphinx); voiced and
// its tests do not. See `make adapt-acoustic` and docs/benchmarks.md.
//
//	go run ./cmd/adaptstt -out internal/stages/stt/sphinx/acoustic
//	go run ./cmd/adaptstt -voices flite-awb,flite-rms -out /tmp/a -tau 20
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/wav"
)

// Where Debian's sphinxtrain package installs its programs.
const sphinxtrainDir = "/usr/lib/sphinxtrain"

// DefaultVoices speak the adaptation data: the three voices the
// evaluation reports and two espeak-ng variants (flite's awb and rms are
// left out, to measure voices the model was not adapted to).
const DefaultVoices = "flite-slt,flite-kal,espeak-en-us,espeak-en-us-f3,espeak-en-gb-rp"

// DefaultMethod is the adaptation written by default, chosen on the
// tuning set (docs/benchmarks.md).
const DefaultMethod = "map"

type options struct {
	voices  []sttest.Voice
	out     string
	work    string
	tau     float64
	workers int
	limit   int
	method  string
	domain  string
	// telephone makes the audio as a phone call delivers it (8 kHz,
	// G.711 mu-law) and as the recogniser then hears it (resampled to
	// 16 kHz, the band folded): an adaptation to the channel rather than
	// to the voices, for narrowband audio.
	telephone bool
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "adaptstt:", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	var voices string
	flag.StringVar(&voices, "voices", DefaultVoices, "voices that speak the adaptation data (sttest voice names)")
	flag.StringVar(&o.out, "out", "", "directory to write the adapted parameters to (-method's files and manifest.txt)")
	flag.StringVar(&o.work, "work", "", "working directory (audio, features, counts); default a temporary one, removed at the end")
	flag.Float64Var(&o.tau, "tau", 0, "MAP prior weight tau (map_adapt -fixedtau); 0: map_adapt's Bayesian estimate (-bayesmean yes)")
	flag.IntVar(&o.workers, "workers", 2, "synthesis processes and bw partitions run at once")
	flag.IntVar(&o.limit, "limit", 0, "use only the first N sentences (0: all), for a quick trial")
	flag.StringVar(&o.method, "method", DefaultMethod, "adaptation written to -out: map (MAP means and variances, 1.7 MB), map-mixw (and mixture weights, 2 MB more) or mllr (an MLLR transform of the means, 5 KB); the work directory keeps all three")
	flag.StringVar(&o.domain, "domain", "", "domain folder (default: the embedded help-desk domain)")
	flag.BoolVar(&o.telephone, "telephone", false, "adapt to telephone audio: each utterance through 8 kHz G.711 mu-law, then resampled to 16 kHz and folded as the recogniser does (for -stt.narrowband-acoustic)")
	flag.Parse()
	if o.out == "" {
		return errors.New("-out is required")
	}
	if _, ok := methods[o.method]; !ok {
		return fmt.Errorf("unknown -method %q (want map, map-mixw or mllr)", o.method)
	}
	var err error
	if o.voices, err = sttest.ParseVoices(voices); err != nil {
		return err
	}
	for _, tool := range []string{filepath.Join(sphinxtrainDir, "bw"), "sphinx_fe", "pocketsphinx_mdef_convert"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: apt-get install sphinxtrain sphinxbase-utils pocketsphinx (build-time tools only)", tool)
		}
	}
	// SIGTERM too (timeout(1), kill): the deferred clean-up of temporary
	// files runs whichever signal stops the run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.work == "" {
		dir, err := os.MkdirTemp("", "adaptstt-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.work = dir
	}
	return adapt(ctx, o)
}

func adapt(ctx context.Context, o options) error {
	start := time.Now()
	d, err := domain.LoadOrDefault(o.domain)
	if err != nil {
		return err
	}
	train, err := d.Training()
	if err != nil {
		return err
	}
	dict, err := writeDict(d, filepath.Join(o.work, "dict"))
	if err != nil {
		return err
	}
	sents, skipped, err := trainingSentences(train.CorpusSentences(), dict)
	if err != nil {
		return err
	}
	if o.limit > 0 && len(sents) > o.limit {
		sents = sents[:o.limit]
	}
	fmt.Printf("adaptstt: %d training sentences (%d skipped: a word without a pronunciation), %d voices\n", len(sents), skipped, len(o.voices))

	// Audio at the rate the recogniser decodes, resampled as the server
	// does, then features as the model's front end computes them.
	ids, err := synthesise(ctx, o, sents)
	if err != nil {
		return err
	}
	fmt.Printf("adaptstt: %d utterances synthesised (%v)\n", len(ids), time.Since(start).Round(time.Second))
	ctl := filepath.Join(o.work, "fileids")
	if err := writeLines(ctl, ids); err != nil {
		return err
	}
	var lsn []string
	for _, id := range ids {
		lsn = append(lsn, fmt.Sprintf("<s> %s </s> (%s)", sents[sentIndex(id)], filepath.Base(id)))
	}
	if err := writeLines(filepath.Join(o.work, "transcription"), lsn); err != nil {
		return err
	}
	model := sphinx.DefaultModelDir
	if err := o.runTool(ctx, "sphinx_fe", "sphinx_fe", "-argfile", filepath.Join(model, "feat.params"), "-samprate", "16000",
		"-c", ctl, "-di", filepath.Join(o.work, "wav"), "-do", filepath.Join(o.work, "mfc"), "-ei", "wav", "-eo", "mfc",
		"-mswav", "yes", "-dither", "no"); err != nil {
		return err
	}
	if err := o.prepareModel(ctx, model); err != nil {
		return err
	}
	accs, err := collect(ctx, o, model)
	if err != nil {
		return err
	}
	failed, err := o.unaligned()
	if err != nil {
		return err
	}
	fmt.Printf("adaptstt: statistics collected (%v); not aligned, left out: %v\n", time.Since(start).Round(time.Second), failed)
	all := filepath.Join(o.work, "adapted")
	if err := o.solve(ctx, model, accs, all); err != nil {
		return err
	}
	return o.write(all, len(sents), skipped, len(ids), failed, time.Since(start))
}

// methods are the adaptations -method chooses from, and the files of each
// that voiced loads (the sphinx package passes each to PocketSphinx).
var methods = map[string][]string{
	"map":      {"means", "variances"},
	"map-mixw": {"means", "variances", "sendump"},
	"mllr":     {"mllr_matrix"},
}

// solve turns the counts into every adaptation, written to dir: an MLLR
// transform (mllr_solve, one class) and MAP means, variances and mixture
// weights (map_adapt), the weights as a PocketSphinx sendump.
func (o options) solve(ctx context.Context, model string, accs []string, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	acc := strings.Join(accs, ",")
	if err := o.runTool(ctx, "mllr_solve", filepath.Join(sphinxtrainDir, "mllr_solve"),
		"-meanfn", filepath.Join(model, "means"), "-varfn", filepath.Join(model, "variances"),
		"-outmllrfn", filepath.Join(dir, "mllr_matrix"), "-accumdir", acc); err != nil {
		return err
	}
	mapArgs := []string{"-moddeffn", filepath.Join(o.work, "mdef.txt"), "-ts2cbfn", ".ptm.",
		"-meanfn", filepath.Join(model, "means"), "-varfn", filepath.Join(model, "variances"),
		"-mixwfn", filepath.Join(o.work, "mixture_weights"), "-tmatfn", filepath.Join(model, "transition_matrices"),
		"-mapmeanfn", filepath.Join(dir, "means"), "-mapvarfn", filepath.Join(dir, "variances"),
		"-mapmixwfn", filepath.Join(dir, "mixture_weights"), "-maptmatfn", filepath.Join(dir, "transition_matrices"),
		"-accumdir", acc}
	if o.tau > 0 {
		mapArgs = append(mapArgs, "-bayesmean", "no", "-fixedtau", "yes", "-tau", strconv.FormatFloat(o.tau, 'g', -1, 64))
	}
	if err := o.runTool(ctx, "map_adapt", filepath.Join(sphinxtrainDir, "map_adapt"), mapArgs...); err != nil {
		return err
	}
	return o.runTool(ctx, "mk_s2sendump", filepath.Join(sphinxtrainDir, "mk_s2sendump"), "-pocketsphinx", "yes",
		"-moddeffn", filepath.Join(o.work, "mdef.txt"), "-mixwfn", filepath.Join(dir, "mixture_weights"),
		"-sendumpfn", filepath.Join(dir, "sendump"))
}

// write copies the chosen method's files from dir to o.out, removes any
// other method's files there, and writes the manifest.
func (o options) write(dir string, sents, skipped, utts int, failed map[string]int, took time.Duration) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for _, files := range methods {
		for _, f := range files {
			if err := os.Remove(filepath.Join(o.out, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	for _, f := range methods[o.method] {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(o.out, f), data, 0o644); err != nil {
			return err
		}
	}
	var names, left []string
	for _, v := range o.voices {
		names = append(names, v.Name)
		if n := failed[v.Name]; n > 0 {
			left = append(left, fmt.Sprintf("%s %d", v.Name, n))
		}
	}
	if len(left) == 0 {
		left = []string{"none"}
	}
	tau, tauFlag := "map_adapt's Bayesian estimate", ""
	if o.tau > 0 {
		tau = "fixed tau " + strconv.FormatFloat(o.tau, 'g', -1, 64)
		tauFlag = " -tau " + strconv.FormatFloat(o.tau, 'g', -1, 64)
	}
	section, telFlag, channel := "Acoustic adaptation", "", "at 16 kHz"
	if o.method == "mllr" && !o.telephone {
		// A transform of wideband audio is the second model's.
		section = "A second model for wideband audio"
	}
	if o.telephone {
		section, telFlag = "Telephone audio", " -telephone"
		channel = "through the telephone path (8 kHz G.711 mu-law, resampled to 16 kHz, the band folded as the recogniser does)"
	}
	manifest := fmt.Sprintf("Acoustic adaptation of %s (docs/benchmarks.md, %q), made by\n"+
		"  go run ./cmd/adaptstt -out DIR%s -method %s -voices %s%s\n"+
		"from %d training-split sentences (intent examples and articles; %d left out for a word without a pronunciation)\n"+
		"spoken by each voice: %d utterances %s. bw -cmn batch (utterances it could not align to their text,\n"+
		"left out: %s); method %s (mllr: mllr_solve, one class; map: map_adapt, %s). Files: %s.\n",
		sphinx.DefaultModelDir, section, telFlag, o.method, strings.Join(names, ","), tauFlag, sents, skipped, utts, channel,
		strings.Join(left, ", "), o.method, tau, strings.Join(methods[o.method], ", "))
	if err := os.WriteFile(filepath.Join(o.out, "manifest.txt"), []byte(manifest), 0o644); err != nil {
		return err
	}
	fmt.Printf("adaptstt: %s written to %s (%v)\n", strings.Join(methods[o.method], ", "), o.out, took.Round(time.Second))
	return nil
}

// writeDict writes the pronunciation dictionary bw aligns with: the
// general dictionary plus the domain's pronunciations. It returns the
// words it has.
func writeDict(d *domain.Domain, path string) (map[string]bool, error) {
	general, err := os.ReadFile(sphinx.DefaultDict)
	if err != nil {
		return nil, fmt.Errorf("%w (apt-get install pocketsphinx-en-us)", err)
	}
	extra, err := d.ReadFile(domain.PronunciationsFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	words := map[string]bool{}
	var out bytes.Buffer
	out.Write(general)
	for i, data := range [][]byte{general, extra} {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";;;") {
				continue
			}
			w := strings.ToLower(f[0])
			if j := strings.IndexByte(w, '('); j > 0 {
				w = w[:j]
			}
			// The domain's words the general dictionary lacks.
			if i == 1 && !words[w] {
				fmt.Fprintf(&out, "%s %s\n", w, strings.Join(f[1:], " "))
			}
			words[w] = true
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return words, os.WriteFile(path, out.Bytes(), 0o644)
}

// trainingSentences returns the corpus's sentences as the words spoken,
// without duplicates, in the corpus's order, leaving out those with a word
// the dictionary does not have.
func trainingSentences(corpus []string, dict map[string]bool) ([]string, int, error) {
	sents, _, err := lm.ParseCorpus(corpus)
	if err != nil {
		return nil, 0, err
	}
	seen := map[string]bool{}
	var out []string
	skipped := 0
	for _, ws := range sents {
		s := strings.Join(ws, " ")
		if seen[s] {
			continue
		}
		seen[s] = true
		if slices.ContainsFunc(ws, func(w string) bool { return !dict[w] }) {
			skipped++
			continue
		}
		out = append(out, s)
	}
	return out, skipped, nil
}

// uttID names sentence i spoken by voice v; sentIndex reads i back.
func uttID(v sttest.Voice, i int) string { return fmt.Sprintf("%s/%s-%05d", v.Name, v.Name, i) }

func sentIndex(id string) int {
	n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '-')+1:])
	return n
}

// synthesise writes every sentence spoken by every voice as a 16 kHz WAV
// file under work/wav and returns their ids in a stable order.
func synthesise(ctx context.Context, o options, sents []string) ([]string, error) {
	type task struct {
		v sttest.Voice
		i int
	}
	var tasks []task
	var ids []string
	for _, v := range o.voices {
		if err := os.MkdirAll(filepath.Join(o.work, "wav", v.Name), 0o755); err != nil {
			return nil, err
		}
		for i := range sents {
			tasks = append(tasks, task{v, i})
			ids = append(ids, uttID(v, i))
		}
	}
	next := make(chan task)
	errs := make([]error, max(1, o.workers))
	var wg sync.WaitGroup
	for w := range max(1, o.workers) {
		wg.Go(func() {
			for t := range next {
				if errs[w] != nil {
					continue
				}
				errs[w] = synthOne(ctx, t.v, sents[t.i], filepath.Join(o.work, "wav", uttID(t.v, t.i)+".wav"), o.telephone)
			}
		})
	}
	for _, t := range tasks {
		next <- t
	}
	close(next)
	wg.Wait()
	return ids, errors.Join(errs...)
}

func synthOne(ctx context.Context, v sttest.Voice, text, path string, telephone bool) error {
	pcm, rate, err := sttest.Synth(ctx, v, text)
	if err != nil {
		return err
	}
	if telephone {
		if pcm, rate, err = sttest.Telephone(pcm, rate); err != nil {
			return err
		}
	}
	r, err := resample.New(rate, 16000)
	if err != nil {
		return err
	}
	pcm = r.Flush(r.Process(nil, pcm))
	if telephone {
		sphinx.FoldNarrowband(pcm, sphinx.DefaultNarrowbandFold)
	}
	return os.WriteFile(path, wav.Encode(pcm, 16000), 0o644)
}

// prepareModel writes what bw needs and the Debian model lacks: a text
// model definition and float mixture weights (the package has only the
// compressed sendump PocketSphinx reads).
func (o options) prepareModel(ctx context.Context, model string) error {
	work := o.work
	if err := o.runTool(ctx, "mdef_convert", "pocketsphinx_mdef_convert", "-text", filepath.Join(model, "mdef"), filepath.Join(work, "mdef.txt")); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(model, "sendump"))
	if err != nil {
		return err
	}
	defer f.Close()
	mixw, err := readSendump(bufio.NewReader(f))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(work, "mixture_weights"), mixw.s3(), 0o644)
}

// mixw are mixture weights: w[senone][feature][density].
type mixw struct {
	senones, features, densities int
	w                            []float32
}

// readSendump reads PocketSphinx's quantised mixture weights (the format
// its ptm_mgau.c reads: header strings, then per feature and density one
// byte per senone, -log base 1.0001 of the weight shifted right by 10).
func readSendump(r io.Reader) (*mixw, error) {
	u32 := func() (uint32, error) {
		var v uint32
		err := binary.Read(r, binary.LittleEndian, &v)
		return v, err
	}
	features := 0
	for {
		n, err := u32()
		if err != nil {
			return nil, fmt.Errorf("sendump header: %w", err)
		}
		if n == 0 {
			break
		}
		if n > 1<<16 {
			return nil, errors.New("sendump: not little-endian or not a sendump")
		}
		s := make([]byte, n)
		if _, err := io.ReadFull(r, s); err != nil {
			return nil, fmt.Errorf("sendump header: %w", err)
		}
		line := strings.TrimRight(string(s), "\x00")
		if v, ok := strings.CutPrefix(line, "feature_count "); ok {
			features, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(line, "cluster_count "); ok && v != "0" {
			return nil, errors.New("sendump: clustered weights are not supported")
		}
	}
	densities, err := u32()
	if err != nil {
		return nil, err
	}
	senones, err := u32()
	if err != nil {
		return nil, err
	}
	if features < 1 || densities < 1 || senones < 1 {
		return nil, fmt.Errorf("sendump: %d features, %d densities, %d senones", features, densities, senones)
	}
	m := &mixw{senones: int(senones), features: features, densities: int(densities)}
	m.w = make([]float32, m.senones*m.features*m.densities)
	row := make([]byte, m.senones)
	for f := range m.features {
		for d := range m.densities {
			if _, err := io.ReadFull(r, row); err != nil {
				return nil, fmt.Errorf("sendump data: %w", err)
			}
			for s, q := range row {
				m.w[(s*m.features+f)*m.densities+d] = float32(math.Pow(1.0001, -float64(int(q)<<10)))
			}
		}
	}
	// Quantisation leaves each mixture a little off one: renormalise.
	for i := 0; i < len(m.w); i += m.densities {
		var sum float64
		for _, x := range m.w[i : i+m.densities] {
			sum += float64(x)
		}
		for j := i; j < i+m.densities; j++ {
			m.w[j] = float32(float64(m.w[j]) / sum)
		}
	}
	return m, nil
}

// s3 is the weights as a SphinxTrain binary parameter file.
func (m *mixw) s3() []byte {
	var b bytes.Buffer
	b.WriteString("s3\nversion 1.0\n")
	// The data starts on a 4-byte boundary.
	for (b.Len()+len("endhdr\n"))%4 != 0 {
		b.WriteByte(' ')
	}
	b.WriteString("endhdr\n")
	for _, v := range []uint32{0x11223344, uint32(m.senones), uint32(m.features), uint32(m.densities), uint32(len(m.w))} {
		_ = binary.Write(&b, binary.LittleEndian, v)
	}
	_ = binary.Write(&b, binary.LittleEndian, m.w)
	return b.Bytes()
}

// collect runs bw over the corpus in o.workers parts at once and returns
// the directories holding the counts.
func collect(ctx context.Context, o options, model string) ([]string, error) {
	parts := max(1, o.workers)
	accs := make([]string, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		accs[p] = filepath.Join(o.work, fmt.Sprintf("acc%d", p+1))
		wg.Go(func() {
			if errs[p] = os.MkdirAll(accs[p], 0o755); errs[p] != nil {
				return
			}
			errs[p] = o.runTool(ctx, fmt.Sprintf("bw%d", p+1), filepath.Join(sphinxtrainDir, "bw"),
				"-hmmdir", model, "-moddeffn", filepath.Join(o.work, "mdef.txt"), "-ts2cbfn", ".ptm.",
				"-mixwfn", filepath.Join(o.work, "mixture_weights"),
				"-feat", "1s_c_d_dd", "-svspec", "0-12/13-25/26-38", "-cmn", "batch", "-agc", "none", "-varnorm", "no",
				"-dictfn", filepath.Join(o.work, "dict"), "-fdictfn", filepath.Join(model, "noisedict"),
				"-ctlfn", filepath.Join(o.work, "fileids"), "-lsnfn", filepath.Join(o.work, "transcription"),
				"-cepdir", filepath.Join(o.work, "mfc"), "-accumdir", accs[p],
				"-npart", strconv.Itoa(parts), "-part", strconv.Itoa(p+1), "-timing", "no")
		})
	}
	wg.Wait()
	return accs, errors.Join(errs...)
}

// unaligned counts the utterances bw could not align to their transcript
// (and so left out), by voice, from its logs.
func (o options) unaligned() (map[string]int, error) {
	out := map[string]int{}
	for p := range max(1, o.workers) {
		data, err := os.ReadFile(filepath.Join(o.work, "log", fmt.Sprintf("bw%d.log", p+1)))
		if err != nil {
			return nil, err
		}
		for line := range strings.Lines(string(data)) {
			if strings.HasSuffix(strings.TrimSpace(line), " ignored") {
				f := strings.Fields(line)
				voice, _, _ := strings.Cut(f[len(f)-2], "/")
				out[voice]++
			}
		}
	}
	return out, nil
}

// runTool runs a build-time tool; its output goes to work/log/NAME.log
// (a bw partition's to its own), and its tail into the error when it fails.
func (o options) runTool(ctx context.Context, logName, name string, args ...string) error {
	if err := os.MkdirAll(filepath.Join(o.work, "log"), 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if werr := os.WriteFile(filepath.Join(o.work, "log", logName+".log"), out, 0o644); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, out[max(0, len(out)-4000):])
	}
	return nil
}

func writeLines(path string, lines []string) error {
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}
