package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// AgentState is what the agent check reports of this instance.
type AgentState interface {
	Capacity
	// Ready reports whether the instance serves sessions (engines warm).
	Ready() bool
	// Draining reports whether the instance is shutting down.
	Draining() bool
	// Full reports whether the instance holds as many sessions as it
	// takes (-max-sessions): a new one would be refused with 503.
	Full() bool
	// Recognizers is how many recognitions the instance runs at once.
	Recognizers() int
}

// AgentReply is the agent-check answer for st: "drain 0%" while shutting
// down, "maint" while warming up, "ready 0%" while saturated or full (no
// new sessions at all: HAProxy sends them elsewhere rather than have them
// refused and retried), else "ready" with the share of free recognisers as
// the weight. A busy instance, every recogniser in use at the moment of
// the check, gets 1%: its sessions mostly wait between turns, so it takes
// new ones only when the others are as busy, rather than leaving HAProxy
// with no server when the whole fleet is busy for an instant.
func AgentReply(st AgentState) string {
	switch {
	case st.Draining():
		return "drain 0%\n"
	case !st.Ready():
		return "maint\n"
	case st.Saturated(), st.Full():
		return "ready 0%\n"
	}
	total := max(st.Recognizers(), 1)
	free := min(max(st.FreeRecognizers(), 0), total)
	return fmt.Sprintf("ready %d%%\n", max(free*100/total, 1))
}

// Agent serves HAProxy's agent-check protocol: for each connection it
// writes one line (AgentReply) and closes.
type Agent struct {
	st  AgentState
	log *slog.Logger
	wg  sync.WaitGroup
}

// NewAgent returns an agent reporting st.
func NewAgent(st AgentState, log *slog.Logger) *Agent { return &Agent{st: st, log: log} }

// Serve answers agent checks on ln until ctx ends, then closes ln and
// waits for the answers in progress.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer a.wg.Wait()
	var pause time.Duration // after a failed Accept
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of descriptors in a connection flood, say: the agent
			// must outlive it, or HAProxy never hears of a drain. Retry
			// as net/http's server does.
			pause = min(max(2*pause, minAcceptPause), maxAcceptPause)
			a.log.Warn("agent check: accept failed; retrying", "err", err, "in", pause)
			if !sleepCtx(ctx, pause) {
				return nil
			}
			continue
		}
		pause = 0
		a.wg.Go(func() {
			defer conn.Close()
			conn.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := conn.Write([]byte(AgentReply(a.st))); err != nil {
				a.log.Debug("agent check: write", "err", err)
			}
		})
	}
}

// The wait after a failed Accept: doubled from minAcceptPause after each
// failure in a row, at most maxAcceptPause.
const (
	minAcceptPause = 5 * time.Millisecond
	maxAcceptPause = time.Second
)

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
