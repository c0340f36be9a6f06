package session_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestCallSavedUnderItsTenant: a phone call's conversation is saved
// under the tenant of the token it authenticated with, the same as a
// session's with that token. Calls were saved under the tenant of the
// handshake's Authorization header, which Twilio never sends: every
// call of every tenant under the one of an empty token.
func TestCallSavedUnderItsTenant(t *testing.T) {
	store := savesReported{session.NewMemoryConversations(time.Hour), make(chan session.Conversation, 16)}
	pcfg := pipeline.Config{}
	pcfg.TTS.Cap = roomy - time.Second
	h := newHarness(t, &fakeStages{}, pcfg, session.Config{Speech: flite(t), MaxBudget: roomy,
		Tokens: []string{"secret", "other"}, Conversations: store})

	c := h.dialWith("ws"+h.http.URL[len("http"):], &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer secret"}}})
	c.audio("r1", 0, true, time.Now().Add(roomy))
	term, _ := c.terminal("r1")
	require.Equal(t, protocol.TypeResult, term.Type, "%s", term.Raw)
	want := (<-store.saved).Tenant
	require.NotEmpty(t, want)

	pcm, _, _ := conversation(t, 0, "where is my order")
	pcm = downsample(t, pcm)
	for _, tc := range []struct {
		name, query string
		params      map[string]string
	}{
		{"token in the URL", "?token=secret", nil},
		{"token in the start", "", map[string]string{"token": "secret"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tw := dialTwilio(t, h, tc.query)
			tw.start(tc.params)
			chunk := 0
			tw.speak(pcm, &chunk)
			select {
			case saved := <-store.saved:
				require.Equal(t, want, saved.Tenant, "the call's conversation is its token's tenant's")
			case <-h.ctx.Done():
				t.Fatal("the call's conversation was never saved")
			}
		})
	}
}
