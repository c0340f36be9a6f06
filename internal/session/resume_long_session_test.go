package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
)

// TestResumeAfterALongSession: a session's token from session.ready
// expires -resume-ttl after it, however long the session goes on; each
// result carries a fresh one, so a session that outlived its first token
// (a call longer than 30 min, by default) can still resume when its
// connection drops. It could not: its history and its terminals in
// flight were lost with the connection.
func TestResumeAfterALongSession(t *testing.T) {
	const ttl = 2 * time.Second
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{ResumeTTL: ttl})
	c := h.dial()
	first := tokenExpiry(t, c.ready.ResumeToken)
	require.Eventually(t, func() bool { return time.Now().UnixMilli() > first }, 2*ttl, 5*time.Millisecond,
		"session.ready's token outlived")

	c.audio("late", 0, true, time.Now().Add(time.Second))
	term, _ := c.terminal("late")
	res := resultOf(t, term)
	require.NotEmpty(t, res.ResumeToken, "a result carries a fresh token")
	require.Greater(t, tokenExpiry(t, res.ResumeToken), first)

	c.conn.CloseNow()
	c2 := h.dialResume(res.ResumeToken)
	require.True(t, c2.ready.Resumed, "resumed with the result's token")
	require.Equal(t, c.ready.ConversationID, c2.ready.ConversationID)
}
