package sphinx

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
