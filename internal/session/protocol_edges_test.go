package session_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestBinaryAudioFieldNamesItsRequest: a binary frame's header that
// carries "audio" (a field of text frames only) is invalid, and it names
// a request: per protocol.md ("An audio message whose header names a
// request ... but is otherwise invalid ... is that request's error"), it
// ends r1 in flight with bad_message carrying r1, as every other invalid
// header naming r1 does. It was a session-level error that dropped the
// header, and r1 stayed in flight (to its deadline, or to a later frame
// that hit a seq gap).
func TestBinaryAudioFieldNamesItsRequest(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	dl := time.Now().Add(5 * time.Second)
	c.audio("r1", 0, false, dl)
	hdr := fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"seq":1,"audio":"AAAA"}`, protocol.Millis(dl))
	c.sendBinary(append(binary.BigEndian.AppendUint32(nil, uint32(len(hdr))), hdr...))
	e := errorOf(t, c.next())
	require.Equal(t, protocol.CodeBadMessage, e.Code, e.Message)
	require.Equal(t, "r1", e.RequestID, "the error of the request the header names: %s", e.Message)
	// r1 has had its terminal: its next frame is ignored.
	c.audio("r1", 2, true, dl)
	require.Empty(t, c.ping())
}

// TestStreamUnreadableFrameIsNotSeqZero: in server-turn mode, a frame
// whose seq cannot be read (a binary frame of 2 bytes) is a session-level
// bad_message and does not count in the sequence, as streamError says
// ("a frame whose seq could be read still counts"). At the start of a
// stream its zero-valued header was taken for seq 0, so the client's real
// seq 0 frame drew a second, spurious "seq gap" bad_message (and, with a
// turn being spoken, would have ended that turn).
func TestStreamUnreadableFrameIsNotSeqZero(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Detector: scripted("")})
	c := h.dial()
	c.sendText(`{"type":"session.update","turnDetection":{"mode":"server"}}`)
	require.Empty(t, c.ping())
	c.sendBinary([]byte{1, 2})
	msgs := c.ping()
	require.Len(t, msgs, 1)
	require.Equal(t, protocol.CodeBadMessage, errorOf(t, msgs[0]).Code)
	c.sendBinary(protocol.EncodeStreamAudio(nil, 0, 0, make([]byte, 640)))
	require.Empty(t, c.ping(), "seq 0 is the stream's first frame")
}

// TestSubprotocolTokensAsRFC6455: Sec-WebSocket-Protocol is a
// comma-separated list of tokens (RFC 6455 4.1, 1#token). The server's
// check split it on spaces too, so "voiced.v1 x" counted as offering
// voiced.v1 and passed; the WebSocket library, which splits on commas,
// then found no offered subprotocol it speaks and answered 101 without
// Sec-WebSocket-Protocol: a client that offered one must then fail the
// connection (RFC 6455 4.1), with none of the 400's explanation.
func TestSubprotocolTokensAsRFC6455(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	ctx, cancel := context.WithTimeout(h.ctx, testTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.http.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", "voiced.v1 x")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		require.NotEmpty(t, resp.Header.Get("Sec-WebSocket-Protocol"),
			"101 without a subprotocol for a client that offered one")
		return
	}
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}
