package session_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestFarFutureDeadline: a deadlineAt far in the future (a common "no
// deadline" value) is valid; the pipeline deadline is then the max budget.
func TestFarFutureDeadline(t *testing.T) {
	for _, oneFrame := range []bool{true, false} {
		t.Run(fmt.Sprintf("one frame %v", oneFrame), func(t *testing.T) {
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
			c := h.dial()
			far := protocol.Time(253402300799999) // 9999-12-31T23:59:59.999Z
			c.audio("r1", 0, oneFrame, far)
			if !oneFrame {
				c.audio("r1", 1, true, far)
			}
			term, _ := c.terminal("r1")
			res := resultOf(t, term)
			require.EqualValues(t, 1700, res.Budget.EffectiveBudgetMs)
			require.EqualValues(t, 0, metricValue(t, h, "voiced_late_terminals_total"))
		})
	}
}

// TestStreamingLifetimeBounded: a request whose final frame never comes
// cannot hold its recognizer longer than -max-audio plus the max budget,
// whatever deadlineAt it claims.
func TestStreamingLifetimeBounded(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{},
		session.Config{MaxAudioPerRequest: 200 * time.Millisecond, MaxBudget: 300 * time.Millisecond})
	c := h.dial()
	start := time.Now()
	c.audio("hog", 0, false, time.Now().Add(time.Hour))
	term, _ := c.terminal("hog")
	require.Equal(t, protocol.CodeDeadlineExceeded, errorOf(t, term).Code)
	require.Less(t, time.Since(start), 3*time.Second)
}

// TestNoSecondTerminalAfterTombstonesWrap: a straggling frame of a request
// that ended long ago (its id no longer remembered) gets a session-level
// error, never a second terminal message for that id.
func TestNoSecondTerminalAfterTombstonesWrap(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	dl := time.Now().Add(5 * time.Second)
	c.audio("r0", 0, false, dl)
	c.sendJSON(protocol.Cancel{Type: protocol.TypeCancel, RequestID: "r0"})
	term, _ := c.terminal("r0")
	require.Equal(t, protocol.CodeCancelled, errorOf(t, term).Code)
	past := time.Now().Add(-time.Second)
	for i := range 40 {
		id := fmt.Sprintf("x%d", i)
		c.audio(id, 0, true, past)
		c.terminal(id)
	}
	c.audio("r0", 1, false, dl)
	e := errorOf(t, c.next())
	require.Empty(t, e.RequestID)
	require.Equal(t, protocol.CodeBadMessage, e.Code)
	require.Empty(t, c.ping())
}

// TestFrameErrorEndsItsRequest: a bad frame of a request in flight is that
// request's terminal error, carrying its id.
func TestFrameErrorEndsItsRequest(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{})
	c := h.dial()
	dl := time.Now().Add(5 * time.Second)
	c.audio("r1", 0, false, dl)
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1", DeadlineAt: protocol.Millis(dl), Seq: 1}, nil)
	require.NoError(t, err)
	c.sendBinary(append(b, 0x01))
	e := errorOf(t, c.next())
	require.Equal(t, protocol.CodeBadAudio, e.Code)
	require.Equal(t, "r1", e.RequestID)
	c.audio("r1", 2, true, dl) // the rest of it is ignored
	require.Empty(t, c.ping())
}

// TestCloseWhileOpening stresses a forced close against requests being
// opened on several sessions: no panic, no race, and Close returns.
func TestCloseWhileOpening(t *testing.T) {
	for round := range 5 {
		fake := &fakeStages{finish: blockUntilDone[string]}
		h := newHarness(t, fake, pipeline.Config{}, session.Config{MaxInFlight: 1000})
		var wg sync.WaitGroup
		for sess := range 4 {
			c := h.dial()
			wg.Go(func() {
				dl := time.Now().Add(5 * time.Second)
				for i := 0; ; i++ {
					b, _ := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{
						RequestID: fmt.Sprintf("s%d-%d", sess, i), DeadlineAt: protocol.Millis(dl), Final: true}, []int16{1, 2})
					if err := c.conn.Write(h.ctx, websocket.MessageBinary, b); err != nil {
						return
					}
				}
			})
			wg.Go(func() {
				for {
					if _, _, err := c.conn.Read(h.ctx); err != nil {
						return
					}
				}
			})
		}
		timer := time.NewTimer(time.Duration(round%5+1) * time.Millisecond)
		<-timer.C
		h.srv.Close()
		wg.Wait()
	}
}

// TestCloseBoundedWithStuckStage: a stage that ignores its context cannot
// hold a forced close forever.
func TestCloseBoundedWithStuckStage(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{})
	fake := &fakeStages{finish: func(ctx context.Context) (string, error) {
		close(started)
		<-release // ignores ctx
		return "", nil
	}}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	t.Cleanup(func() { close(release) }) // runs before the harness's own cleanup
	c := h.dial()
	c.audio("r1", 0, true, time.Now().Add(5*time.Second))
	<-started
	start := time.Now()
	err := h.srv.Close()
	require.ErrorIs(t, err, session.ErrStuck)
	require.Less(t, time.Since(start), 6*time.Second)
}
