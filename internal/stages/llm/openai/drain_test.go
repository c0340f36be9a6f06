package openai_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/stages/llm/openai"
)

// streamBody hands out the whole stream in its first Read and its end
// (io.EOF) only on a later one, as a connection does when the chunked
// terminator comes in a packet after "data: [DONE]"; with hold it never
// ends until closed, as a server that keeps the stream open. It records
// whether the reader saw the end before closing: net/http puts an
// HTTP/1.1 connection back in its pool only then.
type streamBody struct {
	mu         sync.Mutex
	data       *bytes.Reader
	hold       bool
	closed     chan struct{}
	closeOnce  sync.Once
	sawEOF     bool
	eofAtClose bool
}

func (b *streamBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.data.Len() > 0 {
		defer b.mu.Unlock()
		return b.data.Read(p)
	}
	b.mu.Unlock()
	if b.hold {
		<-b.closed
		return 0, http.ErrBodyReadAfterClose
	}
	b.mu.Lock()
	b.sawEOF = true
	b.mu.Unlock()
	return 0, io.EOF
}

func (b *streamBody) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.eofAtClose = b.sawEOF
		b.mu.Unlock()
		close(b.closed)
	})
	return nil
}

type oneResponse struct{ body *streamBody }

func (o oneResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: o.body, Request: r}, nil
}

func newBody(hold bool) *streamBody {
	events := strings.Join(llmtest.OpenAIChunks("gpt-test", "stop", "Hi."), "")
	return &streamBody{data: bytes.NewReader([]byte(events)), hold: hold, closed: make(chan struct{})}
}

// TestCompleteStreamReadToItsEnd: after "data: [DONE]" the adapter must
// read the body to its end before closing it, or net/http closes the
// HTTP/1.1 connection (Ollama, vLLM, llama.cpp, a gateway) and the next
// answer pays for a new one inside its first-token limit.
func TestCompleteStreamReadToItsEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	b := newBody(false)
	c, err := openai.New(openai.Config{BaseURL: "http://fake/v1", Model: "gpt-test", APIKey: key, HTTPClient: &http.Client{Transport: oneResponse{b}}})
	require.NoError(t, err)
	_, err = c.Stream(ctx, req, func(string) {})
	require.NoError(t, err)
	require.True(t, b.eofAtClose, "the body was closed before its end: the connection is not reused")
}

// TestDrainBounded: a server that keeps the stream open after [DONE]
// must not hold the answer: reading to the end is given a short time.
func TestDrainBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	b := newBody(true)
	c, err := openai.New(openai.Config{BaseURL: "http://fake/v1", Model: "gpt-test", APIKey: key, HTTPClient: &http.Client{Transport: oneResponse{b}}})
	require.NoError(t, err)
	start := time.Now()
	_, err = c.Stream(ctx, req, func(string) {})
	require.NoError(t, err)
	require.Less(t, time.Since(start), time.Second)
}
