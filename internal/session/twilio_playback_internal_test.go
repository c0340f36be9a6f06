package session

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

// callSession is a phone call's session that is only built, never
// served: what it sends stays in its queue.
func callSession(t *testing.T) *Session {
	t.Helper()
	s := gateServer(t, Config{}, slog.New(slog.DiscardHandler))
	s.call = &call{streamSid: "MZ0123"}
	return s
}

// queuedEvents is the Media Streams events queued so far, in order.
func queuedEvents(t *testing.T, s *Session) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var evs []string
	for _, o := range s.out[s.outHead:] {
		var m struct{ Event string }
		require.NoError(t, json.Unmarshal(o.data, &m))
		evs = append(evs, m.Event)
	}
	return evs
}

// TestCallPlaybackFollowsTheQueue: a call's playback state (audio queued
// and not played yet; the mark whose echo says it has played) follows
// the messages in the order they are queued, not built. An answer's
// audio is encoded outside the session's lock, and another turn's mark
// (or the greeting's) could be queued between that audio's encoding and
// its queueing: the state had the mark last, Twilio's echo of it was
// taken for the audio after it having played, and a barge-in over that
// audio sent no clear. A message built and never queued counted too.
func TestCallPlaybackFollowsTheQueue(t *testing.T) {
	pcm := make([]int16, 160)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *Session)
		want []string // queued, the barge-in's clear last
	}{
		{"a mark queued between audio built and queued", func(t *testing.T, s *Session) {
			audio, err := s.call.media(pcm) // t-2's answer (AnswerAudio)
			require.NoError(t, err)
			mark, ok := s.encode(protocol.Result{Type: protocol.TypeResult, RequestID: "t-1"}) // t-1's (deliver)
			require.True(t, ok)
			s.mu.Lock()
			s.sendLocked(mark)
			s.sendLocked(outbound{data: audio, play: playback{audio: true}})
			s.mu.Unlock()
			s.markEchoed("t-1") // played up to t-1's mark, not t-2's audio
		}, []string{"mark", "media", "clear"}},
		{"audio built, never queued", func(t *testing.T, s *Session) {
			_, err := s.call.media(pcm)
			require.NoError(t, err)
		}, nil},
		{"a mark built, never queued", func(t *testing.T, s *Session) {
			audio, err := s.call.media(pcm)
			require.NoError(t, err)
			greeting, ok := s.call.mark("greeting")
			require.True(t, ok)
			s.mu.Lock()
			s.sendLocked(outbound{data: audio, play: playback{audio: true}})
			s.sendLocked(greeting)
			s.mu.Unlock()
			_, ok = s.encode(protocol.Result{Type: protocol.TypeResult, RequestID: "t-1"})
			require.True(t, ok)
			s.markEchoed("greeting") // all of it played: nothing to clear
		}, []string{"media", "mark"}},
		{"the echo of the last mark queued", func(t *testing.T, s *Session) {
			audio, err := s.call.media(pcm)
			require.NoError(t, err)
			mark, ok := s.encode(protocol.Result{Type: protocol.TypeResult, RequestID: "t-1"})
			require.True(t, ok)
			s.mu.Lock()
			s.sendLocked(outbound{data: audio, play: playback{audio: true}})
			s.sendLocked(mark)
			s.mu.Unlock()
			s.markEchoed("t-1") // all of it played: nothing to clear
		}, []string{"media", "mark"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := callSession(t)
			tc.run(t, s)
			s.bargeIn()
			require.Equal(t, tc.want, queuedEvents(t, s))
		})
	}
}

// TestCallBargeInWaitsForGreetingChunk: the greeting checks its context
// and queues each chunk under the session's lock. A barge-in that stopped
// the greeting and decided its clear without that lock could do so
// between the greeting's check and its chunk: nothing was unplayed yet,
// no clear went out, and the greeting's first chunk played over the
// caller. The barge-in now waits for the chunk and clears it.
func TestCallBargeInWaitsForGreetingChunk(t *testing.T) {
	s := callSession(t)
	greeting, stop := context.WithCancel(t.Context())
	defer stop()
	s.call.stopGreeting = stop
	audio, err := s.call.media(make([]int16, 160))
	require.NoError(t, err)

	s.mu.Lock() // the greeting's emit, its context checked
	require.NoError(t, greeting.Err())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.bargeIn()
	}()
	s.sendLocked(outbound{data: audio, play: playback{audio: true}})
	s.mu.Unlock()
	<-done
	require.Error(t, greeting.Err(), "the greeting is stopped")
	require.Equal(t, []string{"media", "clear"}, queuedEvents(t, s))
}
