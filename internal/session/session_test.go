package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

func TestHappyPath(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	require.Equal(t, protocol.Name, c.ready.Protocol)
	require.EqualValues(t, 1700, c.ready.MaxBudgetMs)
	require.Equal(t, 16000, c.ready.Audio.SampleRate)

	dl := time.Now().Add(2 * time.Second)
	c.audio("r1", 0, false, dl)
	c.audio("r1", 1, true, dl)
	term, before := c.terminal("r1")
	res := resultOf(t, term)
	require.Equal(t, "where is my order", res.Transcript)
	require.Equal(t, "order_status", res.Intent.Name)
	require.Equal(t, "Your order ships today.", res.Answer)
	require.False(t, res.Degraded)
	require.Equal(t, "fake", res.Provider)
	require.NotNil(t, res.Budget.LLMStartLeftMs)

	var types []string
	for _, m := range before {
		types = append(types, m.Type)
	}
	require.Equal(t, []string{"transcript", "intent", "retrieval", "answer.delta", "answer.delta"}, sortStable(types))
	require.Empty(t, c.ping(), "nothing follows the terminal message")
}

// sortStable puts intent before retrieval: they run in parallel, so their
// order on the wire is free.
func sortStable(types []string) []string {
	for i := 0; i+1 < len(types); i++ {
		if types[i] == "retrieval" && types[i+1] == "intent" {
			types[i], types[i+1] = types[i+1], types[i]
		}
	}
	return types
}

// TestHistory passes the session's earlier exchanges, and its id as the
// conversation's, to the generator.
func TestHistory(t *testing.T) {
	fake := &fakeStages{}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	for _, id := range []string{"a", "b"} {
		c.audio(id, 0, true, time.Now().Add(2*time.Second))
		term, _ := c.terminal(id)
		resultOf(t, term)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	require.Len(t, fake.reqs, 2)
	require.Empty(t, fake.reqs[0].History)
	require.Equal(t, []pipeline.Turn{{User: "where is my order", Assistant: "Your order ships today."}}, fake.reqs[1].History)
	// The conversation, which outlives the session, reaches the generator
	// (the LLM's per-conversation cost cap counts by it).
	require.NotEmpty(t, c.ready.ConversationID)
	require.NotEqual(t, c.ready.SessionID, c.ready.ConversationID)
	for _, r := range fake.reqs {
		require.Equal(t, c.ready.ConversationID, r.ConversationID)
	}
}

// TestSlowClient closes a session whose client stops reading with a
// policy violation instead of stalling the pipeline: the answer's first
// piece is larger than the socket buffers, so the writer blocks in it,
// and the pieces after it fill the queue.
//
// The queue is filled by the server alone. The test pinged until it
// overflowed, the pongs filling the client's 16 KiB receive buffer first;
// on a loaded machine loopback TCP then dropped segments both ways and
// backed its retransmissions off to seconds (ss: drops on both sockets,
// the client's pings unacked at cwnd 1), so no more pings reached the
// server, which sat parked with nothing to read until the test's 10 s ran
// out (4 failures in about 200 runs beside the package's).
func TestSlowClient(t *testing.T) {
	fake := &fakeStages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
		emit(strings.Repeat("x", 200_000))
		for range session.MinOutboundQueue + 8 {
			emit("more.")
		}
		return pipeline.Generation{Provider: "fake"}, nil
	}}
	h := newSlowClientHarness(t, fake, pipeline.Config{}, session.Config{OutboundQueue: session.MinOutboundQueue})
	c := h.dialSmallWindow()
	c.audio("r1", 0, true, time.Now().Add(2*time.Second))
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_slow_client_closes_total") > 0 },
		testTimeout, time.Millisecond, "the server never gave up on a client that does not read")
	require.EqualValues(t, 1, metricValue(t, h, "voiced_slow_client_closes_total"))
	c.conn.SetReadLimit(-1) // the first piece
	for {
		if _, _, err := c.conn.Read(h.ctx); err != nil {
			if s := websocket.CloseStatus(err); s != -1 {
				require.Equal(t, websocket.StatusPolicyViolation, s)
			}
			break
		}
	}
}

// metricValue sums the samples of a metric family.
func metricValue(t testing.TB, h *harness, name string) float64 {
	t.Helper()
	// name may select one label value: voiced_x_total{cause="y"}.
	name, sel, _ := strings.Cut(strings.TrimSuffix(name, "}"), "{")
	label, value, _ := strings.Cut(sel, "=")
	return labelValue(t, h, name, label, strings.Trim(value, `"`))
}

// TestMetrics checks the metrics a request moves.
func TestMetrics(t *testing.T) {
	fake := &fakeStages{started: make(chan string, 8), finish: blockUntilDone[string]}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	require.EqualValues(t, 1, metricValue(t, h, "voiced_sessions"))
	c.audio("r1", 0, true, time.Now().Add(2*time.Second))
	<-fake.started
	require.EqualValues(t, 1, metricValue(t, h, "voiced_requests_in_flight"))
	c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "r1"})
	c.terminal("r1")
	require.EqualValues(t, 0, metricValue(t, h, "voiced_requests_in_flight"))
	require.EqualValues(t, 1, metricValue(t, h, "voiced_cancellations_total"))
	require.EqualValues(t, 1, metricValue(t, h, "voiced_requests_total"))
	// The session answers a cancel at once; the pipeline records the
	// stage's end when the stage has returned, a moment later.
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_stage_duration_seconds") == 1 },
		testTimeout, time.Millisecond, "the cancelled STT stage is observed")
	// Cancel latency is how soon a goroutine waiting on the request's
	// context runs again: observed by that wake-up, not by the terminal.
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_cancel_latency_seconds") == 1 },
		testTimeout, time.Millisecond)
	require.EqualValues(t, 0, metricValue(t, h, "voiced_late_terminals_total"))
	require.Eventually(t, func() bool { return metricValue(t, h, "voiced_cancel_to_terminal_seconds") == 1 },
		testTimeout, time.Millisecond, "the writer times the cancelled terminal")
}

// TestBadInputCountedOnce: a refused first frame is one bad input.
func TestBadInputCountedOnce(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1", DeadlineAt: protocol.Millis(time.Now().Add(time.Second))}, nil)
	require.NoError(t, err)
	c.sendBinary(append(b, 1)) // odd PCM byte count
	require.Equal(t, protocol.CodeBadAudio, errorOf(t, c.next()).Code)
	require.EqualValues(t, 1, metricValue(t, h, "voiced_bad_input_total"))
}

// TestResultSources checks the result's sources: the passages the answer
// was built from, as article, passage and title, and an empty list (not
// an absent field) when the answer cites nothing.
func TestResultSources(t *testing.T) {
	tests := []struct {
		name string
		gen  []pipeline.Passage
		want string
	}{
		{name: "cited", gen: []pipeline.Passage{{ID: "tracking-your-order#2", Title: "Tracking your order", Text: "t", Score: 3}},
			want: `"sources":[{"article":"tracking-your-order","passage":"tracking-your-order#2","title":"Tracking your order"}]`},
		{name: "nothing cited", want: `"sources":[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeStages{generate: func(_ context.Context, emit func(string)) (pipeline.Generation, error) {
				emit("Open the Orders page.")
				return pipeline.Generation{Provider: "fake", Sources: tt.gen}, nil
			}}
			c := newHarness(t, fake, pipeline.Config{}, session.Config{}).dial()
			c.audio("r1", 0, true, time.Now().Add(2*time.Second))
			term, _ := c.terminal("r1")
			resultOf(t, term)
			require.Contains(t, string(term.Raw), tt.want)
		})
	}
}
