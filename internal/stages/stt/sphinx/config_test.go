package sphinx

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The decoder's command line is the model and the caller's options; each
// search's options are its setting's, then the caller's, each option once
// with its last value, so that -stt.sphinx-args can undo any one of them.
// Every setting sets the same options, so that a decoder's second search
// inherits none of the first's.
func TestDecoderArgs(t *testing.T) {
	model := []string{"-hmm", DefaultModelDir, "-dict", DefaultDict, "-samprate", "16000"}
	quick := []string{"-maxhmmpf", "3000", "-maxwpf", "10", "-fwdflatefwid", "2", "-fwdflatsfwin", "10", "-fwdflat", "no"}
	tests := []struct {
		name    string
		cfg     Config
		search  string
		decoder []string
		want    []string
	}{
		{"default search is fast", Config{}, DefaultSearch, model, FastArgs},
		{"full is PocketSphinx's own", Config{}, SearchFull, model,
			[]string{"-maxhmmpf", "30000", "-maxwpf", "-1", "-fwdflatefwid", "4", "-fwdflatsfwin", "25", "-fwdflat", "yes"}},
		{"quick is fast without a second pass", Config{}, SearchQuick, model, quick},
		{"no-fwdflat applies to Search", Config{Search: SearchFull, NoFwdflat: true}, SearchFull, model,
			[]string{"-maxhmmpf", "30000", "-maxwpf", "-1", "-fwdflatefwid", "4", "-fwdflatsfwin", "25", "-fwdflat", "no"}},
		{"no-fwdflat leaves the busy search alone", Config{Search: SearchFull, BusySearch: SearchFast, NoFwdflat: true}, SearchFast, model, FastArgs},
		{"args override the setting in place", Config{Args: []string{"-maxhmmpf", "30000", "-lw", "8"}}, SearchFast,
			append(append([]string{}, model...), "-maxhmmpf", "30000", "-lw", "8"),
			append(append([]string{"-maxhmmpf", "30000"}, FastArgs[2:]...), "-lw", "8")},
		{"args override the model", Config{Args: []string{"-samprate", "8000"}}, SearchQuick,
			[]string{"-hmm", DefaultModelDir, "-dict", DefaultDict, "-samprate", "8000"}, append(quick, "-samprate", "8000")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg.withDefaults()
			require.Equal(t, tt.decoder, cfg.decoderArgs())
			require.Equal(t, tt.want, cfg.searchArgs(tt.search))
		})
	}
	// Every setting's options have the same names.
	names := func(args []string) (n []string) {
		for i := 0; i < len(args); i += 2 {
			n = append(n, args[i])
		}
		return n
	}
	for _, s := range Searches {
		require.Equal(t, names(fullArgs), names(searchPreset(s)), s)
	}
}

func TestSearchSettingValidated(t *testing.T) {
	err := Config{Search: "slow"}.withDefaults().validate()
	require.ErrorContains(t, err, `unknown search setting "slow"`)
	err = Config{BusySearch: "slow"}.withDefaults().validate()
	require.ErrorContains(t, err, `unknown search setting "slow"`)
	for _, s := range append([]string{""}, Searches...) {
		err := Config{Search: s, BusySearch: s}.withDefaults().validate()
		if err != nil { // only possible here without the model files
			require.NotContains(t, err.Error(), "search setting", s)
		}
	}
}

// A decoder's searches share its acoustic model, and the search made last
// decides whether the model keeps an utterance's features for a second
// pass: searches with one come last.
func TestOrderSearches(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"default", Config{}, []string{SearchQuick, SearchFast}},
		{"busy search has the second pass", Config{Search: SearchQuick, BusySearch: SearchFull}, []string{SearchQuick, SearchFull}},
		{"one search", Config{Search: SearchFast, BusySearch: SearchFast}, []string{SearchFast}},
		{"no-fwdflat makes Search single-pass", Config{Search: SearchFull, BusySearch: SearchFast, NoFwdflat: true}, []string{SearchFull, SearchFast}},
		{"both single-pass", Config{Search: SearchQuick, BusySearch: SearchFull, Args: []string{"-fwdflat", "no"}}, []string{SearchQuick, SearchFull}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.cfg.withDefaults().orderSearches())
		})
	}
}

// ResolvedSpeakerWarp is the warp the engine applies: the defaults, and
// none with KeepCMN, a warp of 1 or a negative one.
func TestResolvedSpeakerWarp(t *testing.T) {
	tests := []struct {
		cfg         Config
		warp, pitch float64
	}{
		{Config{}, DefaultSpeakerWarp, DefaultWarpPitch},
		{Config{SpeakerWarp: 1.2, WarpPitch: 180}, 1.2, 180},
		{Config{SpeakerWarp: -1}, -1, DefaultWarpPitch},
		{Config{SpeakerWarp: 1}, -1, DefaultWarpPitch},
		{Config{KeepCMN: true}, -1, DefaultWarpPitch},
	}
	for _, tt := range tests {
		warp, pitch := tt.cfg.ResolvedSpeakerWarp()
		require.Equal(t, tt.warp, warp, "%+v", tt.cfg)
		require.Equal(t, tt.pitch, pitch, "%+v", tt.cfg)
	}
}

// A negative duration is refused at startup: a negative CMN window made
// every utterance's first Write panic (a slice bound), a negative longest
// utterance failed every one as too long.
func TestNegativeDurationsRefused(t *testing.T) {
	for _, cfg := range []Config{
		{CMNWindow: -time.Second},
		{MaxUtterance: -time.Second},
		{PartialEvery: -time.Millisecond},
		{MaxWait: -time.Millisecond},
	} {
		require.ErrorContains(t, cfg.withDefaults().validate(), "is negative", "%+v", cfg)
	}
}
