package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

const testTimeout = 10 * time.Second

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStages are test doubles whose behaviour each test sets through
// function fields. Every call records the context it got.
type fakeStages struct {
	mu       sync.Mutex
	ctxs     map[string][]context.Context // by stage
	started  chan string                  // stage names as they start, if not nil
	finish   func(ctx context.Context) (string, error)
	classify func(ctx context.Context, text string) (pipeline.Intent, error)
	retrieve func(ctx context.Context, q string) ([]pipeline.Passage, error)
	generate func(ctx context.Context, emit func(string)) (pipeline.Generation, error)
	start    func(ctx context.Context) error
	write    func(ctx context.Context) error
	// heard, if set, makes the recognizer a pipeline.Coverer: given the
	// samples written, its partial and the samples that partial covers.
	heard func(written int64) (partial string, covered int64)
	reqs  []pipeline.GenerateRequest // guarded by mu
}

func (f *fakeStages) record(stage string, ctx context.Context) {
	f.mu.Lock()
	if f.ctxs == nil {
		f.ctxs = map[string][]context.Context{}
	}
	f.ctxs[stage] = append(f.ctxs[stage], ctx)
	f.mu.Unlock()
	if f.started != nil {
		select {
		case f.started <- stage:
		default:
		}
	}
}

func (f *fakeStages) contexts(stage string) []context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]context.Context(nil), f.ctxs[stage]...)
}

func (f *fakeStages) Start(ctx context.Context, rate int) (pipeline.Recognizer, error) {
	if f.start != nil {
		if err := f.start(ctx); err != nil {
			return nil, err
		}
	}
	if f.heard != nil {
		return &coverFakeRec{fakeRec: fakeRec{f: f}}, nil
	}
	return &fakeRec{f: f}, nil
}

// coverFakeRec is a fakeRec whose partials are heard words (fakeStages.heard).
type coverFakeRec struct {
	fakeRec
	covered int64
}

func (r *coverFakeRec) Write(ctx context.Context, pcm []int16) (string, error) {
	if _, err := r.fakeRec.Write(ctx, pcm); err != nil {
		return "", err
	}
	p, c := r.f.heard(int64(r.n))
	r.covered = c
	return p, nil
}

func (r *coverFakeRec) Covered() int64 { return r.covered }

type fakeRec struct {
	f *fakeStages
	n int
}

func (r *fakeRec) Write(ctx context.Context, pcm []int16) (string, error) {
	if r.f.write != nil {
		if err := r.f.write(ctx); err != nil {
			return "", err
		}
	}
	r.n += len(pcm)
	return "", nil
}

func (r *fakeRec) Finish(ctx context.Context) (string, error) {
	r.f.record(pipeline.StageSTT, ctx)
	if r.f.finish != nil {
		return r.f.finish(ctx)
	}
	return "where is my order", nil
}

func (r *fakeRec) Close() error { return nil }

func (f *fakeStages) Classify(ctx context.Context, text string) (pipeline.Intent, error) {
	f.record(pipeline.StageIntent, ctx)
	if f.classify != nil {
		return f.classify(ctx, text)
	}
	return pipeline.Intent{Name: "order_status", Confidence: 0.9}, nil
}

func (f *fakeStages) Retrieve(ctx context.Context, q string, k int) ([]pipeline.Passage, error) {
	f.record(pipeline.StageRetrieval, ctx)
	if f.retrieve != nil {
		return f.retrieve(ctx, q)
	}
	return []pipeline.Passage{{ID: "orders", Title: "Tracking your order", Text: "Track it.", Score: 3}}, nil
}

func (f *fakeStages) Generate(ctx context.Context, req pipeline.GenerateRequest, emit func(string)) (pipeline.Generation, error) {
	// The request is recorded before the stage is announced on started, so
	// a test that sees "llm" also sees this request in reqs.
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	f.record(pipeline.StageLLM, ctx)
	if f.generate != nil {
		return f.generate(ctx, emit)
	}
	emit("Your order ")
	emit("ships today.")
	return pipeline.Generation{Provider: "fake", Model: "fake-1"}, nil
}

// blockUntilDone is a stage body that runs until its context ends.
// finishOnRelease is an STT finish that transcribes once release is
// closed, or ends with its context: a request held in flight until the
// test lets it go.
func finishOnRelease(release <-chan struct{}) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		select {
		case <-release:
			return "where is my order", nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

func blockUntilDone[T any](ctx context.Context) (T, error) {
	<-ctx.Done()
	var zero T
	return zero, context.Cause(ctx)
}

type harness struct {
	t    testing.TB
	ctx  context.Context
	srv  *session.Server
	http *httptest.Server
	fake *fakeStages
	reg  *prometheus.Registry
}

func newHarness(t testing.TB, fake *fakeStages, pcfg pipeline.Config, scfg session.Config) *harness {
	t.Helper()
	return newHarnessOn(t, nil, fake, pcfg, scfg)
}

// newHarnessOn is newHarness serving on ln (nil: a loopback port of its
// own).
func newHarnessOn(t testing.TB, ln net.Listener, fake *fakeStages, pcfg pipeline.Config, scfg session.Config) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	reg := prometheus.NewRegistry()
	pl, err := pipeline.New(pcfg, pipeline.Stages{STT: fake, Intent: fake, Retrieval: fake, LLM: fake}, pipeline.NewMetrics(reg))
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv := session.NewServer(scfg, pl, log, session.NewMetrics(reg))
	hs := httptest.NewUnstartedServer(srv)
	if ln != nil {
		hs.Listener.Close()
		hs.Listener = ln
	}
	hs.Start()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		hs.Close()
	})
	return &harness{t: t, ctx: ctx, srv: srv, http: hs, fake: fake, reg: reg}
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// client is a test client of one session.
type client struct {
	h        *harness
	conn     *websocket.Conn
	ready    protocol.SessionReady
	binaries int // binary messages read (answer.audio)
}

func (h *harness) dial() *client {
	h.t.Helper()
	return h.dialURL("ws" + strings.TrimPrefix(h.http.URL, "http"))
}

// dialURL opens a session at u and reads its session.ready.
func (h *harness) dialURL(u string) *client {
	h.t.Helper()
	return h.dialWith(u, nil)
}

// dialWith is dialURL with the client's options.
func (h *harness) dialWith(u string, opts *websocket.DialOptions) *client {
	h.t.Helper()
	conn, _, err := websocket.Dial(h.ctx, u, opts)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { conn.CloseNow() })
	c := &client{h: h, conn: conn}
	m := c.next()
	require.Equal(h.t, protocol.TypeSessionReady, m.Type)
	require.NoError(h.t, m.As(&c.ready))
	return c
}

// next reads the next server message. A binary message (answer.audio) is
// returned re-encoded as its base64 text form, and counted in binaries.
func (c *client) next() protocol.ServerMessage {
	c.h.t.Helper()
	typ, b, err := c.conn.Read(c.h.ctx)
	require.NoError(c.h.t, err)
	if typ == websocket.MessageBinary {
		hd, pcm, err := protocol.DecodeAnswerAudio(b, true)
		require.NoError(c.h.t, err)
		b, err = protocol.EncodeAnswerAudio(hd, pcm, true)
		require.NoError(c.h.t, err)
		c.binaries++
	}
	m, err := protocol.DecodeServer(b)
	require.NoError(c.h.t, err)
	return m
}

// terminal reads messages until the terminal one of id, returning it and
// the messages before it.
func (c *client) terminal(id string) (protocol.ServerMessage, []protocol.ServerMessage) {
	c.h.t.Helper()
	var before []protocol.ServerMessage
	for {
		m := c.next()
		if m.RequestID == id && protocol.Terminal(m.Type) {
			return m, before
		}
		before = append(before, m)
	}
}

func (c *client) sendJSON(v any) {
	c.h.t.Helper()
	b, err := json.Marshal(v)
	require.NoError(c.h.t, err)
	c.sendText(string(b))
}

func (c *client) sendText(s string) {
	c.h.t.Helper()
	require.NoError(c.h.t, c.conn.Write(c.h.ctx, websocket.MessageText, []byte(s)))
}

func (c *client) sendBinary(b []byte) {
	c.h.t.Helper()
	require.NoError(c.h.t, c.conn.Write(c.h.ctx, websocket.MessageBinary, b))
}

// audio sends one binary audio frame of 20 ms of silence-free PCM.
func (c *client) audio(id string, seq int64, final bool, deadline time.Time) {
	c.h.t.Helper()
	pcm := make([]int16, 320)
	for i := range pcm {
		pcm[i] = int16(i * 37)
	}
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{
		RequestID: id, DeadlineAt: protocol.Millis(deadline), Seq: seq, Final: final,
	}, pcm)
	require.NoError(c.h.t, err)
	c.sendBinary(b)
}

// errorOf decodes an error message.
func errorOf(t *testing.T, m protocol.ServerMessage) protocol.ErrorMessage {
	t.Helper()
	require.Equal(t, protocol.TypeError, m.Type, "message: %s", m.Raw)
	var e protocol.ErrorMessage
	require.NoError(t, m.As(&e))
	return e
}

func resultOf(t *testing.T, m protocol.ServerMessage) protocol.Result {
	t.Helper()
	require.Equal(t, protocol.TypeResult, m.Type, "message: %s", m.Raw)
	var r protocol.Result
	require.NoError(t, m.As(&r))
	return r
}

// ping checks the session is alive and drains everything before the pong.
func (c *client) ping() []protocol.ServerMessage {
	c.h.t.Helper()
	c.sendJSON(protocol.Ping{Type: protocol.TypePing, ClientTime: 42})
	var before []protocol.ServerMessage
	for {
		m := c.next()
		if m.Type == protocol.TypePong {
			return before
		}
		before = append(before, m)
	}
}

// waitCtxDone waits for a stage context to be done and returns how long
// it took from since, failing the test if it takes longer than limit.
func waitCtxDone(t *testing.T, ctx context.Context, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return time.Since(since)
	case <-timer.C:
		t.Fatalf("stage context not done within %v", limit)
		return 0
	}
}

var errBoom = errors.New("boom")
