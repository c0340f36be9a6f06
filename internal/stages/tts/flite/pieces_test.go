//go:build cgo && !noflite

package flite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/tts/speech"
)

// Flite analyses a whole piece before its first audio callback, the
// first moment it looks at the context, so the piece bounds how late a
// cancellation is seen. A piece of ordinary text (maxPiece bytes) is some
// 50 words; a sentence of numbers the same length is several hundred
// (each digit of "5551234567" is a word), which took Flite 1-2 s to
// analyse here, against ~100 ms for text. The words Flite had analysed
// when it first called back measure that work, deterministically.
func TestNumbersStopInTime(t *testing.T) {
	nums := make([]string, 18)
	for i := range nums {
		nums[i] = fmt.Sprintf("555%07d", 1234567+i*1111111)
	}
	text := "Your order numbers are " + strings.Join(nums, ", ") + "."
	require.Less(t, len(text), 250, "one sentence for the splitter")

	e := newEngine(t, Config{})
	ordinary := strings.Repeat("Your order shipped yesterday, ", 10) // 300 bytes
	analysed := func(text string) (int, time.Duration) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		res, err := e.Synthesize(ctx, speech.Request{Text: text, SampleRate: 16000}, func([]int16) { cancel() })
		require.ErrorIs(t, err, context.Canceled)
		return len(res.Words), time.Since(start)
	}
	base, baseTook := analysed(ordinary)
	n, took := analysed(text)
	t.Logf("words analysed before the first look at the context: ordinary %d (%v), numbers %d (%v)", base, baseTook, n, took)
	require.LessOrEqual(t, n, 2*base, "a sentence of numbers holds Flite far longer than a piece of text before it sees a cancel")
}
