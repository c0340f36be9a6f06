package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/loadgen"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"-h"}, 0, "usage: voiceload"},
		{"unknown flag", []string{"-nope"}, 2, "flag provided but not defined"},
		{"extra argument", []string{"extra"}, 2, "unexpected arguments"},
		{"remote target", []string{"-addr", "10.0.0.1:8080"}, 2, "not a loopback address"},
		{"bad mix", []string{"-cancel", "80", "-disconnect", "40"}, 2, "at most 100"},
		{"missing wav", []string{"-wav", "/nonexistent.wav"}, 2, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			require.Equal(t, tc.code, run(tc.args, &out, &errOut))
			require.Contains(t, errOut.String(), tc.want)
		})
	}
}

func TestSaveUtterance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.wav")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"-save-utterance", path, "-utterance", "300ms"}, &out, &errOut), errOut.String())
	u, err := loadgen.LoadWAV(path)
	require.NoError(t, err)
	require.Equal(t, 300*time.Millisecond, u.Duration())
	_, err = os.Stat(path)
	require.NoError(t, err)
}

func TestThinkZeroMeansNone(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{nil, time.Second},
		{[]string{"-think", "0"}, -1},
		{[]string{"-think", "250ms"}, 250 * time.Millisecond},
	} {
		var cfg loadgen.Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		require.NoError(t, fs.Parse(tc.args))
		require.Equal(t, tc.want, cfg.Think, "%v", tc.args)
	}
}
