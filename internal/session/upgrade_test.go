package session_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// labelValue sums the named metric's series (a histogram counts its
// samples) whose label has value; an empty label sums every series.
func labelValue(t testing.TB, h *harness, name, label, value string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	require.NoError(t, err)
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && !slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool {
				return lp.GetName() == label && lp.GetValue() == value
			}) {
				continue
			}
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return v
}

// TestSubprotocol: voiced.v1 is negotiated when offered, a client offering
// none is served, and one offering only others is refused before the
// upgrade with a body that says what is supported.
func TestSubprotocol(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offer   []string
		want    string // negotiated subprotocol
		refused bool
	}{
		{name: "voiced.v1", offer: []string{protocol.Name}, want: protocol.Name},
		{name: "none", offer: nil, want: ""},
		{name: "unknown only", offer: []string{"foo"}, refused: true},
		{name: "two unknown", offer: []string{"foo", "voiced.v2"}, refused: true},
		{name: "unknown then voiced.v1", offer: []string{"foo", protocol.Name}, want: protocol.Name},
		// Subprotocol names match exactly (RFC 7936): VOICED.V1 is another
		// protocol, refused alone and never the one agreed to, although
		// the WebSocket library matches without case.
		{name: "another case only", offer: []string{"VOICED.V1"}, refused: true},
		{name: "another case first", offer: []string{"Voiced.V1", protocol.Name}, want: protocol.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
			conn, resp, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"),
				&websocket.DialOptions{Subprotocols: tc.offer})
			if tc.refused {
				require.Error(t, err)
				require.NotNil(t, resp)
				require.Equal(t, http.StatusBadRequest, resp.StatusCode)
				body, _ := io.ReadAll(resp.Body)
				require.Contains(t, string(body), "unsupported WebSocket subprotocol "+tc.offer[0])
				require.Contains(t, string(body), "this server speaks voiced.v1")
				require.EqualValues(t, 1, labelValue(t, h, "voiced_session_upgrades_total", "outcome", "refused_protocol"))
				require.EqualValues(t, 0, labelValue(t, h, "voiced_session_upgrades_total", "outcome", "accepted"))
				return
			}
			require.NoError(t, err)
			defer conn.CloseNow()
			require.Equal(t, tc.want, conn.Subprotocol())
			c := &client{h: h, conn: conn}
			require.Equal(t, protocol.TypeSessionReady, c.next().Type)
			require.EqualValues(t, 1, labelValue(t, h, "voiced_session_upgrades_total", "outcome", "accepted"))
			conn.Close(websocket.StatusNormalClosure, "")
		})
	}
}

// TestSubprotocolHeaderForms: the offer may come as one comma-separated
// header or several headers, as RFC 6455 allows.
func TestSubprotocolHeaderForms(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	for _, tc := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"one header", []string{"foo,voiced.v1"}, http.StatusSwitchingProtocols},
		{"one header with spaces", []string{" foo ,  bar "}, http.StatusBadRequest},
		{"two headers", []string{"foo", "voiced.v1"}, http.StatusSwitchingProtocols},
		{"empty header", []string{""}, http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(h.ctx, http.MethodGet, h.http.URL, nil)
			require.NoError(t, err)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			for _, v := range tc.headers {
				req.Header.Add("Sec-WebSocket-Protocol", v)
			}
			resp, err := h.http.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
			if tc.want == http.StatusSwitchingProtocols && tc.headers[0] != "" {
				require.Equal(t, protocol.Name, resp.Header.Get("Sec-WebSocket-Protocol"))
			}
		})
	}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCloseWithoutStatusLoggedAtDebug: a client that closes with an empty
// close frame (no status code, 1005 on our side) ended normally, so the
// session's end is a debug line without err or writer_err.
func TestCloseWithoutStatusLoggedAtDebug(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(*websocket.Conn)
	}{
		{"no status", func(c *websocket.Conn) { c.Close(websocket.StatusNoStatusRcvd, "") }},
		{"normal", func(c *websocket.Conn) { c.Close(websocket.StatusNormalClosure, "bye") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			var logs logBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			fake := &fakeStages{}
			pl, err := pipeline.New(pipeline.Config{}, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake},
				pipeline.NewMetrics(prometheus.NewRegistry()))
			require.NoError(t, err)
			srv := session.NewServer(session.Config{}, pl, log, nil)
			hs := httptest.NewServer(srv)
			defer hs.Close()
			conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
			require.NoError(t, err)
			_, _, err = conn.Read(ctx) // session.ready
			require.NoError(t, err)
			tc.close(conn)
			conn.CloseNow()
			// Shutdown returns when the session has ended and logged so.
			require.NoError(t, srv.Shutdown(ctx))
			var ended string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, `msg="session ended"`) {
					ended = line
				}
			}
			require.NotEmpty(t, ended, "logs:\n%s", logs.String())
			require.Contains(t, ended, "level=DEBUG")
			require.NotContains(t, ended, "err=")
		})
	}
}

// TestClientSpeaksFirst: a client that sends right after the upgrade,
// before it reads session.ready (as Twilio does on its own socket), has
// its first messages read whole: bytes net/http buffered during the
// upgrade are handed over ahead of the connection. Each try is a race
// with the hijack, so it tries a few times.
func TestClientSpeaksFirst(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	for range 20 {
		conn, _, err := websocket.Dial(h.ctx, "ws"+strings.TrimPrefix(h.http.URL, "http"), nil)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, conn.Write(h.ctx, websocket.MessageText, []byte(`{"type":"ping","clientTime":`+strconv.Itoa(i)+`}`)))
		}
		pongs := 0
		for pongs < 3 {
			_, b, err := conn.Read(h.ctx)
			require.NoError(t, err)
			m, err := protocol.DecodeServer(b)
			require.NoError(t, err)
			if m.Type == protocol.TypePong {
				pongs++
			}
		}
		conn.Close(websocket.StatusNormalClosure, "")
	}
}
