package session

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLateAttachDoesNotEndNewerSession: a client gets session.ready from
// session a, loses that connection at once and resumes as b. a's
// goroutine, delayed between writing session.ready and attach (a busy
// process), attaches after b. attach took a for the conversation's
// newest session and ended b (resumedElsewhere), the one the client is
// using: its connection closed without a close frame, and a, whose
// client is gone, became the live session that handed-over terminals go
// to. The older session must not supersede the newer one.
func TestLateAttachDoesNotEndNewerSession(t *testing.T) {
	ctx, srv, _, a := lateSession(t)
	b := newSession(srv, "newer", srv.log)
	b.conv, b.resumeAsked, b.resumed = a.conv, true, true

	b.attach(ctx) // b, upgraded after a, attaches first
	a.attach(ctx) // a's attach, late

	require.Same(t, b, srv.liveSession(a.conv), "the conversation's live session")
	b.mu.Lock()
	defer b.mu.Unlock()
	require.False(t, b.detached, "the newer session was ended by the older one")
}
