// Package sttest provides what the recogniser's tests, benchmarks and
// evaluation command share: the project's test utterances, speech
// synthesised from them with flite and espeak-ng (cached on disk, made on
// first use), WAV reading, and word error rate.
package sttest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/wav"
)

//go:embed utterances.tsv
var utterancesTSV []byte

// tuning.tsv is a separate set for choosing decoder settings, so that the
// evaluation set's figures are not fitted to it.
//
//go:embed tuning.tsv
var tuningTSV []byte

// Utterance is one test sentence.
type Utterance struct {
	ID   string
	Text string
	// Paraphrase is true for sentences that are not in the domain text.
	Paraphrase bool
}

// Utterances returns the evaluation set (utterances.tsv).
func Utterances() []Utterance { return parseUtterances(utterancesTSV) }

// TuningUtterances returns the tuning set (tuning.tsv): sentences of the
// same kinds as the evaluation set, none of them in it, on which decoder
// settings are chosen before the evaluation set is measured.
func TuningUtterances() []Utterance { return parseUtterances(tuningTSV) }

func parseUtterances(tsv []byte) []Utterance {
	var out []Utterance
	sc := bufio.NewScanner(bytes.NewReader(tsv))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			panic("sttest: bad line in utterance set: " + line)
		}
		out = append(out, Utterance{ID: f[0], Paraphrase: f[1] == "para", Text: f[2]})
	}
	return out
}

// Voice is a speech synthesiser voice.
type Voice struct {
	Name    string // e.g. "flite-slt"
	Program string // "flite" or "espeak-ng"
	Arg     string // the voice argument
}

// Voices are the voices the evaluation and the acoustic adaptation
// (cmd/adaptstt) use. The first four are the evaluation's; the others
// speak adaptation data (espeak-ng variants), or are kept out of it to
// measure voices the adapted model never heard (flite awb and rms).
var Voices = []Voice{
	{"flite-slt", "flite", "slt"},
	{"flite-kal", "flite", "kal"},
	{"espeak-en-us", "espeak-ng", "en-us"},
	{"espeak-en", "espeak-ng", "en"},
	{"flite-awb", "flite", "awb"},
	{"flite-rms", "flite", "rms"},
	{"espeak-en-us-f3", "espeak-ng", "en-us+f3"},
	{"espeak-en-gb-rp", "espeak-ng", "en-gb-x-rp"},
	// Two more espeak-ng voices for adaptation data (docs/benchmarks.md,
	// "MLLR from voices the evaluation never uses"): the en-us voice with
	// another man's pitch and formants (a sibling of en-us, as en-us+f3
	// is) and Caribbean English (another accent).
	{"espeak-en-us-m3", "espeak-ng", "en-us+m3"},
	{"espeak-en-029", "espeak-ng", "en-029"},
	// The second model's voices (docs/benchmarks.md, "A second model for
	// wideband audio"): with flite awb and rms, en-gb-x-rp and en-029,
	// espeak-ng's other English accents and variants of them, never an
	// evaluation voice (en-us, en) or a variant of one.
	{"espeak-en-gb-scotland", "espeak-ng", "en-gb-scotland"},
	{"espeak-en-gb-gbclan", "espeak-ng", "en-gb-x-gbclan"},
	{"espeak-en-gb-gbcwmd", "espeak-ng", "en-gb-x-gbcwmd"},
	{"espeak-en-029-f3", "espeak-ng", "en-029+f3"},
	{"espeak-en-029-m3", "espeak-ng", "en-029+m3"},
	{"espeak-en-gb-rp-f3", "espeak-ng", "en-gb-x-rp+f3"},
	{"espeak-en-gb-scotland-f3", "espeak-ng", "en-gb-scotland+f3"},
}

// VoiceByName finds a voice of Voices.
func VoiceByName(name string) (Voice, bool) {
	if name == Human.Name {
		return Human, true
	}
	for _, v := range Voices {
		if v.Name == name {
			return v, true
		}
	}
	return Voice{}, false
}

// ParseVoices returns the voices of a comma-separated list of names
// (Voices), each checked to be installed.
func ParseVoices(list string) ([]Voice, error) {
	var out []Voice
	for _, n := range strings.Split(list, ",") {
		v, ok := VoiceByName(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("unknown voice %q", n)
		}
		if !v.Available() {
			return nil, fmt.Errorf("voice %s: %w", v.Name, ErrNoSynth)
		}
		out = append(out, v)
	}
	return out, nil
}

// ErrNoSynth is returned when the voice's program is not installed.
var ErrNoSynth = errors.New("sttest: speech synthesiser not installed (apt-get install flite espeak-ng)")

// Available reports whether v's program is installed.
func (v Voice) Available() bool {
	if v.Program == Human.Program {
		_, err := os.Stat(AsteriskText)
		return err == nil
	}
	_, err := exec.LookPath(v.Program)
	return err == nil
}

// CacheDir is where synthesised audio is kept: $VOICED_STT_AUDIO_CACHE, or
// the user cache directory's voiced/stt-audio.
func CacheDir() string {
	if d := os.Getenv("VOICED_STT_AUDIO_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "voiced", "stt-audio")
}

// Synth returns text spoken by v as 16-bit mono PCM and its sample rate
// (flite's slt, awb and rms speak at 16 kHz, kal at 8 kHz, espeak-ng at
// 22.05 kHz).
func Synth(ctx context.Context, v Voice, text string) ([]int16, int, error) {
	if v.Program == Human.Program {
		return nil, 0, fmt.Errorf("sttest: %s cannot say %q: only recordings have its audio", v.Name, text)
	}
	if !v.Available() {
		return nil, 0, fmt.Errorf("%w: %s", ErrNoSynth, v.Program)
	}
	sum := sha256.Sum256([]byte(v.Program + "\x00" + v.Arg + "\x00" + text))
	path := filepath.Join(CacheDir(), v.Name+"-"+hex.EncodeToString(sum[:8])+".wav")
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, 0, err
		}
		// A temporary name of its own: test packages run in parallel and
		// may synthesise the same sentence at once.
		f, err := os.CreateTemp(filepath.Dir(path), v.Name+"-*.tmp.wav")
		if err != nil {
			return nil, 0, err
		}
		tmp := f.Name()
		f.Close()
		defer os.Remove(tmp)
		var cmd *exec.Cmd
		switch v.Program {
		case "flite":
			cmd = exec.CommandContext(ctx, "flite", "-voice", v.Arg, "-t", text, "-o", tmp)
		case "espeak-ng":
			cmd = exec.CommandContext(ctx, "espeak-ng", "-v", v.Arg, "-w", tmp, text)
		default:
			return nil, 0, fmt.Errorf("sttest: unknown synthesiser %q", v.Program)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, 0, fmt.Errorf("sttest: %s: %w: %s", v.Program, err, out)
		}
		if err := os.Rename(tmp, path); err != nil {
			return nil, 0, err
		}
	}
	return ReadWAV(path)
}

// ReadWAV reads a 16-bit PCM WAV file, mixing stereo down to mono.
func ReadWAV(path string) ([]int16, int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	return ParseWAV(data)
}

// ParseWAV decodes a 16-bit PCM WAV file, mixing stereo down to mono.
func ParseWAV(data []byte) ([]int16, int, error) {
	pcm, rate, err := wav.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, 0, fmt.Errorf("sttest: %w", err)
	}
	return pcm, rate, nil
}

// WordErrors returns the word-level edit distance between the reference
// and hypothesis (substitutions + deletions + insertions) and the number
// of reference words; WER is their quotient.
func WordErrors(ref, hyp string) (errs, words int) {
	r, h := strings.Fields(ref), strings.Fields(hyp)
	prev := make([]int, len(h)+1)
	cur := make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(r); i++ {
		cur[0] = i
		for j := 1; j <= len(h); j++ {
			sub := prev[j-1]
			if r[i-1] != h[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(h)], len(r)
}

// Telephone turns a clip into what a telephone stream delivers: 8000 Hz
// (low-pass filtered), each sample through G.711 mu-law and back.
func Telephone(pcm []int16, rate int) ([]int16, int, error) {
	r, err := resample.New(rate, telephoneRate)
	if err != nil {
		return nil, 0, err
	}
	pcm = r.Flush(r.Process(nil, pcm))
	return mulaw.AppendDecode(nil, mulaw.AppendEncode(nil, pcm)), telephoneRate, nil
}

const telephoneRate = 8000
