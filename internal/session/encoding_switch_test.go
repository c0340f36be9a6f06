package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestEncodingChangedWithinRequest: a client-turn request keeps the rate
// of its first frame, and its encoding too. A session.update that changed
// the inbound encoding while a request streamed made the server read the
// request's next frames in the new encoding but at the request's old
// rate: 16 kHz PCM then μ-law bytes went to the recogniser as 16 kHz
// samples (8 kHz audio played at double speed), and the other way round
// 8 kHz μ-law then PCM bytes. Like a sampleRate change within a request,
// it is bad_audio, the request's terminal; the session goes on.
func TestEncodingChangedWithinRequest(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		payload             []byte // the frame sent after the update
	}{
		{"pcm16 to mulaw", `{"type":"session.update","encoding":"pcm16"}`, `{"type":"session.update","encoding":"mulaw"}`,
			[]byte{mulaw.Silence, mulaw.Silence, mulaw.Silence}},
		{"mulaw to pcm16", `{"type":"session.update","encoding":"mulaw"}`, `{"type":"session.update","encoding":"pcm16"}`,
			make([]byte, 320)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
			c := h.dial()
			c.sendText(tc.before)
			require.Empty(t, c.ping())
			dl := protocol.Millis(time.Now().Add(5 * time.Second))
			b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1", DeadlineAt: dl}, nil)
			require.NoError(t, err)
			c.sendBinary(append(b, make([]byte, 160)...)) // seq 0: 160 bytes, whole samples in either encoding
			c.sendText(tc.after)
			b, err = protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1", DeadlineAt: dl, Seq: 1, Final: true}, nil)
			require.NoError(t, err)
			c.sendBinary(append(b, tc.payload...))
			term, _ := c.terminal("r1")
			e := errorOf(t, term)
			require.Equal(t, protocol.CodeBadAudio, e.Code, e.Message)
			require.Contains(t, e.Message, "encoding")

			// The next request is read in the new encoding.
			b, err = protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r2", DeadlineAt: dl, Final: true}, nil)
			require.NoError(t, err)
			c.sendBinary(append(b, tc.payload...))
			term, _ = c.terminal("r2")
			resultOf(t, term)
		})
	}
}
