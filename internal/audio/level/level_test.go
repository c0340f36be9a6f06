package level_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/level"
)

func TestPower(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []int16
		want  float64
	}{
		{"empty", nil, 0},
		{"silence", make([]int16, 160), 0},
		{"a DC offset carries no sound", []int16{1000, 1000, 1000, 1000}, 0},
		{"full-scale square wave", []int16{-32768, -32768, 32767, 32767}, 0.99997},
		{"half scale about an offset", []int16{16384 + 100, -16384 + 100}, 0.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.InDelta(t, tc.want, level.Power(tc.frame), 1e-4)
		})
	}
}
