package session_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/session"
	"github.com/voiced/voiced/internal/vad"
	"github.com/voiced/voiced/internal/vad/vadtest"
)

// silentDetector hears no speech: the stream's frames are counted, no
// turn starts.
func silentDetector(rate int) (vad.Detector, error) { return vadtest.New(rate, ""), nil }

// sendRaw writes one message exactly as given (its own sequenceNumber).
func (tw *twilioSide) sendRaw(m map[string]any) {
	tw.t.Helper()
	tw.sendMu.Lock()
	defer tw.sendMu.Unlock()
	b, err := json.Marshal(m)
	require.NoError(tw.t, err)
	require.NoError(tw.t, tw.conn.Write(tw.ctx, websocket.MessageText, b))
}

// setSeq sets the sequenceNumber the next message sent after it follows.
func (tw *twilioSide) setSeq(n int) {
	tw.sendMu.Lock()
	defer tw.sendMu.Unlock()
	tw.seq = n
}

// muLawSilence is 20 ms of μ-law silence at 8 kHz.
func muLawSilence() []byte { return bytes.Repeat([]byte{0xFF}, 160) }

func (tw *twilioSide) stopAndWait() {
	tw.send(map[string]any{"event": "stop", "streamSid": tw.sid, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA0123"}})
	for range tw.msgs {
	}
	<-tw.done
}

func mediaMsg(sid string, seq, chunk int, payload []byte) map[string]any {
	return map[string]any{"event": "media", "sequenceNumber": strconv.Itoa(seq), "streamSid": sid, "media": map[string]string{
		"track": "inbound", "chunk": strconv.Itoa(chunk), "timestamp": strconv.Itoa((chunk - 1) * 20),
		"payload": base64.StdEncoding.EncodeToString(payload),
	}}
}

// TestTwilioDuplicateMediaDropped: Twilio resends media messages (same
// sequenceNumber and chunk) on a reconnect or retransmit. A duplicate is
// audio the turn detector and recognizer already have: it must be
// dropped (and counted), not fed again, and must not end the call. A
// real gap goes on being handled as before (the stream goes on).
func TestTwilioDuplicateMediaDropped(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Detector: silentDetector, Greeting: "-"})
	tw := dialTwilio(t, h, "")
	tw.start(nil) // connected, start (seq 1)
	frame := muLawSilence()
	tw.setSeq(1)
	tw.sendRaw(mediaMsg(tw.sid, 2, 1, frame))
	tw.sendRaw(mediaMsg(tw.sid, 3, 2, frame))
	tw.sendRaw(mediaMsg(tw.sid, 3, 2, frame)) // resent
	tw.sendRaw(mediaMsg(tw.sid, 2, 1, frame)) // an older one resent
	tw.sendRaw(mediaMsg(tw.sid, 4, 3, frame))
	tw.sendRaw(mediaMsg(tw.sid, 6, 5, frame)) // a real gap: chunk 4 lost; taken
	tw.setSeq(6)
	tw.stopAndWait()
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
	require.EqualValues(t, 4, metricValue(t, h, "voiced_audio_frames_total"), "the turn stream is fed each chunk once")
	require.EqualValues(t, 2, metricValue(t, h, "voiced_twilio_duplicate_media_total"), "duplicates are counted")
}

// waitClosed waits (bounded) for the server to end the call, and returns
// whether it did.
func waitClosed(tw *twilioSide, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-tw.msgs:
			if !ok {
				<-tw.done
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

// TestTwilioNoStartClosesWithoutTokens: protocol.md says a start that
// was dropped as malformed "leaves the call to close with 1008 after
// 10 s". On a server without tokens (or a call authenticated by its
// URL's token) no timer was armed: the call, whose media Twilio keeps
// sending (so the idle timeout never comes), held its session and the
// phone line for ever, the caller hearing nothing.
func TestTwilioNoStartClosesWithoutTokens(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []string
		query  string
	}{{"tokenless", nil, ""}, {"query token", []string{"secret"}, "?token=secret"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Tokens: tc.tokens, Greeting: "-",
				Detector: silentDetector, CallStartTimeout: 100 * time.Millisecond})
			tw := dialTwilio(t, h, tc.query)
			tw.sendRaw(map[string]any{"event": "connected", "protocol": "Call", "version": "1.0.0"})
			// A start without its sequenceNumber: dropped as malformed.
			tw.sendRaw(map[string]any{"event": "start", "streamSid": tw.sid, "start": map[string]any{
				"accountSid": "AC0123", "streamSid": tw.sid, "callSid": "CA0123", "tracks": []string{"inbound"},
				"mediaFormat": map[string]any{"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
			}})
			tw.sendMu.Lock()
			tw.seq = 1
			tw.sendMu.Unlock()
			chunk := 0
			tw.speak(make([]int16, 160*5), &chunk)
			require.True(t, waitClosed(tw, 3*time.Second), "a call without a valid start must be closed")
			require.Equal(t, websocket.StatusPolicyViolation, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
		})
	}
}

// TestTwilioMediaBeforeStartNotCounted: media sent before start (Twilio
// never does; a peer out of order may) is ignored, and must not count
// towards the stream's sequence: its chunks made the stream's own chunks
// 1, 2, 3 after start look resent, and the caller's first audio was
// dropped as duplicates.
func TestTwilioMediaBeforeStartNotCounted(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Detector: silentDetector, Greeting: "-"})
	tw := dialTwilio(t, h, "")
	frame := muLawSilence()
	for c := 1; c <= 3; c++ {
		tw.sendRaw(mediaMsg(tw.sid, c, c, frame))
	}
	tw.start(nil) // connected, start (seq 1)
	tw.setSeq(1)
	for c := 1; c <= 3; c++ {
		tw.sendRaw(mediaMsg(tw.sid, c+1, c, frame))
	}
	tw.setSeq(4)
	tw.stopAndWait()
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
	require.EqualValues(t, 3, metricValue(t, h, "voiced_audio_frames_total"), "the stream's own chunks are heard")
	require.Zero(t, metricValue(t, h, "voiced_twilio_duplicate_media_total"))
}

// TestTwilioOtherStreamIgnored: after start, a message of another
// streamSid is not the call's: its media are not heard nor counted in
// the call's sequence, and its stop does not end the call. They were
// taken as the call's own: the stop ended it, and the other stream's
// chunk made the call's own first chunk look resent.
func TestTwilioOtherStreamIgnored(t *testing.T) {
	h := newHarness(t, &fakeStages{}, pipeline.Config{}, session.Config{Detector: silentDetector, Greeting: "-"})
	tw := dialTwilio(t, h, "")
	tw.start(nil) // connected, start (seq 1)
	frame := muLawSilence()
	const other = "MZ00000000000000000000000000000000"
	require.NotEqual(t, other, tw.sid)
	tw.sendRaw(mediaMsg(other, 2, 1, frame))
	tw.sendRaw(map[string]any{"event": "mark", "sequenceNumber": "3", "streamSid": other, "mark": map[string]string{"name": "x"}})
	tw.sendRaw(map[string]any{"event": "stop", "sequenceNumber": "4", "streamSid": other, "stop": map[string]string{"accountSid": "AC0123", "callSid": "CA9999"}})
	for c := 1; c <= 3; c++ {
		tw.sendRaw(mediaMsg(tw.sid, c+1, c, frame))
	}
	tw.setSeq(4)
	tw.stopAndWait()
	require.Equal(t, websocket.StatusNormalClosure, websocket.CloseStatus(tw.closeErr), "%v", tw.closeErr)
	require.EqualValues(t, 3, metricValue(t, h, "voiced_audio_frames_total"), "the call's own chunks are heard, the other stream's not")
	require.Zero(t, metricValue(t, h, "voiced_twilio_duplicate_media_total"))
}
