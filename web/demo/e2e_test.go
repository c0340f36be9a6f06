package demo_test

// End-to-end tests of the browser demo: Debian's Chromium, headless, with
// a fake microphone that plays a WAV file spoken by espeak-ng, drives the
// page served by a real voiced binary built from ./cmd/voiced. They skip
// when chromium or espeak-ng is not installed (.ci/run installs both).

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/internal/stages/stt/sttest"
)

// testTimeout bounds one browser test: starting Chromium, speaking the
// utterance in real time (a few seconds, looped) and the pipeline. It is
// generous because a loaded 2-core CI machine starts Chromium slowly.
const testTimeout = 60 * time.Second

// buildTimeout bounds building voiced (cgo, cold cache in CI).
const buildTimeout = 5 * time.Minute

// utterance is what the fake microphone says. "where is my order" is an
// example of the helpdesk domain's order_status intent.
const (
	utterance  = "where is my order"
	wantIntent = "order_status"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// requireTools skips the test when the browser or the synthesiser is
// missing, and returns Chromium's path.
func requireTools(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped with -short")
	}
	chromium := os.Getenv("VOICED_CHROMIUM")
	if chromium == "" {
		p, err := exec.LookPath("chromium")
		if err != nil {
			t.Skip("chromium not installed (apt-get install chromium, or set VOICED_CHROMIUM): skipping the browser end-to-end test")
		}
		chromium = p
	}
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		t.Skip("espeak-ng not installed (apt-get install espeak-ng): skipping the browser end-to-end test")
	}
	return chromium
}

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// voicedBinary builds ./cmd/voiced once per test run.
func voicedBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "voiced-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "voiced")
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "github.com/voiced/voiced/cmd/voiced")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/voiced: %w\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// server is a running voiced.
type server struct {
	url  string
	mu   sync.Mutex
	logs strings.Builder // guarded by mu
}

func (s *server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// startVoiced runs voiced on a free loopback port and returns once it
// listens: it reads the address from the "voiced listening" log line
// (JSON, since stderr is a pipe).
func startVoiced(t *testing.T, ctx context.Context, args ...string) *server {
	t.Helper()
	bin := voicedBinary(t)
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	s := &server{}
	addrc := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Bytes()
			s.mu.Lock()
			s.logs.Write(line)
			s.logs.WriteByte('\n')
			s.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "voiced listening" && rec.Addr != "" {
				select {
				case addrc <- rec.Addr:
				default:
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() {
		<-scanned // Wait must not run before the pipe is drained
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("voiced log:\n%s", s.log())
		}
	})
	select {
	case addr := <-addrc:
		s.url = "http://" + addr + "/"
	case err := <-exited:
		exited <- err
		t.Fatalf("voiced exited before listening: %v\n%s", err, s.log())
	case <-ctx.Done():
		t.Fatalf("voiced did not start listening: %v\n%s", ctx.Err(), s.log())
	}
	return s
}

// speechWAV writes the utterance spoken by espeak-ng, padded with silence
// so that the page's voice detector sees one utterance with clear edges
// each time Chromium loops the file, and returns its path.
func speechWAV(t *testing.T, ctx context.Context, text string) string {
	t.Helper()
	v, ok := sttest.VoiceByName("espeak-en-us")
	require.True(t, ok)
	pcm, rate, err := sttest.Synth(ctx, v, text)
	require.NoError(t, err)
	lead := make([]int16, rate*6/10)
	tail := make([]int16, rate*16/10)
	all := append(append(lead, pcm...), tail...)
	path := filepath.Join(t.TempDir(), "speech.wav")
	require.NoError(t, os.WriteFile(path, wavFile(all, rate), 0o644))
	return path
}

// wavFile encodes 16-bit mono PCM as a WAV file.
func wavFile(pcm []int16, rate int) []byte {
	data := 2 * len(pcm)
	b := make([]byte, 0, 44+data)
	b = append(b, "RIFF"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(36+data))
	b = append(b, "WAVEfmt "...)
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1) // PCM
	b = binary.LittleEndian.AppendUint16(b, 1) // mono
	b = binary.LittleEndian.AppendUint32(b, uint32(rate))
	b = binary.LittleEndian.AppendUint32(b, uint32(rate*2))
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, uint32(data))
	for _, s := range pcm {
		b = binary.LittleEndian.AppendUint16(b, uint16(s))
	}
	return b
}

// browser starts headless Chromium with a fake microphone playing wav,
// and returns a tab's context and the page's console messages so far.
func browser(t *testing.T, ctx context.Context, chromium, wav string) (context.Context, func() []chromedp.ConsoleMessage) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("use-file-for-fake-audio-capture", wav),
		chromedp.WindowSize(1100, 1400),
	}
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	tctx, cancelT := chromedp.NewContext(actx)
	// The first Run starts the browser; it must not carry a timeout of
	// its own (ctx's is the test's).
	require.NoError(t, chromedp.Do(tctx))

	var mu sync.Mutex
	var msgs []chromedp.ConsoleMessage
	console := chromedp.Console(tctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range console {
			if err != nil {
				return
			}
			mu.Lock()
			msgs = append(msgs, m)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		cancelT()
		cancelA()
		wg.Wait()
		if t.Failed() {
			mu.Lock()
			for _, m := range msgs {
				t.Logf("console: %s", m)
			}
			mu.Unlock()
		}
	})
	return tctx, func() []chromedp.ConsoleMessage {
		mu.Lock()
		defer mu.Unlock()
		return append([]chromedp.ConsoleMessage(nil), msgs...)
	}
}

// turnInfo is what a turn card shows, read from the DOM.
type turnInfo struct {
	ID         string    `json:"id"`
	N          int       `json:"n"`
	State      string    `json:"state"`
	Code       string    `json:"code"`
	Transcript string    `json:"transcript"`
	Intent     string    `json:"intent"`
	IntentText string    `json:"intentText"`
	Answer     string    `json:"answer"`
	Articles   int       `json:"articles"`
	Bars       []barInfo `json:"bars"`
	Deadlines  int       `json:"deadlines"`
	Caption    string    `json:"caption"`
	Degraded   bool      `json:"degraded"`
}

type barInfo struct {
	Stage string  `json:"stage"`
	MS    int     `json:"ms"`
	Width float64 `json:"width"`
}

// turnJS reads the card of turn n (1-based, in page order of creation)
// once it has ended, and is falsy until then.
const turnJS = `(() => {
  const cards = [...document.querySelectorAll('#turns .turn')].reverse();
  const c = cards[%d - 1];
  if (!c || !['done', 'error', 'lost'].includes(c.dataset.state)) return null;
  const q = (s) => c.querySelector(s);
  return {
    id: c.dataset.requestId,
    n: %d,
    state: c.dataset.state,
    code: c.dataset.code || '',
    transcript: q('.final-transcript').textContent,
    intent: c.dataset.intent || '',
    intentText: q('.intent').textContent,
    answer: q('.answer').textContent,
    articles: c.querySelectorAll('.articles li').length,
    bars: [...c.querySelectorAll('.tl-bar')].map((b) => ({
      stage: b.dataset.stage, ms: Number(b.dataset.ms), width: b.getBoundingClientRect().width })),
    deadlines: c.querySelectorAll('.tl-deadline').length,
    caption: (q('.tl-caption') || {}).textContent || '',
    degraded: c.dataset.degraded === 'true',
  };
})()`

func waitTurn(t *testing.T, ctx context.Context, n int) turnInfo {
	t.Helper()
	ti, err := chromedp.Run(ctx, chromedp.Poll[turnInfo](fmt.Sprintf(turnJS, n, n),
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(0)))
	require.NoError(t, err, "waiting for turn %d to end", n)
	return ti
}

// openPage loads the demo, waits for its session and starts the
// microphone.
func openPage(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(`#conn[data-state="open"]`),
		chromedp.Click(`#start`),
		chromedp.WaitVisible(`body[data-mic="on"]`),
	))
}

// pageErrors are console messages that mean the page misbehaved: an
// uncaught exception, or a server message after a request's terminal one.
func pageErrors(msgs []chromedp.ConsoleMessage) []string {
	var out []string
	for _, m := range msgs {
		if m.IsException() || strings.Contains(m.Text, "voiced:") {
			out = append(out, m.String())
		}
	}
	return out
}

func simArgs() []string {
	// Deterministic simulation: no slow calls, no failures, a fixed
	// transcript. The sim STT ignores the audio.
	return []string{"-stages=sim", "-sim-transcript", utterance, "-sim-sigma=-1",
		"-sim-slow-share=-1", "-sim-fail-share=-1"}
}

// TestDemoAnswersUtterance speaks into the page and checks that the turn
// shows its transcript, intent, answer and a to-scale timeline.
func TestDemoAnswersUtterance(t *testing.T) {
	chromium := requireTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	wav := speechWAV(t, ctx, utterance)
	srv := startVoiced(t, ctx, simArgs()...)
	tab, console := browser(t, ctx, chromium, wav)
	openPage(t, tab, srv.url)

	ti := waitTurn(t, tab, 1)
	require.Equal(t, "done", ti.State, "turn 1 ended with %q", ti.Code)
	require.Equal(t, utterance, ti.Transcript)
	require.NotEmpty(t, ti.Intent)
	require.Contains(t, ti.IntentText, ti.Intent)
	require.Contains(t, ti.IntentText, "%")
	require.NotEmpty(t, ti.Answer)
	require.False(t, ti.Degraded)

	// The timeline: a bar per stage, each drawn, to scale against the
	// others, and the deadline line on every row.
	require.Len(t, ti.Bars, 4)
	stages := map[string]barInfo{}
	for _, b := range ti.Bars {
		stages[b.Stage] = b
		require.Positive(t, b.Width, "bar %s not drawn", b.Stage)
	}
	for _, s := range []string{"stt", "intent", "retrieval", "llm"} {
		require.Contains(t, stages, s)
	}
	// Widths are proportional to durations: compare the longest with the
	// shortest, with room for rounding to whole ms and pixels.
	stt, intent := stages["stt"], stages["intent"]
	if intent.MS >= 10 {
		ratio := (stt.Width / intent.Width) / (float64(stt.MS) / float64(intent.MS))
		require.InDelta(t, 1, ratio, 0.25, "stt %+v vs intent %+v", stt, intent)
	}
	require.Equal(t, 4, ti.Deadlines)
	require.Contains(t, ti.Caption, "LLM started with")

	if path := os.Getenv("VOICED_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, png, 0o644))
		t.Logf("screenshot saved to %s", path)
	}

	// At phone width nothing overflows sideways.
	require.NoError(t, chromedp.Do(tab, chromedp.EmulateViewport(375, 800)))
	fits, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth`))
	require.NoError(t, err)
	require.True(t, fits, "the page scrolls sideways at 375 px")

	require.Empty(t, pageErrors(console()))
}

// TestDemoCancelsTurn cancels a turn from the page while its utterance is
// streaming, sees it end as cancelled, and sees the next turn answered.
func TestDemoCancelsTurn(t *testing.T) {
	chromium := requireTools(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	wav := speechWAV(t, ctx, utterance)
	srv := startVoiced(t, ctx, simArgs()...)
	tab, console := browser(t, ctx, chromium, wav)
	openPage(t, tab, srv.url)

	id, err := chromedp.Run(tab, chromedp.Poll[string](
		`document.querySelector('#turns .turn[data-state="listening"]')?.dataset.requestId`,
		chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(0)))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tab, chromedp.Click(fmt.Sprintf(`.turn[data-request-id=%q] button.cancel`, id))))

	first := waitTurn(t, tab, 1)
	require.Equal(t, id, first.ID)
	require.Equal(t, "error", first.State)
	require.Equal(t, "cancelled", first.Code)
	require.Empty(t, first.Answer)

	// The looped file speaks again: the session still answers, and the
	// cancelled turn got nothing after its terminal message.
	second := waitTurn(t, tab, 2)
	require.Equal(t, "done", second.State, "turn 2 ended with %q", second.Code)
	require.NotEmpty(t, second.Answer)
	again := waitTurn(t, tab, 1)
	require.Equal(t, first, again)
	require.Empty(t, pageErrors(console()))
}

