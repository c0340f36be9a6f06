package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestHistoryOfARequestOpenedBeforeTheLastResult: a request the client
// opened while the previous one was still being answered (the caller
// spoke again at once; or, with server turns, any turn that interrupts:
// it opens when the speech starts, before the client can report what it
// played) gets that answer in its history if the answer was out before
// its own generator started. Taken when the request opened, the history
// missed the last exchange, and the next answer ignored what was just
// said.
func TestHistoryOfARequestOpenedBeforeTheLastResult(t *testing.T) {
	release := make(chan struct{})
	fake := &fakeStages{started: make(chan string, 16)}
	fake.generate = func(ctx context.Context, emit func(string)) (pipeline.Generation, error) {
		fake.mu.Lock()
		first := len(fake.reqs) == 1
		fake.mu.Unlock()
		if first {
			select { // a is answered once b has opened
			case <-release:
			case <-ctx.Done():
				return pipeline.Generation{}, context.Cause(ctx)
			}
		}
		emit("Your order ships today.")
		return pipeline.Generation{Provider: "fake"}, nil
	}
	h := newHarness(t, fake, pipeline.Config{}, session.Config{})
	c := h.dial()
	c.audio("a", 0, true, time.Now().Add(5*time.Second))
	for stage := range fake.started {
		if stage == pipeline.StageLLM {
			break
		}
	}
	c.audio("b", 0, false, time.Now().Add(5*time.Second))
	c.ping() // b is open
	close(release)
	term, _ := c.terminal("a")
	resultOf(t, term)

	c.audio("b", 1, true, time.Now().Add(5*time.Second))
	term, _ = c.terminal("b")
	resultOf(t, term)
	fake.mu.Lock()
	defer fake.mu.Unlock()
	require.Len(t, fake.reqs, 2)
	require.Equal(t, []pipeline.Turn{{User: "where is my order", Assistant: "Your order ships today."}}, fake.reqs[1].History)
}
