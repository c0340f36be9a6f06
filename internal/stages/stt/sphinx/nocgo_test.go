//go:build !cgo || nosphinx

package sphinx

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
)

// Without cgo the engine reports itself unavailable, saying what to do.
func TestUnavailableWithoutCgo(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := New(ctx, Config{}, []string{"where is my order"}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	require.ErrorIs(t, err, pipeline.ErrUnavailable)
	require.ErrorIs(t, err, ErrNoCgo)
	require.ErrorContains(t, err, "libpocketsphinx-dev")
}
