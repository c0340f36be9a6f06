package session_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestBadInputSessionSurvives sends each kind of bad input and checks the
// error names the problem and the session still answers.
func TestBadInputSessionSurvives(t *testing.T) {
	future := protocol.Millis(time.Now().Add(time.Minute))
	hdr := func(h string, pcm []byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(h)))
		return append(append(b, h...), pcm...)
	}
	tests := []struct {
		name    string
		text    string
		binary  []byte
		code    protocol.Code
		mention string
		id      string // requestId of the error, "" for session-level errors
	}{
		{name: "malformed JSON", text: `{"type":"ping"`, code: protocol.CodeBadMessage, mention: "malformed JSON"},
		{name: "unknown type", text: `{"type":"launch"}`, code: protocol.CodeBadMessage, mention: `unknown message type "launch"`},
		{name: "no type", text: `{"requestId":"r1"}`, code: protocol.CodeBadMessage, mention: `no "type"`},
		{name: "unknown field", text: `{"type":"ping","clientTime":1,"extra":true}`, code: protocol.CodeBadMessage, mention: "unknown field"},
		{name: "short binary", binary: []byte{0, 0}, code: protocol.CodeBadMessage, mention: "shorter than its 4-byte header"},
		{name: "header length too big", binary: hdr(`{"type":"audio"}`, nil)[:10], code: protocol.CodeBadMessage, mention: "bad header length"},
		{name: "zero header length", binary: []byte{0, 0, 0, 0, 1, 2}, code: protocol.CodeBadMessage, mention: "bad header length 0"},
		{name: "invalid requestId", binary: hdr(fmt.Sprintf(`{"type":"audio","requestId":"bad id!","deadlineAt":%d,"seq":0}`, future), nil), code: protocol.CodeBadMessage, mention: "invalid requestId"},
		{name: "requestId too long", binary: hdr(fmt.Sprintf(`{"type":"audio","requestId":"%s","deadlineAt":%d,"seq":0}`, strings.Repeat("a", 65), future), nil), code: protocol.CodeBadMessage, mention: "invalid requestId"},
		{name: "non-integer deadlineAt", binary: hdr(`{"type":"audio","requestId":"r1","deadlineAt":17.5,"seq":0}`, nil), code: protocol.CodeBadMessage, mention: "deadlineAt", id: "r1"},
		{name: "string deadlineAt", text: `{"type":"audio","requestId":"r1","deadlineAt":"soon","seq":0,"audio":""}`, code: protocol.CodeBadMessage, mention: "deadlineAt", id: "r1"},
		{name: "negative deadlineAt", binary: hdr(`{"type":"audio","requestId":"r1","deadlineAt":-5,"seq":0}`, nil), code: protocol.CodeBadMessage, mention: "deadlineAt must be a positive integer", id: "r1"},
		{name: "odd PCM byte count", binary: hdr(fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"seq":0}`, future), []byte{1, 2, 3}), code: protocol.CodeBadAudio, mention: "odd PCM byte count 3", id: "r1"},
		{name: "unsupported sample rate", binary: hdr(fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"seq":0,"sampleRate":12345}`, future), nil), code: protocol.CodeBadAudio, mention: "unsupported sampleRate 12345", id: "r1"},
		{name: "unsupported session rate", text: `{"type":"session.update","sampleRate":11000}`, code: protocol.CodeBadAudio, mention: "unsupported sampleRate 11000"},
		{name: "bad base64", text: fmt.Sprintf(`{"type":"audio","requestId":"r1","deadlineAt":%d,"seq":0,"audio":"***"}`, future), code: protocol.CodeBadAudio, mention: "base64", id: "r1"},
		{name: "first frame not seq 0", binary: hdr(fmt.Sprintf(`{"type":"audio","requestId":"r9","deadlineAt":%d,"seq":3}`, future), nil), code: protocol.CodeBadMessage, mention: "starts at seq 0"},
		{name: "cancel of unknown request", text: `{"type":"cancel","requestId":"nope"}`, code: protocol.CodeBadMessage, mention: `no request "nope" in flight`},
		{name: "cancel with bad id", text: `{"type":"cancel","requestId":""}`, code: protocol.CodeBadMessage, mention: "invalid requestId"},
	}
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.binary != nil {
				c.sendBinary(tt.binary)
			} else {
				c.sendText(tt.text)
			}
			e := errorOf(t, c.next())
			require.Equal(t, tt.code, e.Code)
			require.Contains(t, e.Message, tt.mention)
			require.Equal(t, tt.id, e.RequestID)
			require.Empty(t, c.ping(), "the session still answers, with nothing else queued")
		})
	}

	t.Run("seq gap ends the request", func(t *testing.T) {
		dl := time.Now().Add(5 * time.Second)
		c.audio("g1", 0, false, dl)
		c.audio("g1", 2, false, dl)
		e := errorOf(t, c.next())
		require.Equal(t, protocol.CodeBadMessage, e.Code)
		require.Equal(t, "g1", e.RequestID)
		require.Contains(t, e.Message, "seq gap")
		c.audio("g1", 3, true, dl) // the rest of the broken request is ignored
		require.Empty(t, c.ping())
	})

	t.Run("text frame audio works", func(t *testing.T) {
		b, err := protocol.EncodeTextAudio(protocol.AudioHeader{RequestID: "t1", DeadlineAt: protocol.Millis(time.Now().Add(3 * time.Second)), Final: true}, []int16{1, 2, 3})
		require.NoError(t, err)
		c.sendText(string(b))
		term, _ := c.terminal("t1")
		require.Equal(t, "Your order ships today.", resultOf(t, term).Answer)
		_ = base64.StdEncoding
	})
}

// TestErrorCodes reaches every error code of the protocol from its cause.
func TestErrorCodes(t *testing.T) {
	type setup struct {
		fake  *fakeStages
		scfg  session.Config
		drive func(t *testing.T, c *client, h *harness) protocol.ErrorMessage
	}
	// oneShot sends a one-frame request and returns its terminal error.
	oneShot := func(t *testing.T, c *client, _ *harness) protocol.ErrorMessage {
		c.audio("r1", 0, true, time.Now().Add(3*time.Second))
		term, _ := c.terminal("r1")
		return errorOf(t, term)
	}
	blockSTT := func() *fakeStages {
		return &fakeStages{started: make(chan string, 8), finish: blockUntilDone[string]}
	}
	tests := map[protocol.Code]setup{
		protocol.CodeBadMessage: {fake: &fakeStages{}, drive: func(t *testing.T, c *client, _ *harness) protocol.ErrorMessage {
			c.sendText("not json")
			return errorOf(t, c.next())
		}},
		protocol.CodeBadAudio: {fake: &fakeStages{start: func(context.Context) error {
			return fmt.Errorf("decode: %w", pipeline.ErrBadAudio)
		}}, drive: oneShot},
		protocol.CodeDeadlineExceeded: {fake: &fakeStages{}, drive: func(t *testing.T, c *client, _ *harness) protocol.ErrorMessage {
			c.audio("r1", 0, true, time.Now().Add(-time.Second))
			return errorOf(t, c.next())
		}},
		protocol.CodeCancelled: {fake: blockSTT(), drive: func(t *testing.T, c *client, h *harness) protocol.ErrorMessage {
			c.audio("r1", 0, true, time.Now().Add(3*time.Second))
			<-h.fake.started
			c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "r1"})
			term, _ := c.terminal("r1")
			return errorOf(t, term)
		}},
		protocol.CodeReplaced: {fake: blockSTT(), drive: func(t *testing.T, c *client, h *harness) protocol.ErrorMessage {
			c.audio("r1", 0, true, time.Now().Add(3*time.Second))
			<-h.fake.started
			c.audio("r1", 0, true, time.Now().Add(3*time.Second))
			term, _ := c.terminal("r1")
			return errorOf(t, term)
		}},
		protocol.CodeInterrupted: {fake: blockSTT(), drive: func(t *testing.T, c *client, h *harness) protocol.ErrorMessage {
			s := c.serverTurns("")
			pcm, _, ends := conversation(t, 600, "where is my order", "i want to return my shoes")
			s.send(pcm[:ends[0]+16*600])
			<-h.fake.started
			s.send(pcm[ends[0]+16*600:])
			term, _ := c.terminal("t-1")
			e := errorOf(t, term)
			turnOf(t, c, "t-2") // the new turn proceeds to its own terminal
			return e
		}},
		protocol.CodeOverloaded: {fake: blockSTT(), scfg: session.Config{MaxInFlight: 1}, drive: func(t *testing.T, c *client, h *harness) protocol.ErrorMessage {
			c.audio("r1", 0, true, time.Now().Add(3*time.Second))
			<-h.fake.started
			c.audio("r2", 0, true, time.Now().Add(3*time.Second))
			term, _ := c.terminal("r2")
			return errorOf(t, term)
		}},
		protocol.CodeRateLimited: {fake: &fakeStages{start: func(context.Context) error {
			return fmt.Errorf("remote stt: %w", pipeline.ErrRateLimited)
		}}, drive: oneShot},
		protocol.CodePolicyBlocked: {fake: &fakeStages{generate: func(context.Context, func(string)) (pipeline.Generation, error) {
			return pipeline.Generation{}, fmt.Errorf("provider said no: %w", pipeline.ErrPolicyBlocked)
		}}, drive: oneShot},
		protocol.CodeUnavailable: {fake: &fakeStages{start: func(context.Context) error {
			return fmt.Errorf("stt engine: %w", pipeline.ErrUnavailable)
		}}, drive: oneShot},
		protocol.CodeInternal: {fake: &fakeStages{classify: func(context.Context, string) (pipeline.Intent, error) {
			return pipeline.Intent{}, errBoom
		}}, drive: oneShot},
	}
	for _, code := range protocol.Codes {
		t.Run(string(code), func(t *testing.T) {
			tt, ok := tests[code]
			require.True(t, ok, "no test reaches code %s", code)
			h := newHarness(t, tt.fake, pipeline.Config{}, tt.scfg)
			c := h.dial()
			e := tt.drive(t, c, h)
			require.Equal(t, code, e.Code, "message: %s", e.Message)
			require.NotEmpty(t, e.Message)
			require.NotContains(t, e.Message, "boom", "internal details stay internal")
			require.Empty(t, c.ping(), "the session survives")
		})
	}
}
