package session_test

import (
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestTwilioBadFormatLongEncoding: a start whose mediaFormat names an
// encoding of some length (a plausible 41-byte MIME type with
// parameters, or 4000 bytes from a peer that has not authenticated) is
// closed with 1003, as protocol.md says. The close reason quoted the
// encoding whole; coder/websocket refuses a reason over 123 bytes, so no
// close frame was sent at all (the client saw the connection drop,
// 1006), and the "session ended" line logged the peer's text whole, at
// info level, in the writer's error.
func TestTwilioBadFormatLongEncoding(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: []string{"secret"}})
	for _, enc := range []string{"audio/L16;rate=16000;channels=1;endian=le", strings.Repeat("x", 4000)} {
		tw := dialTwilio(t, h, "")
		tw.send(map[string]any{"event": "start", "streamSid": tw.sid, "start": map[string]any{
			"accountSid": "AC0123", "streamSid": tw.sid, "callSid": "CA0123", "tracks": []string{"inbound"},
			"mediaFormat": map[string]any{"encoding": enc, "sampleRate": 16000, "channels": 1},
		}})
		for range tw.msgs {
		}
		<-tw.done
		require.Equal(t, websocket.StatusUnsupportedData, websocket.CloseStatus(tw.closeErr), "encoding of %d bytes: %v", len(enc), tw.closeErr)
	}
}
