package sentence

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHardCutSmallMaxLen: with MaxLen shorter than a character (1-3
// bytes for a 3-byte one), the hard cut walks back from MaxLen to the
// character's start at 0 and gives up: text without a space then grows
// without bound, the very thing the hard cut is there to prevent.
func TestHardCutSmallMaxLen(t *testing.T) {
	for _, maxLen := range []int{1, 2} {
		s := Splitter{MaxLen: maxLen}
		var got []Sentence
		for range 100 {
			got = append(got, s.Feed("字")...)
		}
		require.LessOrEqual(t, len(s.buf), hardLimit*maxLen+len("字"), "MaxLen %d: buffer bounded", maxLen)
		got = append(got, s.Flush()...)
		require.Equal(t, strings.Repeat("字", 100), strings.Join(texts(got), ""))
	}
}

// TestFullwidthStopRun: a run of stops ("？！", "？？", "。。。") ends one
// sentence, as "?!" does; it was cut after its first stop, and each
// further stop went to the engine as a sentence of its own (nothing to
// say: a remote engine is asked to speak "！").
func TestFullwidthStopRun(t *testing.T) {
	for in, want := range map[string][]string{
		"真的吗？！好的。":  {"真的吗？！", "好的。"},
		"什么？？好的。":   {"什么？？", "好的。"},
		"好。。。然后呢？":  {"好。。。", "然后呢？"},
		"真的吗？！」好的。": {"真的吗？！」", "好的。"},
	} {
		var s Splitter
		var got []Sentence
		for _, r := range in { // streamed a character at a time
			got = append(got, s.Feed(string(r))...)
		}
		require.Equal(t, want, texts(append(got, s.Flush()...)), in)
	}
}
