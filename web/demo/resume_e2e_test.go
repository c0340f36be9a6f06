package demo_test

// End-to-end tests of the page's resume: a dropped connection within one
// voiced process, and restarts of the instance under the page with the
// conversation shared through a real redis-server.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fleet/redistest"
)

// resumeArgs run simulated stages that take 1.5 s to finalise a
// transcript, always: a turn stays "thinking" long enough for the test to
// drop its connection before the answer exists, and the 3 s budget still
// holds the whole answer (-stt.cap lifts the recogniser's own 1.2 s cap).
var resumeArgs = append(append([]string(nil), simArgs...), "-sim-sigma=-1", "-sim-stt-median=1500ms", "-stt.cap=2500ms", "-max-budget=3s")

// cutter is a loopback TCP proxy in front of voiced that the test can
// cut, as a mobile network is: every connection through it ends at once
// (the page sees its WebSocket close with 1006, the server its reader
// end), and new ones are accepted and closed until it is mended.
type cutter struct {
	url    string
	target string
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
	closed bool
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &cutter{url: "http://" + ln.Addr().String() + "/", target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	c.wg.Go(c.accept)
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.cut()
		c.wg.Wait()
	})
	return c
}

func (c *cutter) accept() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		refuse := c.down || c.closed
		c.mu.Unlock()
		if refuse {
			in.Close()
			continue
		}
		out, err := net.DialTimeout("tcp", c.target, time.Second)
		if err != nil {
			in.Close()
			continue
		}
		if !c.track(in, out) {
			continue
		}
		c.wg.Go(func() { c.pipe(in, out) })
		c.wg.Go(func() { c.pipe(out, in) })
	}
}

// track registers a connection pair, unless the cutter went down since.
func (c *cutter) track(in, out net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down || c.closed {
		in.Close()
		out.Close()
		return false
	}
	c.conns[in], c.conns[out] = struct{}{}, struct{}{}
	return true
}

// pipe copies one direction; when it ends both sides close.
func (c *cutter) pipe(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	c.mu.Lock()
	delete(c.conns, dst)
	delete(c.conns, src)
	c.mu.Unlock()
}

// cut ends every connection and refuses new ones.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	for conn := range c.conns {
		conn.Close()
	}
}

// mend lets connections through again.
func (c *cutter) mend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = false
}

// metric reads one unlabelled sample from the server's /metrics (served
// on -addr while that is loopback), 0 when absent.
func metric(ctx context.Context, base, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}

// waitMetric polls the server's metric until it reaches at least want.
func waitMetric(t *testing.T, ctx context.Context, base, name string, want float64) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		v, err := metric(ctx, base, name)
		if err == nil && v >= want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never reached %v (last %v, %v)", name, want, v, err)
		case <-tick.C:
		}
	}
}

// openPTTPage loads the demo at url with push-to-talk, the budget at its
// most (3 s) and the microphone on, with focus on the talk button.
func openPTTPage(t *testing.T, tab context.Context, url string) {
	t.Helper()
	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate(url),
		chromedp.WaitVisible(`#conn[data-state="open"][data-resumed="false"]`),
		chromedp.Focus(`#budget`),
		chromedp.KeyEvent(kb.End),
		chromedp.Click(`#mode-ptt`),
		chromedp.Click(`#start`),
		chromedp.WaitVisible(`body[data-mic="on"]`),
		chromedp.WaitEnabled(`#ptt`),
		chromedp.Focus(`#ptt`),
	))
}

// waitPage polls a page expression until it is true.
func waitPage(t *testing.T, tab context.Context, js, what string) {
	t.Helper()
	_, err := chromedp.Run(tab, chromedp.Poll[bool](js,
		chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(0)))
	require.NoError(t, err, "waiting for %s", what)
}

// cardJS is an expression on turn n's card (1-based, in order of creation).
func cardJS(n int, cond string) string {
	return fmt.Sprintf(`(() => { const c = [...document.querySelectorAll('#turns .turn')].reverse()[%d - 1]; return !!c && (%s); })()`, n, cond)
}

// talk says turn n with push-to-talk and waits until its final frame is
// sent: the card is "thinking".
func talk(t *testing.T, tab context.Context, n int) {
	t.Helper()
	pttTurn(t, tab, n, 10)
	waitPage(t, tab, cardJS(n, `c.dataset.state === 'thinking'`), fmt.Sprintf("turn %d thinking", n))
}

// waitFramesRead waits until the server at base has read every audio frame
// the page has sent (every turn on the page is this server's). A card is
// "thinking" once its final frame is handed to the WebSocket, not once it
// arrives: a connection cut before then ends the request still receiving
// audio with client_disconnect, "cancelled" on the resumed page, as
// protocol.md documents.
func waitFramesRead(t *testing.T, ctx, tab context.Context, base string) {
	t.Helper()
	sent, err := chromedp.Run(tab, chromedp.Evaluate[int](
		`[...document.querySelectorAll('#turns .turn')].reduce((n, c) => n + Number(c.dataset.frames || 0), 0)`))
	require.NoError(t, err)
	waitMetric(t, ctx, base, "voiced_audio_frames_total", float64(sent))
}

const connectionBannerJS = `(() => { const b = document.getElementById('banner'); return !b.hidden && b.dataset.kind === 'connection'; })()`

// TestDemoResumesAfterDrop drops the page's connection while a turn is
// thinking, keeps it down until the server has ended the request and kept
// its result, and sees the page resume the conversation and show that
// result on the card that waited for it, then answer the next turn.
func TestDemoResumesAfterDrop(t *testing.T) {
	ctx, srv, tab, console := demoPage(t, true, resumeArgs...)
	link := newCutter(t, srv.addr)
	openPTTPage(t, tab, link.url)

	talk(t, tab, 1)
	waitFramesRead(t, ctx, tab, srv.url) // the request has its final frame
	link.cut()
	waitPage(t, tab, connectionBannerJS, "the page to notice the lost connection")
	waitPage(t, tab, cardJS(1, `c.dataset.held === 'true' && c.dataset.state === 'thinking'`), "turn 1 held while reconnecting")
	// The request ran on without its connection; its result waits for a
	// resumed session. While the link is down the page's dials and its
	// probes fail: it keeps its token.
	waitMetric(t, ctx, srv.url, "voiced_missed_terminals_total", 1)
	link.mend()

	require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(`#conn[data-state="open"][data-resumed="true"]`)))
	first := waitTurn(t, tab, 1)
	require.Equal(t, "done", first.State, "turn 1 ended with %q", first.Code)
	require.True(t, first.Held)
	require.NotEmpty(t, first.Answer)
	waitMetric(t, ctx, srv.url, "voiced_replayed_terminals_total", 1)
	conn, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('conn').textContent`))
	require.NoError(t, err)
	require.Equal(t, "Connected (resumed)", conn)

	talk(t, tab, 2)
	second := waitTurn(t, tab, 2)
	require.Equal(t, "done", second.State, "turn 2 ended with %q", second.Code)
	require.False(t, second.Held)
	require.Empty(t, pageErrors(console()))
}

// TestDemoResumesAcrossRestarts restarts the page's instance twice on the
// same address, each new process sharing the conversations (a real
// redis-server) and the resume secret. Stopped with SIGTERM while a turn
// is thinking, the instance drains: the page says so, gets the answer,
// and comes back with its token as soon as the next process listens.
// Killed while a turn is thinking, the instance takes the answer with it:
// the page resumes on the next process, and the turn ends as lost once
// its deadline and the grace have passed. The conversation goes on.
//
// The page reaches the instances through a cutter that the test holds
// down until the new process has reached Redis: a process is ready (and
// listens) a few milliseconds before its first Redis check answers, and a
// resume in that moment is accepted without history ("resumed": false, as
// documented), which made this test fail about once in six runs.
func TestDemoResumesAcrossRestarts(t *testing.T) {
	if !redistest.Available() {
		t.Skip("redis-server not installed (Debian package redis-server): skipping the fleet resume test")
	}
	rd := redistest.Start(t)
	// A Redis call's budget is 20 ms by default, which a loaded 2-core
	// machine misses now and then (the session is then not resumed, as
	// documented); the fleet test gives it 250 ms too.
	fleet := append(append([]string(nil), resumeArgs...), "-redis", rd.URL(), "-redis.budget=250ms", "-resume-secret", "e2e-fleet-secret")
	ctx, a, tab, console := demoPage(t, true, append(fleet, "-instance-id", "a")...)
	link := newCutter(t, a.addr)
	openPTTPage(t, tab, link.url)
	// next starts the instance id on the address and lets the page
	// through once it has reached Redis.
	next := func(id string) *server {
		link.cut()
		s := startVoiced(t, ctx, a.addr, append(fleet, "-instance-id", id)...)
		waitMetric(t, ctx, s.url, "voiced_redis_up", 1)
		link.mend()
		return s
	}

	talk(t, tab, 1)
	var stopped sync.WaitGroup
	stopped.Go(a.stop)
	waitPage(t, tab, `document.getElementById('conn').dataset.state === 'draining'`, "the page to show the drain")
	first := waitTurn(t, tab, 1)
	require.Equal(t, "done", first.State, "turn 1 ended with %q", first.Code)
	require.False(t, first.Held, "the drain answered turn 1 on its own connection")
	waitPage(t, tab, connectionBannerJS, "the page to see the drained instance close")
	stopped.Wait()

	b := next("b")
	require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(`#conn[data-state="open"][data-resumed="true"]`)))
	title, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById('conn').title`))
	require.NoError(t, err)
	require.Contains(t, title, "on instance b")

	talk(t, tab, 2)
	b.kill()
	waitPage(t, tab, cardJS(2, `c.dataset.held === 'true'`), "turn 2 held while reconnecting")
	next("c")
	require.NoError(t, chromedp.Do(tab, chromedp.WaitVisible(`#conn[data-state="open"][data-resumed="true"]`)))
	second := waitTurn(t, tab, 2)
	require.Equal(t, "lost", second.State)
	require.True(t, second.Held)

	talk(t, tab, 3)
	third := waitTurn(t, tab, 3)
	require.Equal(t, "done", third.State, "turn 3 ended with %q", third.Code)
	require.Empty(t, pageErrors(console()))
}
