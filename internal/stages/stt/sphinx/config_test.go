package sphinx

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The decoder's command line: the search setting's options, then the
// caller's, each option once with its last value, so that -stt.sphinx-args
// can undo any one of FastArgs.
func TestDecoderArgs(t *testing.T) {
	model := []string{"-hmm", DefaultModelDir, "-dict", DefaultDict, "-samprate", "16000"}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"default is PocketSphinx's own", Config{}, model},
		{"fast", Config{Search: SearchFast}, append(append([]string{}, model...), FastArgs...)},
		{"full without second pass", Config{Search: SearchFull, NoFwdflat: true}, append(append([]string{}, model...), "-fwdflat", "no")},
		{"args override fast in place", Config{Search: SearchFast, Args: []string{"-maxhmmpf", "30000", "-lw", "8"}},
			append(append(append([]string{}, model...), "-maxhmmpf", "30000"), append(FastArgs[2:], "-lw", "8")...)},
		{"args override the model", Config{Search: SearchFull, Args: []string{"-samprate", "8000"}},
			[]string{"-hmm", DefaultModelDir, "-dict", DefaultDict, "-samprate", "8000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.cfg.withDefaults().decoderArgs())
		})
	}
}

func TestSearchSettingValidated(t *testing.T) {
	err := Config{Search: "quick"}.withDefaults().validate()
	require.ErrorContains(t, err, `unknown search setting "quick"`)
	for _, s := range []string{"", SearchFull, SearchFast} {
		err := Config{Search: s}.withDefaults().validate()
		if err != nil { // only possible here without the model files
			require.NotContains(t, err.Error(), "search setting", s)
		}
	}
}
