//go:build cgo && !nosphinx

package sttse2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/voiced/voiced/domain/helpdesk"
	"github.com/voiced/voiced/internal/deadline"
	"github.com/voiced/voiced/internal/domain"
	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/stages/stt/lm"
	"github.com/voiced/voiced/internal/stages/stt/sphinx"
	"github.com/voiced/voiced/internal/stages/stt/sttest"
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
}

func newServer(t *testing.T) *server {
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
	eng, err := sphinx.New(ctx, sphinx.Config{Decoders: 2, CacheDir: t.TempDir()}, d.CorpusSentences(), log, reg)
	require.NoError(t, err)
	other := otherStages{}
	// These tests judge what the recogniser hears, not how fast: a roomy
	// budget keeps a starved CPU (a loaded 2-core machine) from cutting
	// finalisation short (stt_partial). Timing is measured by voiceload
	// and recorded in docs/benchmarks.md.
	pcfg := pipeline.Config{STT: deadline.Stage{Cap: roomyBudget - time.Second}}
	pl, err := pipeline.New(pcfg, pipeline.Stages{STT: eng, Intent: other, Retrieval: other, LLM: other, Templates: d},
		pipeline.NewMetrics(reg))
	require.NoError(t, err)
	srv := session.NewServer(session.Config{MaxBudget: roomyBudget}, pl, log, session.NewMetrics(reg))
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		require.NoError(t, eng.Close())
	})
	return &server{url: "ws" + strings.TrimPrefix(hs.URL, "http")}
}

// roomyBudget is every request's deadline after its final frame.
const roomyBudget = 8 * time.Second

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
			DeadlineAt: protocol.Millis(time.Now().Add(roomyBudget))}
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

func TestTranscriptsThroughSession(t *testing.T) {
	s := newServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, s.url, nil)
	require.NoError(t, err)
	defer conn.CloseNow()
	_, _, err = conn.Read(ctx) // session.ready
	require.NoError(t, err)

	tests := []struct {
		voice, text string
		maxErrs     int
	}{
		{"flite-slt", "can you check my order status please", 1},
		{"flite-slt", "i cannot remember the password for my account", 1},
		{"flite-kal", "i want to cancel my order", 1},
		{"flite-kal", "how long does delivery take", 1},
		{"espeak-en-us", "how do i reset my password", 1},
		{"espeak-en-us", "has my order shipped yet", 1},
	}
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
			require.LessOrEqual(t, errs, tt.maxErrs, "want %q, got %q", tt.text, final.Text)
			require.Equal(t, final.Text, res.Transcript)
			require.False(t, res.Degraded, "degradation: %v", res.Degradation)
			require.GreaterOrEqual(t, len(ts), 2, "partial transcripts arrive while speaking")
		})
	}
}
