package main

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/session"
)

// -recognizers 0 is "the embedded engine's default pool": with the pool
// sized by -stt.decoders, the agent's weight (free recognisers /
// -recognizers) must be out of that pool, not out of 4 per CPU, or an
// instance whose every decoder is busy reports itself mostly free.
func TestRecognizersFollowDecoderPool(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"-stt.decoders", "3"}, 3},
		{[]string{"-stt.decoders", "3", "-recognizers", "5"}, 5},
	} {
		cfg, err := parseFlags(tt.args, func(string) string { return "" }, io.Discard)
		require.NoError(t, err)
		var live atomic.Pointer[session.Server]
		rt, err := startFleet(cfg, &live, "127.0.0.1:0", slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		require.NoError(t, err)
		got := rt.state.Recognizers()
		rt.close()
		require.Equal(t, tt.want, got, "%v", tt.args)
	}
}
