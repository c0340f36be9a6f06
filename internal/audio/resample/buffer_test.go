package resample

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBufferNotKeptAfterBigChunk: a resampler keeps its input in a buffer
// it reuses. One chunk far larger than a stream's frames (a server-turn
// session's client may send a single message of -max-message-bytes,
// 256 KiB: 128 Ki samples, 512 KiB as float32) grew that buffer for the
// rest of the stream, which lasts as long as the session (hours, for a
// call). After a normal chunk the buffer must be of a normal chunk's size
// again, and the output the same as without the big chunk's detour.
func TestBufferNotKeptAfterBigChunk(t *testing.T) {
	for _, pr := range []struct{ in, out int }{{44100, 16000}, {22050, 16000}, {24000, 16000}} {
		r, err := New(pr.in, pr.out)
		require.NoError(t, err)
		one := r.Clone()
		big := make([]int16, 128<<10)
		for i := range big {
			big[i] = int16(i * 7919)
		}
		frame := big[:pr.in/50] // 20 ms
		got := r.Process(nil, big)
		got = r.Process(got, frame)
		const most = 16 << 10 // samples: far more than a normal frame needs
		require.LessOrEqual(t, cap(r.buf), most, "%d Hz: input buffer kept after a big chunk", pr.in)
		got = r.Process(got, frame)
		// The same stream in one chunk: the buffer's size changes nothing.
		want := one.Process(nil, append(append(append([]int16(nil), big...), frame...), frame...))
		require.Equal(t, want, got, "%d Hz", pr.in)
	}
}
