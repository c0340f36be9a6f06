package session_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

// slowLink is a client connection that receives at most rate bytes a
// second, as a client on a slow link does: its reads are held back (the
// delay is the point).
type slowLink struct {
	net.Conn
	rate  float64 // bytes a second
	mu    sync.Mutex
	start time.Time
	got   int64
}

func (c *slowLink) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p[:min(len(p), 2048)])
	c.mu.Lock()
	if c.start.IsZero() {
		c.start = time.Now()
	}
	c.got += int64(n)
	due := c.start.Add(time.Duration(float64(c.got) / c.rate * float64(time.Second)))
	c.mu.Unlock()
	time.Sleep(time.Until(due))
	return n, err
}

// dialSlowLink is dial through a link that carries rate bytes a second
// to the client, with a small receive buffer so that what it has not read
// waits in the server's kernel, as on a real slow link.
func (h *harness) dialSlowLink(rate float64) *client {
	h.t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = setRcvbuf(fd, 4<<10) }); err != nil {
			return err
		}
		return serr
	}}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &slowLink{Conn: conn, rate: rate}, nil
		},
	}}
	h.t.Cleanup(hc.CloseIdleConnections)
	return h.dialWith("ws"+strings.TrimPrefix(h.http.URL, "http"), &websocket.DialOptions{HTTPClient: hc})
}

// TestSpeechPacedToASlowLink: an answer of about 20 s of speech, whose
// audio (about 600 KiB at 16 kHz) a client receiving 100 KiB a second
// takes over 6 s to get. Its terminal message comes after all of it on
// the connection, so when the whole answer was queued at once (it is
// synthesised in a fraction of a second), the terminal, written in time,
// had not reached this client 10 s later. Paced to the link, the audio
// stops where the link could not carry more in time (speech_truncated)
// and the terminal arrives by the deadline.
func TestSpeechPacedToASlowLink(t *testing.T) {
	answer := strings.Repeat("Your order left our warehouse this morning and should arrive on Friday. ", 12)
	fake := &fakeStages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(answer)
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	h := speechHarness(t, fake, pipeline.Config{})
	c := h.dialSlowLink(100 << 10)
	c.speak("slt", 16000, protocol.SpeechBinary)
	deadline := time.Now().Add(2500 * time.Millisecond)
	c.audio("r1", 0, true, deadline)
	term, before := c.terminal("r1")
	late := time.Since(deadline)
	res := resultOf(t, term)
	samples := checkAudio(t, "r1", 16000, before)
	t.Logf("terminal %v after the deadline; %.1f s of audio, degradation %v", late.Round(time.Millisecond), float64(samples)/16000, res.Degradation)
	require.Positive(t, samples, "some of the answer is spoken")
	require.Contains(t, res.Degradation, "speech_truncated")
	require.Less(t, float64(samples)/16000, 15.0, "not the whole answer: the link could not carry it in time")
	// By the deadline; the bound leaves a loaded machine's reader some
	// room, and this client reads what its kernel acknowledged up to
	// 80 ms later (4 KiB of buffer at 100 KiB/s).
	require.Less(t, late, 500*time.Millisecond, "the terminal reached the client after its deadline")
	require.True(t, slices.ContainsFunc(before, func(m protocol.ServerMessage) bool { return m.Type == protocol.TypeAnswerDelta }))
}
