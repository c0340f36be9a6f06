package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/stt/sphinx"
)

// The general model's quantised sendump becomes float mixture weights of
// the model's shape (5126 senones, 3 feature streams, 128 densities), each
// mixture summing to one, in SphinxTrain's binary format: the header, the
// byte-order mark, the dimensions, the count, then the floats.
func TestSendumpToMixtureWeights(t *testing.T) {
	f, err := os.Open(filepath.Join(sphinx.DefaultModelDir, "sendump"))
	if err != nil {
		t.Skip("pocketsphinx-en-us not installed")
	}
	defer f.Close()
	m, err := readSendump(f)
	require.NoError(t, err)
	require.Equal(t, []int{5126, 3, 128}, []int{m.senones, m.features, m.densities})
	for i := 0; i < len(m.w); i += m.densities {
		var sum float64
		for _, x := range m.w[i : i+m.densities] {
			require.True(t, x > 0 && x <= 1, "weight %v", x)
			sum += float64(x)
		}
		require.InDelta(t, 1, sum, 1e-4)
	}

	data := m.s3()
	hdr, body, ok := bytes.Cut(data, []byte("endhdr\n"))
	require.True(t, ok)
	require.True(t, bytes.HasPrefix(hdr, []byte("s3\nversion 1.0\n")))
	require.Zero(t, (len(hdr)+len("endhdr\n"))%4, "the data starts on a 4-byte boundary")
	var head [5]uint32
	require.NoError(t, binary.Read(bytes.NewReader(body), binary.LittleEndian, &head))
	require.Equal(t, [5]uint32{0x11223344, 5126, 3, 128, 5126 * 3 * 128}, head)
	require.Len(t, body, 20+4*len(m.w))
	first := math.Float32frombits(binary.LittleEndian.Uint32(body[20:]))
	require.Equal(t, m.w[0], first)
}

func TestSendumpErrors(t *testing.T) {
	str := func(s string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(s)+1))
		return append(append(b, s...), 0)
	}
	end := binary.LittleEndian.AppendUint32(nil, 0)
	dims := func(d, s uint32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, d), s)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "sendump header"},
		{"clustered", append(str("cluster_count 16"), end...), "clustered"},
		{"no features", append(append(str("feature_count 0"), end...), dims(2, 2)...), "0 features"},
		{"short data", append(append(str("feature_count 1"), end...), dims(2, 2)...), "sendump data"},
		{"big-endian", []byte{0, 0, 0, 1}, "not little-endian"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readSendump(bytes.NewReader(tt.data))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// The adaptation speaks each training sentence once, in spoken form, and
// leaves out those with a word it cannot align (no pronunciation).
func TestTrainingSentences(t *testing.T) {
	dict := map[string]bool{"where": true, "is": true, "my": true, "order": true, "twenty": true, "dollars": true, "it": true, "costs": true}
	corpus := []string{
		"Where is my order?",
		"where is my order",
		"It costs $20.",
		"Where is my zorblax?",
		"@class product lamp sofa",
	}
	got, skipped, err := trainingSentences(corpus, dict)
	require.NoError(t, err)
	require.Equal(t, []string{"where is my order", "it costs twenty dollars"}, got)
	require.Equal(t, 1, skipped)
}
