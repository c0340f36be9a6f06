//go:build !cgo

package vad

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnavailableWithoutCgo(t *testing.T) {
	_, err := NewWebRTC(16000, ModeDefault)
	require.ErrorIs(t, err, ErrUnavailable)
	_, err = New(16000, Options{})
	require.ErrorIs(t, err, ErrUnavailable)
	require.False(t, Available)
}
