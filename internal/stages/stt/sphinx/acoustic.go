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

// channelTransforms writes the identity transform and the embedded
// telephone transform to the cache directory, named by content, and
// returns their paths: a decoder switches between them (see
// decoder.channel), since PocketSphinx applies a transform to the means
// as the model's files hold them.
func channelTransforms(cacheDir string) ([2]string, error) {
	tel, err := fs.ReadFile(telephone, "telephone/mllr_matrix")
	if err != nil {
		return [2]string{}, fmt.Errorf("sphinx: no telephone transform embedded (make adapt-telephone): %w", err)
	}
	ident, err := identityTransform(tel)
	if err != nil {
		return [2]string{}, err
	}
	h := sha256.Sum256(tel)
	dir := filepath.Join(cacheDir, "channels-"+hex.EncodeToString(h[:])[:24])
	var paths [2]string
	for i, f := range []struct {
		name string
		data []byte
	}{{"identity", ident}, {"telephone", tel}} {
		paths[i] = filepath.Join(dir, f.name)
		if _, err := os.Stat(paths[i]); err == nil {
			continue
		}
		if err := writeAtomic(paths[i], f.data); err != nil {
			return [2]string{}, fmt.Errorf("sphinx: cache acoustic transform: %w", err)
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
	bad := func() ([]byte, error) { return nil, errors.New("sphinx: malformed telephone transform") }
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
