package intent

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/domain"
)

var finiteIntents = []domain.Intent{
	{Name: "greeting", Examples: []string{"hi there", "hello", "good morning"}},
	{Name: "goodbye", Examples: []string{"goodbye", "bye now", "see you later"}},
	{Name: "refund", Examples: []string{"i want my money back", "refund my order", "how do refunds work"}},
	{Name: "hours", Examples: []string{"when are you open", "opening hours", "are you open on sunday"}},
}

// TestNonFiniteConfigRefused: New checked Threshold, Margin,
// OutOfScopeFloor and AlternativeScale with comparisons NaN passes, and
// UnknownWeight not at all: -intent.threshold NaN answered gibberish with
// an in-scope intent, and -intent.alt-scale Inf made the confidence NaN,
// which no terminal message can carry (json.Marshal fails). The With*
// variants used for tuning refuse them too.
func TestNonFiniteConfigRefused(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tt := range []struct {
		flag string
		cfg  Config
	}{
		{"-intent.threshold NaN", Config{Threshold: nan}},
		{"-intent.oos-floor NaN", Config{OutOfScopeFloor: nan}},
		{"-intent.unknown-weight NaN", Config{UnknownWeight: nan}},
		{"-intent.unknown-weight Inf", Config{UnknownWeight: inf}},
		{"-intent.alt-scale NaN", Config{AlternativeScale: nan}},
		{"-intent.alt-scale Inf", Config{AlternativeScale: inf}},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			cfg := tt.cfg
			cfg.CalibrationFolds, cfg.Models, cfg.Epochs = -1, 1, 2 // quick
			_, err := New(t.Context(), finiteIntents, cfg)
			require.Error(t, err, "%s accepted silently", tt.flag)
		})
	}
}

func TestNonFiniteTuningRefused(t *testing.T) {
	c, err := New(t.Context(), finiteIntents, Config{CalibrationFolds: -1, Models: 1, Epochs: 2})
	require.NoError(t, err)
	nan := math.NaN()
	_, err = c.WithOutOfScope(nan, 0)
	require.Error(t, err)
	_, err = c.WithUnknown(nan, 0)
	require.Error(t, err)
	_, err = c.WithUnknown(0, nan)
	require.Error(t, err)
	_, err = c.WithAlternatives(3, math.Inf(1))
	require.Error(t, err)
}
