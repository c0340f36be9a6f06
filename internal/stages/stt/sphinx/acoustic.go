package sphinx

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Acoustic model settings (Config.Acoustic).
const (
	// AcousticGeneral is the general en-us model as Debian installs it
	// (the default).
	AcousticGeneral = "general"
	// AcousticAdapted is the general en-us model with MAP-adapted means
	// and variances loaded over it: what cmd/adaptstt estimated from the
	// domain's training text spoken by five synthetic voices (embedded in
	// voiced, acoustic/). It recognises those voices far better and other
	// voices worse (docs/benchmarks.md, "Acoustic adaptation"): it learned
	// the voices more than the domain, so it is not the default.
	AcousticAdapted = "adapted"
)

// Acoustics are the acoustic model settings, for validation and help.
var Acoustics = []string{AcousticGeneral, AcousticAdapted}

// DefaultAcoustic is the acoustic model of the zero Config. The adapted
// model cut the held-out word error rate of the voices it was adapted on
// by two fifths (flite slt) to nine tenths (espeak-ng), but raised it on
// every voice it was not adapted on (tuning set: flite awb 12.3% to
// 29.0%, rms 8.0% to 14.7%; slt and kal to 39% when left out of the
// adaptation). Callers are people, not those voices, so the general model
// stays the default.
const DefaultAcoustic = AcousticGeneral

// adapted holds the adapted parameters, made by
// `go run ./cmd/adaptstt -out internal/stages/stt/sphinx/acoustic`
// (`make adapt-acoustic`); manifest.txt says how.
//
//go:embed acoustic
var adapted embed.FS

// adaptedOptions are the PocketSphinx options that load each file an
// adaptation may hold, in the order they are passed.
var adaptedOptions = []struct{ file, option string }{
	{"means", "-mean"},
	{"variances", "-var"},
	{"sendump", "-sendump"},
	{"mllr_matrix", "-mllr"},
}

// adaptedArgs writes the embedded adapted parameters to the cache
// directory, under a name made from their content so that different
// builds never share one, and returns the options that load them.
func adaptedArgs(cacheDir string) ([]string, error) {
	h := sha256.New()
	contents := map[string][]byte{}
	for _, o := range adaptedOptions {
		data, err := fs.ReadFile(adapted, "acoustic/"+o.file)
		if err != nil {
			continue // this adaptation has no such file
		}
		h.Write([]byte(o.file + "\x00"))
		h.Write(data)
		contents[o.file] = data
	}
	if len(contents) == 0 {
		return nil, fmt.Errorf("sphinx: no adapted acoustic parameters embedded (make adapt-acoustic)")
	}
	dir := filepath.Join(cacheDir, "acoustic-"+hex.EncodeToString(h.Sum(nil))[:24])
	var args []string
	for _, o := range adaptedOptions {
		data, ok := contents[o.file]
		if !ok {
			continue
		}
		path := filepath.Join(dir, o.file)
		if _, err := os.Stat(path); err != nil {
			if err := writeAtomic(path, data); err != nil {
				return nil, fmt.Errorf("sphinx: cache adapted acoustic model: %w", err)
			}
		}
		args = append(args, o.option, path)
	}
	return args, nil
}

// AdaptedManifest is how the embedded adaptation was made.
func AdaptedManifest() string {
	data, _ := fs.ReadFile(adapted, "acoustic/manifest.txt")
	return strings.TrimSpace(string(data))
}

// Narrowband acoustic settings (Config.NarrowbandAcoustic).
const (
	// NarrowbandTelephone decodes audio that arrives at 8 kHz with the
	// general model's means moved by an MLLR transform (one linear
	// transform of every mean) estimated by cmd/adaptstt -telephone from
	// the domain's training text spoken by eight synthetic voices through
	// the telephone path: 8 kHz G.711 mu-law, resampled and folded as the
	// recogniser does (embedded, telephone/). With one transform shared
	// by every sound it learns the channel rather than the voices: on
	// people's telephone speech no adaptation heard (Debian's Asterisk
	// prompts), word errors fell from 76.7% to 53.8% on the prompts kept
	// for measuring (docs/benchmarks.md, "Telephone audio").
	NarrowbandTelephone = "telephone"
	// NarrowbandGeneral decodes narrowband audio with the model as it is.
	NarrowbandGeneral = "general"
)

// NarrowbandAcoustics are the narrowband acoustic settings, for validation
// and help.
var NarrowbandAcoustics = []string{NarrowbandTelephone, NarrowbandGeneral}

// DefaultNarrowbandAcoustic is the narrowband acoustic setting of the zero
// Config.
const DefaultNarrowbandAcoustic = NarrowbandTelephone

// Second model settings (Config.SecondModel).
const (
	// SecondSynthetic decodes wideband audio a second time, in parallel,
	// with the general model's means moved by an MLLR transform that
	// cmd/adaptstt estimated from the domain's training text spoken by
	// synthetic voices that voiced's evaluation never uses (embedded,
	// synthetic/), and keeps whichever transcript the lattice posterior
	// is surer of (Config.SecondMargin). The transform alone hears
	// synthetic speech far better and people and some voices worse;
	// chosen per utterance it keeps most of the gain and little of the
	// loss (docs/benchmarks.md, "A second model for wideband audio").
	SecondSynthetic = "synthetic"
	// SecondNone decodes every utterance once.
	SecondNone = "none"
)

// SecondModels are the second model settings, for validation and help.
var SecondModels = []string{SecondSynthetic, SecondNone}

// DefaultSecondModel is the second model setting of the zero Config.
const DefaultSecondModel = SecondSynthetic

// DefaultSecondMargin is Config.SecondMargin's default, per word, chosen
// on the tuning set and on people's 16 kHz recordings (docs/benchmarks.md,
// "The second model's choice, per word"): from 0.04 to 0.18 flite slt
// (149 word errors against the general model's 152) and people (23-24
// against 24) are heard no worse than by the general model alone, and
// espeak-ng makes 904-935 word errors of 2,358 (1,298 alone); at 0.02
// and below, people's errors rise to 26 and slt's to 152 and more. 0.1 is
// the middle of that range.
const DefaultSecondMargin = 0.1

// synthetic holds the second model's transform, made by
// `make adapt-synthetic`; manifest.txt says how.
//
//go:embed synthetic
var synthetic embed.FS

// secondModel reports whether wideband audio gets a second decoder: the
// transform was estimated for the general model in the default
// directory.
func (c Config) secondModel() bool {
	return c.SecondModel == SecondSynthetic && c.Acoustic == AcousticGeneral &&
		filepath.Clean(c.ModelDir) == DefaultModelDir
}

// transformsNarrowband reports whether narrowband audio is decoded with
// the telephone transform: it was estimated for the general model in the
// default directory.
func (c Config) transformsNarrowband() bool {
	return c.NarrowbandAcoustic == NarrowbandTelephone && c.Acoustic == AcousticGeneral &&
		filepath.Clean(c.ModelDir) == DefaultModelDir
}

// telephone holds the telephone transform, made by
// `go run ./cmd/adaptstt -telephone -method mllr -out internal/stages/stt/sphinx/telephone`
// (`make adapt-telephone`); manifest.txt says how.
//
//go:embed telephone
var telephone embed.FS

// channel names a transform of the acoustic model's means: a decoder
// hears each utterance through one of them (decoder.channel).
type channel int

const (
	chanWide   channel = iota // wideband audio: the model as it is
	chanNarrow                // audio that arrived at 8 kHz (Config.NarrowbandAcoustic)
	chanSecond                // the second model for wideband audio (Config.SecondModel)
	numChannels
)

// channelFiles are the embedded transforms by channel ("" for chanWide,
// whose identity transform is made from the others' shape).
var channelFiles = [numChannels]struct {
	fs   embed.FS
	name string
	make string // what makes it again, for the error when it is missing
}{
	chanNarrow: {telephone, "telephone/mllr_matrix", "make adapt-telephone"},
	chanSecond: {synthetic, "synthetic/mllr_matrix", "make adapt-synthetic"},
}

// channelTransforms writes the embedded transforms the configuration
// uses (Config.NarrowbandAcoustic, Config.SecondModel), and the identity
// transform a decoder returns to for wideband audio, to the cache
// directory, named by content, and returns their paths by channel ("" for
// a channel not used): a decoder switches between them (see
// decoder.channel), since PocketSphinx applies a transform to the means
// as the model's files hold them.
func channelTransforms(cacheDir string, use [numChannels]bool) ([numChannels]string, error) {
	var paths [numChannels]string
	var data [numChannels][]byte
	h := sha256.New()
	for ch, f := range channelFiles {
		if !use[ch] || f.name == "" {
			continue
		}
		b, err := fs.ReadFile(f.fs, f.name)
		if err != nil {
			return paths, fmt.Errorf("sphinx: no transform %s embedded (%s): %w", f.name, f.make, err)
		}
		data[ch] = b
		h.Write(b)
	}
	for _, b := range data {
		if b == nil {
			continue
		}
		ident, err := identityTransform(b)
		if err != nil {
			return paths, err
		}
		data[chanWide] = ident
		break
	}
	if data[chanWide] == nil {
		return paths, nil // no transform: every utterance hears the model as it is
	}
	dir := filepath.Join(cacheDir, "channels-"+hex.EncodeToString(h.Sum(nil))[:24])
	for ch, b := range data {
		if b == nil {
			continue
		}
		paths[ch] = filepath.Join(dir, fmt.Sprintf("channel-%d", ch))
		if _, err := os.Stat(paths[ch]); err == nil {
			continue
		}
		if err := writeAtomic(paths[ch], b); err != nil {
			return [numChannels]string{}, fmt.Errorf("sphinx: cache acoustic transform: %w", err)
		}
	}
	return paths, nil
}

// identityTransform is an MLLR file of the same shape as mllr (SphinxTrain's
// text format: classes, streams, then per stream its length, the matrix A
// row by row, the bias b and the variance scale h) that changes nothing:
// A the identity, b zero, h one.
func identityTransform(mllr []byte) ([]byte, error) {
	f := strings.Fields(string(mllr))
	bad := func() ([]byte, error) { return nil, errors.New("sphinx: malformed acoustic transform") }
	if len(f) < 2 {
		return bad()
	}
	classes, err1 := strconv.Atoi(f[0])
	streams, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || classes != 1 || streams < 1 {
		return bad()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n%d\n", classes, streams)
	at := 2
	for range streams {
		if at >= len(f) {
			return bad()
		}
		n, err := strconv.Atoi(f[at])
		if err != nil || n < 1 || at+1+n*n+2*n > len(f) {
			return bad()
		}
		at += 1 + n*n + 2*n
		fmt.Fprintf(&b, "%d\n", n)
		for r := range n {
			row := []byte(strings.Repeat("0 ", n))
			row[2*r] = '1'
			b.Write(row)
			b.WriteString("\n")
		}
		b.WriteString(strings.Repeat("0 ", n) + "\n")
		b.WriteString(strings.Repeat("1 ", n) + "\n")
	}
	if at != len(f) {
		return bad()
	}
	return []byte(b.String()), nil
}
