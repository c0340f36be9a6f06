package sphinx

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The identity transform has the embedded transform's shape, and A = I,
// b = 0, h = 1 in every stream.
func TestIdentityTransform(t *testing.T) {
	tel, err := fs.ReadFile(telephone, "telephone/mllr_matrix")
	require.NoError(t, err)
	ident, err := identityTransform(tel)
	require.NoError(t, err)
	f, g := strings.Fields(string(tel)), strings.Fields(string(ident))
	require.Len(t, g, len(f), "the same number of values")
	require.Equal(t, f[:2], g[:2], "classes and streams")
	at := 2
	for s := 0; at < len(g); s++ {
		n, err := strconv.Atoi(g[at])
		require.NoError(t, err)
		require.Equal(t, f[at], g[at], "stream %d length", s)
		at++
		for r := range n {
			for c := range n {
				want := "0"
				if r == c {
					want = "1"
				}
				assert.Equal(t, want, g[at], "stream %d A[%d][%d]", s, r, c)
				at++
			}
		}
		for range n {
			assert.Equal(t, "0", g[at], "stream %d bias", s)
			at++
		}
		for range n {
			assert.Equal(t, "1", g[at], "stream %d variance scale", s)
			at++
		}
	}
}

func TestIdentityTransformRejectsMalformed(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"two classes", "2\n1\n1\n1\n0\n1\n"},
		{"no streams", "1\n0\n"},
		{"short matrix", "1\n1\n2\n1 0\n0\n"},
		{"trailing values", "1\n1\n1\n1\n0\n1\n7\n"},
		{"not a number", "1\nx\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := identityTransform([]byte(tc.in))
			require.Error(t, err)
		})
	}
	_, err := identityTransform([]byte("1\n1\n1\n0.9\n0.1\n1.2\n"))
	require.NoError(t, err, "a one-value stream")
}

// The transforms are written once to the cache directory, under a name
// made from the embedded transforms in use, and written again if
// removed; a channel not in use has none, and with none in use there is
// no identity transform either.
func TestChannelTransformsCached(t *testing.T) {
	for _, tc := range []struct {
		name string
		use  [numChannels]bool
	}{
		{"telephone", [numChannels]bool{chanNarrow: true}},
		{"second model", [numChannels]bool{chanSecond: true}},
		{"both", [numChannels]bool{chanNarrow: true, chanSecond: true}},
		{"none", [numChannels]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			paths, err := channelTransforms(dir, tc.use)
			require.NoError(t, err)
			transformed := false
			for ch, p := range paths {
				if channel(ch) != chanWide && !tc.use[ch] {
					require.Empty(t, p, "channel %d not in use", ch)
					continue
				}
				transformed = transformed || channel(ch) != chanWide
				if p == "" {
					continue
				}
				require.True(t, strings.HasPrefix(p, dir+string(filepath.Separator)), p)
				require.FileExists(t, p)
				if f := channelFiles[ch]; f.name != "" {
					got, err := os.ReadFile(p)
					require.NoError(t, err)
					embedded, err := fs.ReadFile(f.fs, f.name)
					require.NoError(t, err)
					require.Equal(t, embedded, got)
				}
			}
			if !transformed {
				require.Equal(t, [numChannels]string{}, paths)
				return
			}
			require.NotEmpty(t, paths[chanWide], "a decoder needs the identity transform to come back to")
			require.NoError(t, os.Remove(paths[chanWide]))
			again, err := channelTransforms(dir, tc.use)
			require.NoError(t, err)
			require.Equal(t, paths, again)
			require.FileExists(t, paths[chanWide])
		})
	}
	tel, err := channelTransforms(t.TempDir(), [numChannels]bool{chanNarrow: true})
	require.NoError(t, err)
	both, err := channelTransforms(t.TempDir(), [numChannels]bool{chanNarrow: true, chanSecond: true})
	require.NoError(t, err)
	require.NotEqual(t, filepath.Base(filepath.Dir(tel[chanNarrow])), filepath.Base(filepath.Dir(both[chanNarrow])),
		"a different set of transforms is cached under another name")
}

// Only the general model in the default directory gets the telephone
// transform, which was estimated for it.
func TestTransformsNarrowband(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"defaults", Config{}, true},
		{"general", Config{NarrowbandAcoustic: NarrowbandGeneral}, false},
		{"adapted model", Config{Acoustic: AcousticAdapted}, false},
		{"another model", Config{ModelDir: "/srv/models/en-us-8khz"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.cfg.withDefaults().transformsNarrowband())
		})
	}
	require.Error(t, Config{NarrowbandAcoustic: "landline"}.withDefaults().validate())
}

// Only the general model in the default directory gets the second model,
// whose transform was estimated for it.
func TestSecondModelSetting(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"defaults", Config{}, DefaultSecondModel == SecondSynthetic},
		{"synthetic", Config{SecondModel: SecondSynthetic}, true},
		{"none", Config{SecondModel: SecondNone}, false},
		{"adapted model", Config{SecondModel: SecondSynthetic, Acoustic: AcousticAdapted}, false},
		{"another model", Config{SecondModel: SecondSynthetic, ModelDir: "/srv/models/en-us-8khz"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.cfg.withDefaults().secondModel())
		})
	}
	require.Equal(t, DefaultSecondMargin, Config{}.withDefaults().SecondMargin)
	require.Equal(t, -0.5, Config{SecondMargin: -0.5}.withDefaults().SecondMargin)
	require.Error(t, Config{SecondModel: "robot"}.withDefaults().validate())
	require.Error(t, Config{SecondMargin: math.NaN()}.withDefaults().validate())
}
