package session

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
)

// drainRunner stands in for the pipeline: it consumes frames until its
// request ends, like a recognizer that keeps up; with answer set, it
// answers at once when the final frame has come.
type drainRunner struct{ answer bool }

func (r drainRunner) Run(ctx context.Context, req pipeline.Request, sink pipeline.Sink) {
	defer req.Audio.Close()
	final := req.Final
	if !r.answer {
		final = nil // never ready: only the request's end ends it
	}
	var batch []pipeline.Frame
	for {
		select {
		case <-ctx.Done():
			sink.Done(nil, context.Cause(ctx))
			return
		case <-req.Audio.Ready():
			batch = req.Audio.Take(batch[:0])
		case fctx := <-final:
			if fctx.Err() != nil {
				sink.Done(nil, context.Cause(fctx))
				return
			}
			sink.Transcript("where is my order", true)
			sink.AnswerDelta("It ships today.")
			sink.Done(&pipeline.Result{Transcript: "where is my order", Answer: "It ships today."}, nil)
			return
		}
	}
}

// BenchmarkFrame measures the session's own cost for one 20 ms binary
// audio frame of a streaming request: decoding, checks, the sample
// conversion and the hand-off to the pipeline.
func BenchmarkFrame(b *testing.B) {
	srv := NewServer(Config{}, drainRunner{}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	s := newSession(srv, "bench", srv.log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pcm := make([]int16, 320)
	dl := protocol.Millis(time.Now().Add(time.Hour))
	frame := func(seq int64) []byte {
		f, _ := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1", DeadlineAt: dl, Seq: seq}, pcm)
		return f
	}
	first, _ := protocol.DecodeBinaryAudio(frame(0))
	s.handleAudio(ctx, &first, time.Now())
	frames := make([][]byte, 1024)
	b.ReportAllocs()
	b.ResetTimer()
	seq := int64(1)
	for b.Loop() {
		if seq%1024 == 1 {
			b.StopTimer()
			for i := range frames {
				frames[i] = frame(seq + int64(i))
			}
			b.StartTimer()
		}
		a, err := protocol.DecodeBinaryAudio(frames[(seq-1)%1024])
		if err != nil {
			b.Fatal(err)
		}
		s.handleAudio(ctx, &a, time.Now())
		seq++
	}
	b.StopTimer()
	for _, h := range s.reqs.Close(nil) {
		s.endRequest(h.Value, nil, nil)
	}
	s.wg.Wait()
}

// A history save into a full in-memory store (MaxConversations), each a
// new conversation, so that each one makes room: worst-us is the longest
// save, during which every session's save waits on the store's lock.
func BenchmarkMemoryConversationsFull(b *testing.B) {
	m := NewMemoryConversations(30 * time.Minute)
	ctx := context.Background()
	for i := range MaxConversations {
		m.Save(ctx, strconv.Itoa(i), Conversation{})
	}
	var worst time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		m.Save(ctx, "n"+strconv.Itoa(i), Conversation{})
		worst = max(worst, time.Since(t0))
	}
	b.ReportMetric(float64(worst.Microseconds()), "worst-us")
}
