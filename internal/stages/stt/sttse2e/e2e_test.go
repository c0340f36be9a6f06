//go:build cgo && !nosphinx

package sttse2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/domain/helpdesk"
	"github.com/voiced/voiced/internal/audio/mulaw"
	"github.com/voiced/voiced/internal/audio/resample"
	"github.com/voiced/voiced/internal/deadline"
	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
	"github.com/voiced/voiced/internal/vad"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTimeout = 60 * time.Second

// Stand-ins for the stages after STT, which this test is not about.
type otherStages struct{}

func (otherStages) Classify(ctx context.Context, text string) (pipeline.Intent, error) {
	return pipeline.Intent{Name: "order_status", Confidence: 0.9}, nil
}

func (otherStages) Retrieve(ctx context.Context, q string, k int) ([]pipeline.Passage, error) {
	return nil, nil
}

func (otherStages) Generate(ctx context.Context, req pipeline.GenerateRequest, emit func(string)) (pipeline.Generation, error) {
	emit("ok")
	return pipeline.Generation{Provider: "test"}, nil
}

type server struct {
	url string
	reg *prometheus.Registry
}

func newServer(t *testing.T) *server {
	t.Helper()
	return newServerWith(t, nil)
}

// newServerWith is newServer with the recogniser wrapped by wrap (nil:
// as it is).
func newServerWith(t *testing.T, wrap func(pipeline.Transcriber) pipeline.Transcriber) *server {
	t.Helper()
	if _, err := os.Stat(sphinx.DefaultModelDir); err != nil {
		t.Skip("pocketsphinx-en-us not installed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	d, err := domain.LoadFS(helpdesk.FS, ".")
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	// Three decoders: TestServerTurnsThroughSession's three turns each
	// hold one from their first speech frame, and on a loaded machine the
	// first is still decoding when the third starts (with two, the third
	// was refused overloaded at load 10). One search whatever the load:
	// these tests compare transcripts, and a turn that overlaps another on
	// a slow machine would otherwise get the busy search and lose words
	// that the same audio sent alone keeps (8 errors against 4 at load 6).
	eng, err := sphinx.New(ctx, sphinx.Config{Decoders: 3, BusySearch: sphinx.SearchFast, CacheDir: t.TempDir()}, d.CorpusSentences(), log, reg)
	require.NoError(t, err)
	var stt pipeline.Transcriber = eng
	if wrap != nil {
		stt = wrap(eng)
	}
	other := otherStages{}
	// These tests judge what the recogniser hears, not how fast: a roomy
	// budget keeps a starved CPU (a loaded 2-core machine) from cutting
	// finalisation short (stt_partial). Timing is measured by voiceload
	// and recorded in docs/benchmarks.md.
	pcfg := pipeline.Config{STT: deadline.Stage{Cap: roomyBudget - time.Second}}
	pl, err := pipeline.New(pcfg, pipeline.Stages{STT: stt, Intent: other, Retrieval: other, LLM: other, Templates: d},
		pipeline.NewMetrics(reg))
	require.NoError(t, err)
	srv := session.NewServer(session.Config{MaxBudget: roomyBudget}, pl, log, session.NewMetrics(reg))
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		require.NoError(t, eng.Close())
	})
	return &server{url: "ws" + strings.TrimPrefix(hs.URL, "http"), reg: reg}
}

// roomyBudget is every request's deadline after its final frame: the
// server's maximum budget, which it counts on its monotonic clock from
// the final frame's arrival.
const roomyBudget = 8 * time.Second

// clientBudget is the deadline the test client asks for, further than
// roomyBudget so that the server's bound decides. A deadlineAt is wall
// clock time: a step of the machine's clock between sending and
// receiving would shorten it. That is the likeliest reading of one
// failure (intent, retrieval and LLM all skipped for lack of time, 2 s
// into an 8 s budget, in a make test of 2026-12-02).
const clientBudget = roomyBudget + time.Minute

// dial opens a session and reads its session.ready; the connection is
// closed when the test ends.
func (s *server) dial(t *testing.T, ctx context.Context) *websocket.Conn {
	t.Helper()
	conn, _, err := websocket.Dial(ctx, s.url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	_, _, err = conn.Read(ctx) // session.ready
	require.NoError(t, err)
	return conn
}

// utterance streams pcm as one request in 20 ms frames, paced in real time
// as a microphone would send them (the session refuses a client that runs
// far ahead of the recogniser), and returns the transcript events and the
// result.
func utterance(t *testing.T, ctx context.Context, conn *websocket.Conn, id string, pcm []int16, rate int) ([]protocol.Transcript, protocol.Result) {
	t.Helper()
	fr := rate / 50
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	seq := int64(0)
	for i := 0; i < len(pcm); i += fr {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		end := min(i+fr, len(pcm))
		h := protocol.AudioHeader{RequestID: id, Seq: seq, Final: end == len(pcm),
			DeadlineAt: protocol.Millis(time.Now().Add(clientBudget))}
		if seq == 0 {
			h.SampleRate = rate
		}
		b, err := protocol.EncodeBinaryAudio(nil, h, pcm[i:end])
		require.NoError(t, err)
		require.NoError(t, conn.Write(ctx, websocket.MessageBinary, b))
		seq++
	}
	var ts []protocol.Transcript
	for {
		_, b, err := conn.Read(ctx)
		require.NoError(t, err)
		m, err := protocol.DecodeServer(b)
		require.NoError(t, err)
		if m.RequestID != id {
			continue
		}
		switch m.Type {
		case protocol.TypeTranscript:
			var tr protocol.Transcript
			require.NoError(t, m.As(&tr))
			ts = append(ts, tr)
		case protocol.TypeResult:
			var r protocol.Result
			require.NoError(t, m.As(&r))
			return ts, r
		case protocol.TypeError:
			t.Fatalf("request %s failed: %s", id, m.Raw)
		}
	}
}

// TestTranscriptsThroughSession sends real speech through a session and
// checks the transcripts: partials while speaking, one final, the same
// text in the result, and close to what was said. Close is bounded per
// utterance (at most 2 word errors: a broken pipeline fails alone) and
// over the set (at most 3 of its 37 words): a recogniser trades single
// words between sentences, and the set bound is what says it stays good.
// Since 8 kHz audio is folded above 4 kHz (sphinx.DefaultNarrowbandFold),
// flite kal's "how long does delivery take" comes out "how long ago and
// delivery take" (2 errors) while kal's tuning-set word error rate fell
// from 26.7% to 19.2%.
func TestTranscriptsThroughSession(t *testing.T) {
	s := newServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	conn := s.dial(t, ctx)

	const maxErrs, maxSetErrs = 2, 3
	tests := []struct{ voice, text string }{
		{"flite-slt", "can you check my order status please"},
		{"flite-slt", "i cannot remember the password for my account"},
		{"flite-kal", "i want to cancel my order"},
		{"flite-kal", "how long does delivery take"},
		{"espeak-en-us", "how do i reset my password"},
		{"espeak-en-us", "has my order shipped yet"},
	}
	setErrs := 0
	for i, tt := range tests {
		t.Run(tt.voice+"/"+tt.text, func(t *testing.T) {
			v, _ := sttest.VoiceByName(tt.voice)
			if !v.Available() {
				t.Skipf("%s not installed", v.Program)
			}
			pcm, rate, err := sttest.Synth(ctx, v, tt.text)
			require.NoError(t, err)
			ts, res := utterance(t, ctx, conn, "r"+string(rune('a'+i)), pcm, rate)
			require.NotEmpty(t, ts)
			final := ts[len(ts)-1]
			require.True(t, final.Final, "the last transcript event is the final one")
			for _, p := range ts[:len(ts)-1] {
				require.False(t, p.Final)
			}
			errs, _ := sttest.WordErrors(lm.Normalize(tt.text), final.Text)
			setErrs += errs
			t.Logf("%d word errors: want %q, got %q", errs, tt.text, final.Text)
			require.LessOrEqual(t, errs, maxErrs, "want %q, got %q", tt.text, final.Text)
			require.Equal(t, final.Text, res.Transcript)
			require.False(t, res.Degraded, "degradation: %v", res.Degradation)
			require.GreaterOrEqual(t, len(ts), 2, "partial transcripts arrive while speaking")
		})
	}
	require.LessOrEqual(t, setErrs, maxSetErrs, "word errors over the set")
}

// TestServerTurnsThroughSession streams utterances joined by silence as
// one continuous stream, in real time, to a session in server-turn mode:
// the real detector finds the turns and the real recogniser transcribes
// each as well as the one-request-per-utterance test above expects (the
// same error bound) at 16 kHz PCM; as 8 kHz μ-law, within one word error
// per utterance of the same μ-law utterances sent one by one with
// final:true (telephone bandwidth costs words either way).
func TestServerTurnsThroughSession(t *testing.T) {
	if !vad.Available {
		t.Skip("no voice activity detector in this build")
	}
	v, _ := sttest.VoiceByName("flite-slt")
	if !v.Available() {
		t.Skip("flite not installed")
	}
	s := newServer(t)
	texts := []string{"can you check my order status please", "how do i reset my password", "i want to cancel my order"}
	for _, muLaw := range []bool{false, true} {
		name := "pcm16"
		if muLaw {
			name = "mulaw"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
			defer cancel()
			conn := s.dial(t, ctx)
			rate := 16000
			if muLaw {
				rate = 8000
				require.NoError(t, conn.Write(ctx, websocket.MessageText, []byte(`{"type":"session.update","encoding":"mulaw"}`)))
			}
			// interrupt off: on a loaded machine a turn may still be
			// answered when the next utterance starts, which would end it.
			require.NoError(t, conn.Write(ctx, websocket.MessageText, []byte(`{"type":"session.update","turnDetection":{"mode":"server","interrupt":false}}`)))
			var stream []int16
			var clips [][]int16
			gap := make([]int16, rate) // 1 s
			for _, text := range texts {
				pcm, r, err := sttest.Synth(ctx, v, text)
				require.NoError(t, err)
				rs, err := resample.New(r, rate)
				require.NoError(t, err)
				clip := rs.Flush(rs.Process(nil, pcm))
				clips = append(clips, clip)
				stream = append(append(stream, gap...), clip...)
			}
			stream = append(stream, gap...)

			fr := rate / 50
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for seq := 0; seq*fr < len(stream); seq++ {
				select {
				case <-tick.C:
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				}
				f := stream[seq*fr : min((seq+1)*fr, len(stream))]
				payload := protocol.AppendPCM(nil, f)
				if muLaw {
					payload = mulaw.AppendEncode(nil, f)
				}
				require.NoError(t, conn.Write(ctx, websocket.MessageBinary, protocol.EncodeStreamAudio(nil, int64(seq), 0, payload)))
			}
			got := map[string]protocol.Result{}
			for len(got) < len(texts) {
				_, b, err := conn.Read(ctx)
				require.NoError(t, err)
				m, err := protocol.DecodeServer(b)
				require.NoError(t, err)
				switch m.Type {
				case protocol.TypeSpeechStarted, protocol.TypeSpeechStopped:
					t.Logf("%s", m.Raw)
				case protocol.TypeError:
					t.Fatalf("turn failed: %s", m.Raw)
				case protocol.TypeResult:
					var r protocol.Result
					require.NoError(t, m.As(&r))
					got[m.RequestID] = r
				}
			}
			turnErrs, oneByOne := 0, 0
			for i, text := range texts {
				res, ok := got["t-"+strconv.Itoa(i+1)]
				require.True(t, ok, "turns found: %v", got)
				errs, _ := sttest.WordErrors(lm.Normalize(text), res.Transcript)
				t.Logf("%s: %q -> %q (%d errors)", name, text, res.Transcript, errs)
				if !muLaw {
					require.LessOrEqual(t, errs, 1, "want %q, got %q", text, res.Transcript)
					continue
				}
				one := muLawRequest(t, ctx, conn, "one-"+strconv.Itoa(i), clips[i])
				oneErrs, _ := sttest.WordErrors(lm.Normalize(text), one)
				t.Logf("%s one by one: %q (%d errors)", name, one, oneErrs)
				turnErrs += errs
				oneByOne += oneErrs
			}
			// A guard against gross loss, not the "no worse" (met at
			// 16 kHz, not for slt at 8 kHz: docs/benchmarks.md, "Recognition
			// on the detected turns"). At 8 kHz a turn's edges cost slt words
			// (8 errors in 17 words against 4-5 here), and the clips sent one
			// by one vary by a word or two with the decoder that takes them.
			require.LessOrEqual(t, turnErrs, oneByOne+2*len(texts), "word errors of the turns against one by one")
		})
	}
}

// muLawRequest sends pcm (8 kHz) as one client-turn request of μ-law
// frames, paced in real time, on a session in μ-law and server-turn mode
// switched back to client turns for it, and returns its transcript.
func muLawRequest(t *testing.T, ctx context.Context, conn *websocket.Conn, id string, pcm []int16) string {
	t.Helper()
	require.NoError(t, conn.Write(ctx, websocket.MessageText, []byte(`{"type":"session.update","turnDetection":{"mode":"client"}}`)))
	defer func() {
		require.NoError(t, conn.Write(ctx, websocket.MessageText, []byte(`{"type":"session.update","turnDetection":{"mode":"server","interrupt":false}}`)))
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i, seq := 0, int64(0); i < len(pcm); i, seq = i+160, seq+1 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		end := min(i+160, len(pcm))
		h := protocol.AudioHeader{RequestID: id, Seq: seq, Final: end == len(pcm),
			DeadlineAt: protocol.Millis(time.Now().Add(clientBudget))}
		b, err := protocol.EncodeBinaryAudio(nil, h, nil)
		require.NoError(t, err)
		require.NoError(t, conn.Write(ctx, websocket.MessageBinary, mulaw.AppendEncode(b, pcm[i:end])))
	}
	for {
		_, b, err := conn.Read(ctx)
		require.NoError(t, err)
		m, err := protocol.DecodeServer(b)
		require.NoError(t, err)
		if m.RequestID == id && protocol.Terminal(m.Type) {
			var r protocol.Result
			require.Equal(t, protocol.TypeResult, m.Type, "%s", m.Raw)
			require.NoError(t, m.As(&r))
			return r.Transcript
		}
	}
}
