package llmtest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/provider"
)

// HTTPClient returns a client with its own transport, whose idle
// connections are closed when the test ends (so goleak sees no keep-alive
// goroutines of a shared transport).
func HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Conversation returns the request the adapter tests send: a system
// instruction, three alternating turns and a cap of 42 output tokens.
func Conversation() *provider.Request {
	return &provider.Request{
		System:          "be brief",
		Messages:        []provider.Message{{Role: provider.RoleUser, Text: "hi"}, {Role: provider.RoleAssistant, Text: "hello"}, {Role: provider.RoleUser, Text: "reset my password"}},
		MaxOutputTokens: 42,
	}
}

// StreamFunc is an adapter's Stream bound to a client.
type StreamFunc func(ctx context.Context, req *provider.Request, onText func(string)) (provider.Result, error)

// Outcome is what an adapter must make of one scripted reply. Kind
// provider.KindUnknown means success with Finish as the finish reason.
type Outcome struct {
	Kind       provider.Kind
	Code       string
	RetryAfter time.Duration
	Text       string // the text streamed before the outcome
	Finish     string
}

// CheckFault serves reply from a fresh server named server, streams
// Conversation through the client newStream makes for it, and checks the
// text, the outcome and that the error never quotes secret.
func CheckFault(t *testing.T, timeout time.Duration, server, secret string, newStream func(t *testing.T, srv *Server) StreamFunc, reply Reply, want Outcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	srv := NewServer(server, nil, reply)
	defer srv.Close()
	var got strings.Builder
	res, err := newStream(t, srv)(ctx, Conversation(), func(p string) { got.WriteString(p) })
	require.Equal(t, want.Text, got.String())
	if want.Kind == provider.KindUnknown {
		require.NoError(t, err)
		require.Equal(t, want.Finish, res.FinishReason)
		return
	}
	require.Error(t, err)
	require.Equal(t, want.Kind, provider.KindOf(err), "err = %v", err)
	pe, ok := err.(*provider.Error) // the adapter's own error, not a wrapper
	require.True(t, ok, "err is %T", err)
	require.Equal(t, want.Code, pe.Code)
	require.Equal(t, want.RetryAfter, pe.RetryAfter)
	require.NotContains(t, err.Error(), secret)
}

// CheckCancelClosesUpstream streams from a server that stalls after the
// first piece, cancels in the first onText, and checks that the error is
// KindCanceled and the server saw the client go within 50 ms.
func CheckCancelClosesUpstream(t *testing.T, timeout time.Duration, srv *Server, stream StreamFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	actx, acancel := context.WithCancel(ctx)
	defer acancel()
	var canceledAt time.Time
	_, err := stream(actx, Conversation(), func(string) { canceledAt = time.Now(); acancel() })
	require.Equal(t, provider.KindCanceled, provider.KindOf(err))
	require.Less(t, srv.Requests()[0].WhenGone().Sub(canceledAt), 50*time.Millisecond)
}
