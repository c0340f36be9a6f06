package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestSwitchToServerTurnsEndsStreamingRequests: in server mode a frame
// names no request, so a client-turn request still receiving audio when
// the session switches could never send its final frame: it waited for
// its deadline (here 20 s) and ended deadline_exceeded. It ends at the
// switch with bad_message, its terminal; a request whose final frame had
// come is answered as usual.
func TestSwitchToServerTurnsEndsStreamingRequests(t *testing.T) {
	pcfg := pipeline.Config{}
	h := newHarness(t, &fakeStages{}, pcfg, session.Config{MaxBudget: 20 * time.Second, Detector: scripted(strings.Repeat(".", 10))})
	c := h.dial()
	dl := time.Now().Add(20 * time.Second)
	c.audio("streaming", 0, false, dl)
	c.audio("done", 0, true, dl)
	c.sendText(`{"type":"session.update","turnDetection":{"mode":"server"}}`)
	got := map[string]protocol.ServerMessage{}
	for len(got) < 2 {
		m := c.next()
		if protocol.Terminal(m.Type) {
			require.NotContains(t, got, m.RequestID, "a second terminal for %s", m.RequestID)
			got[m.RequestID] = m
		}
	}
	e := errorOf(t, got["streaming"])
	require.Equal(t, protocol.CodeBadMessage, e.Code, e.Message)
	require.Contains(t, e.Message, "server turns")
	resultOf(t, got["done"])
	require.Less(t, time.Until(dl), 20*time.Second)
	require.Greater(t, time.Until(dl), 10*time.Second, "ended at the switch, not at its deadline")
}
