package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
	"github.com/voiced/voiced/internal/loadgen"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/stages/llm/llmtest"
	"github.com/voiced/voiced/internal/voicedtest"
)

// The fleet tests run real processes on loopback: voiced (built once),
// Debian's redis-server and haproxy, with fake OpenAI-compatible
// transcription and chat servers in the test.

// fakeOpenAI serves /v1/audio/transcriptions ("question N", N counting
// up) and /v1/chat/completions (chat answers "Answer N." or its 429), and
// records every chat request.
type fakeOpenAI struct {
	*httptest.Server
	stt, chat atomic.Int64
	rateLimit atomic.Bool  // answer chat with 429 retry-after: 30
	delay     atomic.Int64 // nanoseconds before a chat answer starts

	mu  sync.Mutex
	log []chatRequest // guarded by mu
}

type chatRequest struct {
	key      string // the API key: which instance asked
	messages string // the messages, as JSON
}

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/audio/transcriptions", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"text":"question %d"}`, f.stt.Add(1))
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages json.RawMessage `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.log = append(f.log, chatRequest{key: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), messages: string(body.Messages)})
		f.mu.Unlock()
		if f.rateLimit.Load() {
			llmtest.OpenAIStatus(http.StatusTooManyRequests, map[string]string{"retry-after": "30"}, "Rate limit reached", "requests", "rate_limit_exceeded")(w, r, nil)
			return
		}
		if d := time.Duration(f.delay.Load()); d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		n := f.chat.Add(1)
		llmtest.OpenAIOK("gpt-4o-mini", "Answer ", strconv.FormatInt(n, 10)+".")(w, r, nil)
	})
	// The chain's warm-up.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotFound) })
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpenAI) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.log...)
}

// voicedBinary builds cmd/voiced once per test binary, into binDir.
var voicedBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "voiced-fleet")
	if err != nil {
		return "", err
	}
	binDir.Store(&dir)
	bin := filepath.Join(dir, "voiced")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

var binDir atomic.Pointer[string]

// removeVoicedBinary removes what voicedBinary built.
func removeVoicedBinary() {
	if d := binDir.Load(); d != nil {
		os.RemoveAll(*d)
	}
}

// fleetEnv is what every fleet test starts with: the binaries there,
// voiced built, then the test's deadline, Redis and the fake provider.
func fleetEnv(t *testing.T, limit time.Duration) (context.Context, *redistest.Server, *fakeOpenAI) {
	t.Helper()
	needBinaries(t)
	buildVoiced(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx, redistest.Start(t), newFakeOpenAI(t)
}

// buildVoiced builds voiced before the test's clock starts.
func buildVoiced(t *testing.T) {
	t.Helper()
	_, err := voicedBinary()
	require.NoError(t, err)
}

// proc is one voiced process of the fleet.
type proc struct {
	id, addr, agent string
	cmd             *exec.Cmd
	out             *bytes.Buffer
	done            chan struct{}
}

// startInstance runs voiced as instance id with the fleet's settings,
// and the flags extra.
func startInstance(t *testing.T, ctx context.Context, id, redisURL string, ai *fakeOpenAI, extra ...string) *proc {
	t.Helper()
	bin, err := voicedBinary()
	require.NoError(t, err)
	p := &proc{id: id, addr: freeAddr(t), agent: freeAddr(t), out: &bytes.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "-addr", p.addr, "-admin-addr", "off", "-log-format", "json",
		"-instance-id", id, "-redis", redisURL, "-haproxy-agent-addr", p.agent,
		// make test runs this beside every other package's tests on two
		// cores: a scheduling hiccup must not skip a resume's read. The
		// 20 ms default is held by internal/fleet's tests.
		"-redis.budget", "250ms",
		"-stt.engine", "remote", "-stt.remote.url", ai.URL+"/v1", "-tts.engine", "off",
		"-llm.order", "openai", "-llm.openai.base-url", ai.URL+"/v1", "-llm.openai.model", "gpt-4o-mini",
		"-shutdown-timeout", "8s")
	p.cmd.Args = append(p.cmd.Args, extra...)
	p.cmd.Env = append(os.Environ(), "OPENAI_API_KEY=key-"+id, "VOICED_RESUME_SECRET=fleet-test-secret", "VOICED_TOKENS=")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() {
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("voiced %s output:\n%s", id, p.out.String())
		}
	})
	waitHTTP(t, ctx, "http://"+p.addr+"/readyz")
	return p
}

// startInstances starts three instances at once, named prefix0..2.
func startInstances(t *testing.T, ctx context.Context, prefix, redisURL string, ai *fakeOpenAI) []*proc {
	t.Helper()
	procs := make([]*proc, 3)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() { procs[i] = startInstance(t, ctx, prefix+strconv.Itoa(i), redisURL, ai) })
	}
	wg.Wait()
	return procs
}

func freeAddr(t testing.TB) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(redistest.FreePort(t)))
}

// waitHTTP polls url, each try bounded, until it answers 200.
func waitHTTP(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				cancel()
				return
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			t.Fatalf("%s not ready: %v", u, err)
		case <-tick.C:
		}
	}
}

// startHAProxy runs haproxy with deploy/haproxy/haproxy.cfg, its bind
// and server lines replaced by the test's (shorter check intervals), and
// returns its address once every server is up.
func startHAProxy(t testing.TB, ctx context.Context, procs []*proc) string {
	t.Helper()
	cfg, err := os.ReadFile("../../deploy/haproxy/haproxy.cfg")
	require.NoError(t, err)
	addr := freeAddr(t)
	var servers strings.Builder
	servers.WriteString("    default-server check inter 200ms fall 1 rise 1 agent-check agent-inter 200ms weight 100\n")
	for _, p := range procs {
		_, port, _ := net.SplitHostPort(p.agent)
		fmt.Fprintf(&servers, "    server %s %s agent-port %s\n", p.id, p.addr, port)
	}
	out := replaceBlock(t, string(cfg), "bind", "    bind "+addr+"\n")
	out = replaceBlock(t, out, "servers", servers.String())
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	require.NoError(t, os.WriteFile(path, []byte(out), 0o600))
	cmd := exec.Command("haproxy", "-db", "-f", path)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("haproxy output:\n%s", log.String())
		}
	})
	// Up through HAProxy, on every server.
	seen := map[string]bool{}
	for len(seen) < len(procs) {
		c, err := dialSession(ctx, addr, "")
		if err == nil {
			seen[c.ready.Instance] = true
			c.conn.CloseNow()
			continue
		}
		select {
		case <-ctx.Done():
			t.Fatalf("haproxy on %s: %v", addr, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return addr
}

func replaceBlock(t testing.TB, cfg, name, with string) string {
	t.Helper()
	re := regexp.MustCompile(`(?s)(# ` + name + ` begin\n).*?(\s*# ` + name + ` end)`)
	require.True(t, re.MatchString(cfg), "haproxy.cfg lost its %s markers", name)
	return re.ReplaceAllString(cfg, "${1}"+strings.ReplaceAll(with, "$", "$$")+"${2}")
}

// wsClient is a client of one session.
type wsClient struct {
	conn  *websocket.Conn
	ready protocol.SessionReady
}

// dialSession opens a session at addr, resuming with tok when not empty.
func dialSession(ctx context.Context, addr, tok string) (*wsClient, error) {
	u := "ws://" + addr + "/v1/session"
	if tok != "" {
		u += "?resume=" + url.QueryEscape(tok)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dctx, u, nil)
	if err != nil {
		return nil, err
	}
	c := &wsClient{conn: conn}
	m, err := c.read(dctx)
	if err != nil {
		conn.CloseNow()
		return nil, err
	}
	if m.Type != protocol.TypeSessionReady {
		conn.CloseNow()
		return nil, fmt.Errorf("first message %s", m.Raw)
	}
	return c, m.As(&c.ready)
}

func (c *wsClient) read(ctx context.Context) (protocol.ServerMessage, error) {
	_, b, err := c.conn.Read(ctx)
	if err != nil {
		return protocol.ServerMessage{}, err
	}
	return protocol.DecodeServer(b)
}

// outcome is what became of one request.
type outcome struct {
	msg  protocol.ServerMessage
	late time.Duration // > 0: the terminal arrived after the deadline
	// draining: session.draining arrived before the terminal.
	draining bool
}

// ask sends 200 ms of audio as request id and reads until its terminal.
func (c *wsClient) ask(ctx context.Context, id string) (outcome, error) {
	pcm := make([]int16, 320)
	for i := range pcm {
		pcm[i] = int16((i * 97) % 2000)
	}
	deadline := time.Now().Add(1500 * time.Millisecond)
	for seq := range int64(10) {
		b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: id, Seq: seq, Final: seq == 9,
			DeadlineAt: protocol.Millis(deadline)}, pcm)
		if err != nil {
			return outcome{}, err
		}
		if err := c.conn.Write(ctx, websocket.MessageBinary, b); err != nil {
			return outcome{}, err
		}
	}
	var o outcome
	for {
		m, err := c.read(ctx)
		if err != nil {
			return o, err
		}
		if m.Type == protocol.TypeSessionDraining {
			o.draining = true
		}
		if m.RequestID == id && protocol.Terminal(m.Type) {
			o.msg, o.late = m, time.Since(deadline)
			return o, nil
		}
	}
}

// answer checks o is a result within its deadline and returns the answer.
func answer(t *testing.T, o outcome) string {
	t.Helper()
	require.Equal(t, protocol.TypeResult, o.msg.Type, "%s", o.msg.Raw)
	require.LessOrEqual(t, o.late, time.Duration(0), "late")
	var r protocol.Result
	require.NoError(t, o.msg.As(&r))
	return r.Answer
}

func needBinaries(t *testing.T) {
	for _, b := range []string{redistest.Binary, "haproxy"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("%s not installed (Debian packages redis-server and haproxy): skipping the fleet test", b)
		}
	}
	if testing.Short() {
		t.Skip("fleet test: not in -short")
	}
}

// TestFleet: three instances behind HAProxy and one Redis. kill -9 of the
// instance a conversation is on: the client resumes on another within
// 2 s and the next prompt carries the earlier turns. SIGTERM of the next
// one, with a request in flight and other clients busy: nothing lost or
// late, the session closes with 1012 and resumes. Redis stopped and
// restarted under load: no request fails or is late.
func TestFleet(t *testing.T) {
	ctx, rd, ai := fleetEnv(t, 90*time.Second)
	procs := startInstances(t, ctx, "i", rd.URL(), ai)
	if t.Failed() {
		return
	}
	byID := map[string]*proc{}
	for _, p := range procs {
		byID[p.id] = p
	}
	lb := startHAProxy(t, ctx, procs)

	// Two turns on one instance.
	c, err := dialSession(ctx, lb, "")
	require.NoError(t, err)
	var said []string
	for i := range 2 {
		o, err := c.ask(ctx, "t"+strconv.Itoa(i))
		require.NoError(t, err)
		said = append(said, answer(t, o))
	}
	first := byID[c.ready.Instance]
	// The history is written before the result: Redis has the second
	// turn already.
	raw := redis.NewClient(&redis.Options{Addr: rd.Addr, DisableIdentity: true})
	defer raw.Close()
	require.Contains(t, raw.Get(ctx, "voiced:conv:"+c.ready.ConversationID).Val(), said[1], "the history is in redis when the result arrives")

	// kill -9 it; resume through HAProxy.
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	_, err = c.read(ctx)
	require.Error(t, err, "the connection to a killed instance ends")
	c2 := resume(t, ctx, lb, c.ready.ResumeToken, 2*time.Second)
	took := time.Since(killed)
	t.Logf("resumed on %s %v after the kill", c2.ready.Instance, took)
	require.Less(t, took, 2*time.Second)
	require.True(t, c2.ready.Resumed)
	require.Equal(t, c.ready.ConversationID, c2.ready.ConversationID)
	require.NotEqual(t, first.id, c2.ready.Instance)

	before := len(ai.requests())
	o, err := c2.ask(ctx, "t2")
	require.NoError(t, err)
	answer(t, o)
	reqs := ai.requests()
	require.Greater(t, len(reqs), before)
	prompt := reqs[len(reqs)-1].messages
	for _, s := range append(said, "question 1", "question 2") {
		require.Contains(t, prompt, s, "the prompt after the resume carries the earlier turns")
	}

	// Background clients keep asking from here on: two start on the
	// instance about to be drained, one through HAProxy; all resume
	// through HAProxy.
	second := byID[c2.ready.Instance]
	stats := &loadStats{}
	bctx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	for i, at := range []string{second.addr, second.addr, lb} {
		load.Go(func() { busyClient(bctx, at, lb, "bg"+strconv.Itoa(i), stats) })
	}
	stats.wait(t, ctx, 3)

	// SIGTERM the instance the conversation is on now, a request in
	// flight: it is answered in time, then the session drains (1012) and
	// resumes elsewhere.
	ai.delay.Store(int64(250 * time.Millisecond)) // t3 is in flight when the signal comes
	require.NoError(t, c2.sendFinal(ctx, "t3"))
	for {
		m, err := c2.read(ctx)
		require.NoError(t, err)
		require.False(t, protocol.Terminal(m.Type), "t3 ended early: %s", m.Raw)
		if m.RequestID == "t3" {
			break // accepted, transcribed
		}
	}
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	term, draining, closeErr := c2.drainOut(ctx, "t3")
	ai.delay.Store(0)
	answer(t, term)
	require.True(t, draining, "session.draining before the close")
	require.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(closeErr), "%v", closeErr)
	c3 := resume(t, ctx, lb, c2.ready.ResumeToken, 2*time.Second)
	require.True(t, c3.ready.Resumed)
	require.NotEqual(t, second.id, c3.ready.Instance)
	require.NotEqual(t, first.id, c3.ready.Instance)
	o, err = c3.ask(ctx, "t4")
	require.NoError(t, err)
	answer(t, o)
	select {
	case <-second.done:
	case <-ctx.Done():
		t.Fatal("the SIGTERMed instance did not exit")
	}
	require.True(t, second.cmd.ProcessState.Success(), "drained instance exits 0: %v", second.cmd.ProcessState)
	stats.wait(t, ctx, 2) // a few requests after the drain

	// Redis stopped and restarted under the load.
	third := byID[c3.ready.Instance]
	rd.Stop()
	waitMetric(t, ctx, third, "voiced_redis_up", 0)
	stats.wait(t, ctx, 6)
	rd.Restart()
	waitMetric(t, ctx, third, "voiced_redis_up", 1)
	stats.wait(t, ctx, 6)
	stopLoad()
	load.Wait()
	t.Logf("background load: %s", stats)
	require.Zero(t, stats.lost.Load(), "requests lost")
	require.Zero(t, stats.late.Load(), "requests late")
	require.Zero(t, stats.failed.Load(), "requests failed")
	c3.conn.Close(websocket.StatusNormalClosure, "")
}

// sendFinal sends a one-frame request.
func (c *wsClient) sendFinal(ctx context.Context, id string) error {
	b, err := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: id, Final: true,
		DeadlineAt: protocol.Millis(time.Now().Add(1500 * time.Millisecond))}, make([]int16, 320))
	if err != nil {
		return err
	}
	return c.conn.Write(ctx, websocket.MessageBinary, b)
}

// drainOut reads a draining session to its close: id's terminal, whether
// session.draining came, and the read error that ended it.
func (c *wsClient) drainOut(ctx context.Context, id string) (outcome, bool, error) {
	var term outcome
	draining := false
	for {
		m, err := c.read(ctx)
		if err != nil {
			return term, draining, err
		}
		switch {
		case m.Type == protocol.TypeSessionDraining:
			draining = true
		case m.RequestID == id && protocol.Terminal(m.Type):
			term.msg = m
		}
	}
}

// resume reconnects through lb with tok until it succeeds or limit passes.
func resume(t *testing.T, ctx context.Context, lb, tok string, limit time.Duration) *wsClient {
	t.Helper()
	end := time.Now().Add(limit)
	for {
		c, err := dialSession(ctx, lb, tok)
		if err == nil {
			t.Cleanup(func() { c.conn.CloseNow() })
			return c
		}
		if time.Now().After(end) {
			t.Fatalf("no resume within %v: %v", limit, err)
		}
		time.Sleep(20 * time.Millisecond) // backoff between reconnects
	}
}

// loadStats counts the background clients' requests.
type loadStats struct {
	answered, retried, lost, late, failed, resumes atomic.Int64
}

func (s *loadStats) String() string {
	return fmt.Sprintf("%d answered, %d refused while draining and sent again, %d resumes, %d lost, %d late, %d failed",
		s.answered.Load(), s.retried.Load(), s.resumes.Load(), s.lost.Load(), s.late.Load(), s.failed.Load())
}

// wait waits until n more requests have been answered.
func (s *loadStats) wait(t *testing.T, ctx context.Context, n int64) {
	t.Helper()
	target := s.answered.Load() + n
	for s.answered.Load() < target {
		select {
		case <-ctx.Done():
			t.Fatalf("background load stalled: %s", s)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// busyClient asks one request after another, 50 ms apart (paced like a
// client, so that the test does not starve the tests of other packages
// that make test runs beside it), as a well-behaved client: on
// session.draining or a close it resumes with its token (through the
// balancer), and a request refused because the server was shutting down
// is sent again on the new session.
func busyClient(ctx context.Context, first, lb, name string, s *loadStats) {
	var c *wsClient
	tok := ""
	for i := 0; ctx.Err() == nil; {
		if c == nil {
			at := lb
			if tok == "" {
				at = first
			}
			var err error
			if c, err = dialSession(ctx, at, tok); err != nil {
				if ctx.Err() == nil {
					time.Sleep(20 * time.Millisecond)
				}
				continue
			}
			if tok != "" {
				s.resumes.Add(1)
			}
			tok = c.ready.ResumeToken
		}
		id := fmt.Sprintf("%s-%d", name, i)
		o, err := c.ask(ctx, id)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			// The connection ended before the terminal: lost, unless it
			// is replayed on the resumed session (counted there).
			s.lost.Add(1)
			c.conn.CloseNow()
			c = nil
		case o.msg.Type == protocol.TypeError && strings.Contains(string(o.msg.Raw), "shutting down"):
			s.retried.Add(1) // refused, not started: sent again after the resume
			c.conn.CloseNow()
			c = nil
		case o.msg.Type != protocol.TypeResult:
			s.failed.Add(1)
			i++
		case o.late > 0:
			s.late.Add(1)
			i++
		default:
			s.answered.Add(1)
			i++
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		if c != nil && o.draining {
			// Wait for the close (1012), then resume.
			for {
				if _, err := c.read(ctx); err != nil {
					break
				}
			}
			c.conn.CloseNow()
			c = nil
		}
	}
	if c != nil {
		c.conn.CloseNow()
	}
}

// TestFleetSharedCooldown: the provider answers 429 with retry-after: 30
// to one instance; every instance skips it for those 30 s, so it gets one
// request in all, not one per instance.
func TestFleetSharedCooldown(t *testing.T) {
	ctx, rd, ai := fleetEnv(t, 60*time.Second)
	ai.rateLimit.Store(true)
	procs := startInstances(t, ctx, "c", rd.URL(), ai)
	if t.Failed() {
		return
	}
	ask := func(p *proc, id string) {
		t.Helper()
		c, err := dialSession(ctx, p.addr, "")
		require.NoError(t, err)
		defer c.conn.CloseNow()
		o, err := c.ask(ctx, id)
		require.NoError(t, err)
		answer(t, o) // the extractive responder answers
	}
	ask(procs[0], "first")
	require.Len(t, ai.requests(), 1)
	// The other instances learn of the cooldown.
	for _, p := range procs[1:] {
		waitMetric(t, ctx, p, "voiced_llm_cooldowns", 1)
	}
	for round := range 3 {
		for _, p := range procs {
			ask(p, fmt.Sprintf("r%d-%s", round, p.id))
		}
	}
	reqs := ai.requests()
	require.Len(t, reqs, 1, "one request to the rate-limited provider in all")
	require.Equal(t, "key-c0", reqs[0].key)

	// The registry lists the three, from any of them.
	for {
		code, body := get(t, "http://"+procs[1].addr+"/v1/cluster")
		require.Equal(t, http.StatusOK, code)
		var got struct {
			Instances []struct {
				ID, Addr string
			} `json:"instances"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		if len(got.Instances) == 3 {
			require.Equal(t, "c1", got.Instances[0].ID)
			require.Equal(t, procs[1].addr, got.Instances[0].Addr)
			require.Equal(t, []string{"c0", "c2"}, []string{got.Instances[1].ID, got.Instances[2].ID})
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("cluster: %s", body)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitMetric polls an instance's metric until it has the value want.
func waitMetric(t *testing.T, ctx context.Context, p *proc, name string, want float64) {
	t.Helper()
	for metricValue(t, ctx, p, name) != want {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %s never became %v", p.id, name, want)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// metricValue reads one unlabelled metric of an instance (-1: none).
func metricValue(t *testing.T, ctx context.Context, p *proc, name string) float64 {
	t.Helper()
	if v, ok := voicedtest.Metric(t, ctx, p.addr, name); ok {
		return v
	}
	return -1
}

// TestFleetResumeRefused: forged and expired tokens are refused with 401
// at the upgrade, through HAProxy as directly.
func TestFleetResumeRefused(t *testing.T) {
	ctx, rd, ai := fleetEnv(t, 60*time.Second)
	p := startInstance(t, ctx, "r0", rd.URL(), ai)
	lb := startHAProxy(t, ctx, []*proc{p})
	c, err := dialSession(ctx, lb, "")
	require.NoError(t, err)
	c.conn.CloseNow()
	payload, sig, _ := strings.Cut(c.ready.ResumeToken, ".")
	var claims map[string]any
	raw, err := base64URL(payload)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &claims))
	claims["e"] = time.Now().Add(-time.Minute).UnixMilli() // re-signed below: expired, not forged
	for _, tt := range []struct{ name, tok, want string }{
		{"forged", reencode(t, claims) + "." + sig, "resume token forged or altered: bad signature"},
		{"expired", signedWith(t, "fleet-test-secret", claims), "resume token expired"},
	} {
		_, resp, err := websocket.Dial(ctx, "ws://"+lb+"/v1/session?resume="+url.QueryEscape(tt.tok), nil)
		require.Error(t, err, tt.name)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, tt.name)
		body, _ := io.ReadAll(resp.Body)
		require.Equal(t, tt.want, strings.TrimSpace(string(body)), tt.name)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
}

// The resume token's format, rebuilt here to forge one: base64url(JSON
// claims) "." base64url(HMAC-SHA256(secret, that first part)).

func base64URL(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func reencode(t *testing.T, claims map[string]any) string {
	t.Helper()
	data, err := json.Marshal(claims)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(data)
}

func signedWith(t *testing.T, secret string, claims map[string]any) string {
	t.Helper()
	payload := reencode(t, claims)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestClusterEndpoint: GET /v1/cluster is authenticated like sessions and,
// without Redis, lists this instance alone.
func TestClusterEndpoint(t *testing.T) {
	base, stop := startVoiced(t, "-stages", "sim", "-auth-token", "secret-token", "-instance-id", "solo", "-recognizers", "6")
	defer func() { require.NoError(t, stop()) }()
	code, _ := get(t, base+"/v1/cluster")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body := get(t, base+"/v1/cluster?access_token=secret-token")
	require.Equal(t, http.StatusOK, code)
	var got struct {
		Instances []map[string]any `json:"instances"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &got), body)
	require.Len(t, got.Instances, 1)
	in := got.Instances[0]
	require.Equal(t, "solo", in["id"])
	require.Equal(t, strings.TrimPrefix(base, "http://"), in["addr"])
	require.EqualValues(t, 6, in["freeRecognizers"])
	require.EqualValues(t, 0, in["sessions"])
	require.Equal(t, false, in["saturated"])
	require.Equal(t, false, in["draining"])
	require.NotZero(t, in["updatedAt"])
}

// BenchmarkHAProxyRoundTrip measures what HAProxy adds to a message's
// round trip (ping → pong on an open session), on loopback, against the
// same round trip straight to voiced.
func BenchmarkHAProxyRoundTrip(b *testing.B) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		b.Skip("haproxy not installed")
	}
	agent := freeAddr(b)
	base, stop := startVoiced(b, "-stages", "sim", "-haproxy-agent-addr", agent, "-instance-id", "bench")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct := strings.TrimPrefix(base, "http://")
	lb := startHAProxy(b, ctx, []*proc{{id: "bench", addr: direct, agent: agent}})
	for _, at := range []struct{ name, addr string }{{"direct", direct}, {"haproxy", lb}} {
		b.Run(at.name, func(b *testing.B) {
			c, err := dialSession(ctx, at.addr, "")
			require.NoError(b, err)
			defer c.conn.CloseNow()
			ping, _ := json.Marshal(protocol.Ping{Type: protocol.TypePing, ClientTime: 1})
			for b.Loop() {
				require.NoError(b, c.conn.Write(ctx, websocket.MessageText, ping))
				m, err := c.read(ctx)
				require.NoError(b, err)
				require.Equal(b, protocol.TypePong, m.Type)
			}
		})
	}
}

// TestReadyAfterFirstRedisCheck: with -redis, an instance is ready
// ("voiced ready", /readyz) only once its first Redis check has decided.
// A client resuming at that very moment, on an instance whose Redis
// answers 150 ms late, is resumed from Redis; an instance whose Redis is
// unreachable or frozen at start becomes ready all the same, on local
// state.
func TestReadyAfterFirstRedisCheck(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server: not in -short")
	}
	rd := redistest.Start(t)
	frozen := redistest.Start(t)
	frozen.Freeze()
	t.Cleanup(frozen.Thaw)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	raw := redis.NewClient(&redis.Options{Addr: rd.Addr, DisableIdentity: true})
	defer raw.Close()
	const secret = "ready-test-secret"
	require.NoError(t, raw.Set(ctx, "voiced:conv:c-early", `{"tenant":"","turns":[{"User":"hello","Assistant":"hi"}]}`, time.Minute).Err())
	tok := signedWith(t, secret, map[string]any{"c": "c-early", "t": "", "e": time.Now().Add(time.Minute).UnixMilli()})

	for _, tt := range []struct {
		name, url string
		up        float64
	}{
		{"slow", rd.Slow(t, 150*time.Millisecond), 1},
		{"unreachable", "redis://" + freeAddr(t) + "/0", 0},
		{"frozen", frozen.URL(), 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			base, stop := startVoiced(t, "-stages", "sim", "-redis", tt.url, "-redis.budget", "1s", "-resume-secret", secret)
			defer func() { require.NoError(t, stop()) }()
			t.Logf("ready %v after the start", time.Since(start))
			addr := strings.TrimPrefix(base, "http://")
			if tt.up == 1 {
				// At once: no wait between ready and the resume.
				c, err := dialSession(ctx, addr, tok)
				require.NoError(t, err)
				defer c.conn.CloseNow()
				require.True(t, c.ready.Resumed, "resumed from redis as soon as the instance is ready")
				require.Equal(t, "c-early", c.ready.ConversationID)
			}
			code, _ := get(t, base+"/readyz")
			require.Equal(t, http.StatusOK, code)
			_, body := get(t, base+"/metrics")
			require.Contains(t, body, fmt.Sprintf("\nvoiced_redis_up %v\n", tt.up))
		})
	}
}

// TestFleetLoadResume: voiceload -resume (package loadgen) through
// HAProxy to three instances sharing one Redis, at a small scale: kill -9
// of one instance, then SIGTERM of another. Every dropped session
// resumes within 2 s; each terminal a session missed is replayed exactly
// once; the requests in flight on the killed instance are counted as
// lost with it; nothing else is missing, late, doubled or failed.
func TestFleetLoadResume(t *testing.T) {
	ctx, rd, ai := fleetEnv(t, 90*time.Second)
	procs := startInstances(t, ctx, "l", rd.URL(), ai)
	if t.Failed() {
		return
	}
	lb := startHAProxy(t, ctx, procs)
	cfg := loadgen.Config{Addr: lb, Sessions: 12, Duration: 8 * time.Second, Think: 300 * time.Millisecond,
		Synthetic: 400 * time.Millisecond, Seed: 21, MetricsURL: "off", Resume: true}
	type result struct {
		rep loadgen.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := loadgen.Run(ctx, cfg)
		done <- result{rep, err}
	}()
	for _, step := range []struct {
		after time.Duration
		p     *proc
		sig   syscall.Signal
	}{
		{2500 * time.Millisecond, procs[0], syscall.SIGKILL},
		{2500 * time.Millisecond, procs[1], syscall.SIGTERM},
	} {
		select {
		case <-time.After(step.after):
		case <-ctx.Done():
			t.Fatal("timed out")
		}
		// Not before the instance serves sessions: a loaded machine may
		// dial them slowly, and a signal to an empty instance proves nothing.
		for metricValue(t, ctx, step.p, "voiced_sessions") <= 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("%s never served a session", step.p.id)
			case <-time.After(10 * time.Millisecond):
			}
		}
		require.NoError(t, step.p.cmd.Process.Signal(step.sig))
	}
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("voiceload did not finish")
	}
	require.NoError(t, res.err)
	rep := res.rep
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Log("\n" + table.String())
	select {
	case <-procs[1].done:
		require.True(t, procs[1].cmd.ProcessState.Success(), "drained instance exits 0: %v", procs[1].cmd.ProcessState)
	case <-ctx.Done():
		t.Fatal("the SIGTERMed instance did not exit")
	}
	r := rep.Resume
	require.NotNil(t, r)
	require.Positive(t, r.Killed, "sessions on the killed instance dropped")
	require.Zero(t, r.NotResumed+r.GaveUp, "dropped sessions not resumed")
	require.Positive(t, r.Closed, "sessions on the drained instance closed (1012)")
	require.Equal(t, r.Drops, r.Resumed, "every dropped session resumed")
	// The 2 s is for a quiet machine (scripts/fleet-load.sh);
	// make test runs this beside every other package's tests, -race.
	require.Less(t, r.Time.Max, 5000.0, "resumed within 5 s")
	require.Equal(t, r.Missed, r.Replayed+r.LostWithInstance+rep.Invariants.Missing, "each missed terminal replayed, lost with the killed instance, or missing (below)")
	inv := rep.Invariants
	stall := rep.ClientTimerLag.Max
	if stall < 400 {
		require.Zero(t, inv.Missing, "missing terminals")
	} else {
		// A request a client stalled for longer than a drain's linger
		// (500 ms) sends after the server's 1012 close frame has left is
		// refused, and the refusal replayed on the resumed session, unless
		// the closing handshake read its frame, which discards it: only a
		// stall that long may lose one.
		for _, m := range rep.MissingRequests {
			require.Equal(t, "server_closed", m.Dropped, "%+v", m)
		}
		t.Logf("%d requests missing after a %.0f ms stall of voiceload", inv.Missing, stall)
	}
	require.Zero(t, inv.Duplicate, "a terminal twice")
	require.Zero(t, inv.AfterTerminal)
	if len(rep.LateRequests) > 0 {
		// Only a stall of the machine can make a terminal late: as in
		// loadgen's own tests, at most 50 ms plus twice the longest
		// stall voiceload saw.
		stall := rep.ClientTimerLag.Max
		require.Greater(t, rep.LateRequests[0].SlackMs, -(50 + 2*stall), "late beyond the machine's stalls (%.1f ms)", stall)
	}
	require.Zero(t, inv.Unplanned, "%v", rep.Requests.Unplanned)
	require.Empty(t, rep.SessionErrors)
}
