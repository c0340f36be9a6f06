package sphinx

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// TestValidate: each setting validate refuses, in the order it checks
// them (a config with two faults is refused for the first), against model
// files of its own so that it runs where the Debian packages are not
// installed.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, nil, 0o644))
		return p
	}
	model := filepath.Join(dir, "model")
	require.NoError(t, os.Mkdir(model, 0o755))
	write("model/mdef")
	dict, general, file, prons := write("dict"), write("general.lm"), write("domain.lm"), write("extra.dict")
	missing := filepath.Join(dir, "missing")
	base := func(edit func(c *Config)) Config {
		c := Config{ModelDir: model, Dict: dict, GeneralLM: general}
		edit(&c)
		return c
	}
	nan := func() float64 { var z float64; return z / z }()
	for _, tt := range []struct {
		name    string
		cfg     Config
		wantErr string
		wantIs  error
	}{
		{"defaults", base(func(c *Config) {}), "", nil},
		{"every file", base(func(c *Config) { c.LM, c.LMPath, c.Pronunciations = LMFile, file, prons }), "", nil},
		{"no general model needed", base(func(c *Config) { c.LM, c.GeneralLM = LMDomain, missing }), "", nil},
		{"lm mode", base(func(c *Config) { c.LM = "x" }), `unknown LM mode "x"`, nil},
		{"lm file without path", base(func(c *Config) { c.LM = LMFile }), `LM mode "file" needs a model path`, nil},
		{"adapted elsewhere", base(func(c *Config) { c.Acoustic = AcousticAdapted }), "the adapted acoustic model is an adaptation of", nil},
		{"acoustic", base(func(c *Config) { c.Acoustic = "x" }), `unknown acoustic model "x"`, nil},
		{"narrowband acoustic", base(func(c *Config) { c.NarrowbandAcoustic = "x" }), `unknown narrowband acoustic setting "x"`, nil},
		{"busy search", base(func(c *Config) { c.BusySearch = "x" }), `unknown search setting "x"`, nil},
		{"busy above", base(func(c *Config) { c.BusyAbove = -1 }), "busy above -1 utterances, want >= 1", nil},
		{"domain weight NaN", base(func(c *Config) { c.DomainWeight = nan }), "domain weight NaN: want a finite number", nil},
		{"warp pitch NaN", base(func(c *Config) { c.WarpPitch = nan }), "warp pitch NaN: want a finite number", nil},
		{"domain weight", base(func(c *Config) { c.DomainWeight = 1 }), "domain weight 1 out of range (0, 1)", nil},
		{"decoders", base(func(c *Config) { c.Decoders = -1 }), "-1 decoders, want >= 1", nil},
		{"parallel", base(func(c *Config) { c.Parallel = -1 }), "-1 parallel decoders, want >= 1", nil},
		{"odd args", base(func(c *Config) { c.Args = []string{"-lw"} }), "are not name/value pairs", nil},
		{"arg name", base(func(c *Config) { c.Args = []string{"lw", "8"} }), `extra option name "lw" does not start with '-'`, nil},
		{"nbest", base(func(c *Config) { c.NBest = MaxNBest + 1 }), "N-best 21 out of range 0..20", nil},
		{"order", base(func(c *Config) { c.Order = 6 }), "n-gram order 6 out of range 1..5", nil},
		{"model dir", base(func(c *Config) { c.ModelDir = missing }), "missing/mdef", ErrNotInstalled},
		{"dict", base(func(c *Config) { c.Dict = missing }), "missing", ErrNotInstalled},
		{"general model", base(func(c *Config) { c.GeneralLM = missing }), "general language model", ErrNotInstalled},
		{"lm file", base(func(c *Config) { c.LM, c.LMPath = LMFile, missing }), "sphinx: language model: stat", os.ErrNotExist},
		{"pronunciations", base(func(c *Config) { c.Pronunciations = missing }), "sphinx: pronunciations: stat", os.ErrNotExist},
		// Two faults: the first checked is named.
		{"lm mode before acoustic", base(func(c *Config) { c.LM, c.Acoustic = "x", "y" }), `unknown LM mode "x"`, nil},
		{"acoustic before narrowband", base(func(c *Config) { c.Acoustic, c.NarrowbandAcoustic = "x", "y" }), `unknown acoustic model "x"`, nil},
		{"narrowband before search", base(func(c *Config) { c.NarrowbandAcoustic, c.Search = "x", "y" }), `unknown narrowband acoustic setting "x"`, nil},
		{"search before busy above", base(func(c *Config) { c.Search, c.BusyAbove = "x", -1 }), `unknown search setting "x"`, nil},
		{"busy above before finite", base(func(c *Config) { c.BusyAbove, c.SpeakerWarp = -1, nan }), "busy above -1", nil},
		{"finite before weight range", base(func(c *Config) { c.NarrowbandFold, c.DomainWeight = nan, 2 }), "narrowband fold NaN", nil},
		{"weight before decoders", base(func(c *Config) { c.DomainWeight, c.Decoders = 2, -1 }), "domain weight 2", nil},
		{"decoders before parallel", base(func(c *Config) { c.Decoders, c.Parallel = -1, -1 }), "-1 decoders", nil},
		{"parallel before args", base(func(c *Config) { c.Parallel, c.Args = -1, []string{"-lw"} }), "-1 parallel", nil},
		{"args before durations", base(func(c *Config) { c.Args, c.MaxWait = []string{"x", "1"}, -1 }), `extra option name "x"`, nil},
		{"durations before nbest", base(func(c *Config) { c.MaxWait, c.NBest = -1, -1 }), "wait for a decoder -1ns is negative", nil},
		{"nbest before order", base(func(c *Config) { c.NBest, c.Order = -1, 9 }), "N-best -1", nil},
		{"order before files", base(func(c *Config) { c.Order, c.ModelDir = 9, missing }), "n-gram order 9", nil},
		{"model before dict", base(func(c *Config) { c.ModelDir, c.Dict = missing, filepath.Join(dir, "nodict") }), "missing/mdef", nil},
		{"dict before general", base(func(c *Config) { c.Dict, c.GeneralLM = missing, filepath.Join(dir, "nolm") }), "missing", ErrNotInstalled},
		{"general before lm file", base(func(c *Config) { c.GeneralLM, c.LM, c.LMPath = missing, LMInterp, missing }), "general language model", nil},
		{"lm file before pronunciations", base(func(c *Config) { c.LM, c.LMPath, c.Pronunciations = LMFile, missing, missing }), "language model: stat", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.withDefaults().validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			if tt.wantIs != nil {
				require.ErrorIs(t, err, tt.wantIs)
			}
			if errors.Is(err, ErrNotInstalled) {
				require.ErrorIs(t, err, pipeline.ErrUnavailable)
			}
		})
	}
}
