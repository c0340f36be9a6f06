package stt

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
)

// TestMaxUtteranceFlagBindsRemoteEngine: -stt.max-utterance is documented
// as "longest utterance accepted" for either engine (its help has no
// "embedded engine:" prefix), but only the embedded engine's Config got
// it: with -stt.engine=remote the remote engine kept its own 60 s default,
// buffering and uploading whatever the flag said to refuse.
func TestMaxUtteranceFlagBindsRemoteEngine(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-stt.engine=remote", "-stt.remote.url=http://127.0.0.1:9/v1", "-stt.max-utterance=1s"}))
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	e, err := New(ctx, c, nil, quiet, nil)
	require.NoError(t, err)
	defer e.Close()
	r, err := e.Start(ctx, 16000)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Write(ctx, make([]int16, 2*16000))
	require.ErrorIs(t, err, pipeline.ErrBadAudio, "2 s of audio with -stt.max-utterance=1s")
}

// TestValidateNumbers: a negative count or duration, a NaN or infinite
// float, an N-best past the engine's bound, a directory for a file and a
// remote engine without a usable URL are refused by Validate, naming the
// flag. Only New refused
// them, once every engine built before the recogniser had warmed up (8 to
// 9 s after voiced started), without naming a flag.
func TestValidateNumbers(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"-stt.decoders", "-1"}, "-stt.decoders -1: must not be negative"},
		{[]string{"-stt.parallel", "-1"}, "-stt.parallel -1: must not be negative"},
		{[]string{"-stt.busy-above", "-2"}, "-stt.busy-above -2: must not be negative"},
		{[]string{"-stt.nbest", "-1"}, "-stt.nbest -1: must not be negative"},
		{[]string{"-stt.nbest", "21"}, "-stt.nbest 21: want at most 20"},
		{[]string{"-stt.max-wait", "-1s"}, "-stt.max-wait -1s: must not be negative"},
		{[]string{"-stt.partial-every", "-1ms"}, "-stt.partial-every -1ms: must not be negative"},
		{[]string{"-stt.cmn-window", "-1s"}, "-stt.cmn-window -1s: must not be negative"},
		{[]string{"-stt.max-utterance", "-1s"}, "-stt.max-utterance -1s: must not be negative"},
		{[]string{"-stt.engine", "remote", "-stt.remote.url", "http://127.0.0.1:9/v1", "-stt.max-utterance", "-1s"}, "-stt.max-utterance -1s: must not be negative"},
		{[]string{"-stt.narrowband-fold", "NaN"}, "-stt.narrowband-fold NaN: want a finite number"},
		{[]string{"-stt.speaker-warp", "+Inf"}, "-stt.speaker-warp +Inf: want a finite number"},
		{[]string{"-stt.warp-pitch", "NaN"}, "-stt.warp-pitch NaN: want a finite number"},
		{[]string{"-stt.engine", "remote"}, "-stt.engine remote needs -stt.remote.url"},
		{[]string{"-stt.dict", os.TempDir()}, "-stt.dict " + os.TempDir() + ": is a directory, not a file"},
		{[]string{"-stt.lm", "file", "-stt.lm-file", os.TempDir()}, "-stt.lm-file " + os.TempDir() + ": is a directory, not a file"},
		{[]string{"-stt.engine", "remote", "-stt.remote.url", "api.example.com/v1"}, "-stt.remote.url: want an absolute http:// or https:// URL"},
		{[]string{"-stt.engine", "remote", "-stt.remote.url", "ftp://u:s3cret@example.com/v1"}, "-stt.remote.url: want an absolute http:// or https:// URL"},
		// Names and files (cmd/voiced's tests check these through the
		// command line too).
		{[]string{"-stt.engine", "whisper"}, `-stt.engine "whisper": want remote or sphinx`},
		{[]string{"-stt.lm", "foo"}, `-stt.lm "foo": want interp, general, domain, file`},
		{[]string{"-stt.acoustic", "adaptd"}, `-stt.acoustic "adaptd": want general, adapted`},
		{[]string{"-stt.narrowband-acoustic", "x"}, `-stt.narrowband-acoustic "x": want telephone, general`},
		{[]string{"-stt.second-model", "robot"}, `-stt.second-model "robot": want synthetic, none`},
		{[]string{"-stt.second-margin", "NaN"}, "-stt.second-margin NaN: want a finite number"},
		{[]string{"-stt.second-model", "none", "-stt.second-margin", "-1.5"}, ""},
		{[]string{"-stt.search", "slow"}, `-stt.search "slow": want full, fast, quick`},
		{[]string{"-stt.busy-search", "x"}, `-stt.busy-search "x": want full, fast, quick`},
		{[]string{"-stt.lm-weight", "1"}, "-stt.lm-weight 1: want a number between 0 and 1, both excluded"},
		{[]string{"-stt.lm-weight", "NaN"}, "-stt.lm-weight NaN: want a number between 0 and 1, both excluded"},
		{[]string{"-stt.lm", "file"}, "-stt.lm file needs -stt.lm-file"},
		{[]string{"-stt.model-dir", "/nonexistent/en-us"}, "-stt.model-dir: stat /nonexistent/en-us/mdef: no such file"},
		{[]string{"-stt.general-lm", "/nonexistent/lm.bin"}, "-stt.general-lm: stat /nonexistent/lm.bin: no such file"},
		{[]string{"-stt.pronunciations", "/nonexistent/extra.dict"}, "-stt.pronunciations: stat /nonexistent/extra.dict: no such file"},
		// The order of the checks: the first refused flag is named.
		{[]string{"-stt.engine", "remote", "-stt.max-utterance", "-1s"}, "-stt.max-utterance -1s: must not be negative"},
		{[]string{"-stt.nbest", "21", "-stt.max-wait", "-1s"}, "-stt.nbest 21: want at most 20"},
		{[]string{"-stt.max-wait", "-1s", "-stt.warp-pitch", "NaN"}, "-stt.max-wait -1s"},
		{[]string{"-stt.warp-pitch", "NaN", "-stt.lm", "foo"}, "-stt.warp-pitch NaN"},
		{[]string{"-stt.lm", "foo", "-stt.lm-weight", "2"}, `-stt.lm "foo"`},
		{[]string{"-stt.lm-weight", "2", "-stt.lm", "file"}, "-stt.lm-weight 2"},
		{[]string{"-stt.lm", "file", "-stt.dict", "/nonexistent/d"}, "-stt.lm file needs -stt.lm-file"},
		{[]string{"-stt.model-dir", "/nonexistent/m", "-stt.dict", "/nonexistent/d"}, "-stt.model-dir"},
		// What stays allowed: zero (the defaults), negative where it
		// means none, and the engine's bound.
		{[]string{"-stt.decoders", "0", "-stt.nbest", "20", "-stt.narrowband-fold", "-1", "-stt.speaker-warp", "-1"}, ""},
		{[]string{"-stt.engine", "remote", "-stt.remote.url", "https://api.example.com/v1"}, ""},
		// The embedded engine's settings are not the remote engine's
		// business.
		{[]string{"-stt.engine", "remote", "-stt.remote.url", "https://api.example.com/v1", "-stt.decoders", "-1", "-stt.lm", "foo"}, ""},
		// A default file, even missing, is left to New.
		{[]string{"-stt.dict", sphinx.DefaultDict + "/", "-stt.lm-weight", "0.3"}, ""},
	} {
		var c Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.RegisterFlags(fs)
		require.NoError(t, fs.Parse(tt.args))
		err := c.Validate()
		if tt.wantErr == "" {
			require.NoError(t, err, "%v", tt.args)
			continue
		}
		require.ErrorContains(t, err, tt.wantErr, "%v", tt.args)
		require.NotContains(t, err.Error(), "s3cret")
	}
}
