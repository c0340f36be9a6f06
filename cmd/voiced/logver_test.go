package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoggerDurations: JSON logs give every duration, nested ones too, as
// milliseconds under a key ending in _ms; text logs keep Go durations.
func TestLoggerDurations(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger("json", "info", &buf)
	require.NoError(t, err)
	log.With("budget", 1700*time.Millisecond).WithGroup("g").
		Info("x", "took", 4997*time.Millisecond, "tiny", 250*time.Microsecond, "n", 3)
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got), buf.String())
	require.Equal(t, 1700.0, got["budget_ms"])
	g := got["g"].(map[string]any)
	require.Equal(t, 4997.0, g["took_ms"])
	require.Equal(t, 0.25, g["tiny_ms"])
	require.Equal(t, 3.0, g["n"])
	require.NotContains(t, buf.String(), `"took"`)

	buf.Reset()
	log, err = newLogger("text", "info", &buf)
	require.NoError(t, err)
	log.Info("x", "took", 4997*time.Millisecond)
	require.Contains(t, buf.String(), "took=4.997s")
}

// TestLoggerColour: text logs written to a file or pipe carry no ANSI
// escapes; auto picks JSON there.
func TestLoggerColour(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	for _, format := range []string{"text", "auto"} {
		log, err := newLogger(format, "info", f)
		require.NoError(t, err)
		log.Warn("plain", "k", "v")
	}
	b, err := os.ReadFile(f.Name())
	require.NoError(t, err)
	require.NotContains(t, string(b), "\x1b[", "ANSI escape in a log file")
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], "WRN plain k=v")
	require.True(t, json.Valid([]byte(lines[1])), "auto on a file is JSON: %s", lines[1])
	require.False(t, isTerminal(&bytes.Buffer{}))
}

func TestVersion(t *testing.T) {
	main := debug.Module{Path: "github.com/voiced/voiced", Version: "v1.2.3"}
	set := func(kv ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"full", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main,
			Settings: set("vcs.revision", "b149cc5", "vcs.time", "2026-12-01T11:20:00Z", "vcs.modified", "false")},
			true, "voiced v1.2.3, commit b149cc5 (2026-12-01T11:20:00Z), go1.26.8"},
		{"modified", &debug.BuildInfo{GoVersion: "go1.26.8", Main: main,
			Settings: set("vcs.revision", "b149cc5", "vcs.time", "2026-12-01T11:20:00Z", "vcs.modified", "true")},
			true, "voiced v1.2.3, commit b149cc5 (2026-12-01T11:20:00Z, modified), go1.26.8"},
		{"no vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			true, "voiced (devel), commit unknown, go1.26.8"},
		{"empty version", &debug.BuildInfo{GoVersion: "go1.26.8"}, true, "voiced (devel), commit unknown, go1.26.8"},
		{"no build info", nil, false, "voiced (no build information)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, version(tc.info, tc.ok))
		})
	}
}

// TestVersionFlag: -version prints to stdout and exits without serving.
func TestVersionFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(ctx, []string{"-version"}, func(string) string { return "" }, &stdout, &stderr))
	require.Regexp(t, `^voiced \S+, commit \S+.*, go1\.\d+`, stdout.String())
	require.Empty(t, stderr.String())
}

// TestLoggerNoPeerEscapes: a peer's text in a value (a Media Streams
// field quoted in an error, before the call has authenticated) does not
// reach a terminal as an escape sequence. tint colours a terminal's
// values, and to keep its own colours it turns every \x1b of a quoted
// value back into ESC: an ESC the peer sent, and its text "\x1b" too.
func TestLoggerNoPeerEscapes(t *testing.T) {
	for name, v := range map[string]any{
		"raw ESC":            "id\x1b[2J\x1b]0;pwned\x07",
		"text \\x1b":         `id\x1b[2J`,
		"error with ESC":     errors.New("bad message: \x1b[8mhidden"),
		"quoted in an error": fmt.Errorf("twilio: bad message: sequenceNumber %q", "\x1b[2J"),
	} {
		var buf bytes.Buffer
		textLogger(&buf, slog.LevelInfo, true).Warn("bad Media Streams message", "err", v)
		out := buf.String()
		for _, seq := range []string{"\x1b[2J", "\x1b]0;", "\x1b[8m"} {
			require.NotContains(t, out, seq, "%s: %q", name, out)
		}
		require.Contains(t, out, "\x1b[", "%s: tint's own colours stay: %q", name, out)
	}
}
