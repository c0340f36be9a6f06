package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/pipeline"
	"github.com/voiced/voiced/internal/protocol"
	"github.com/voiced/voiced/internal/session"
)

// TestBadFrameOfOpenRequestCounted: a frame that breaks an open request's
// rules (a seq gap, a changed sampleRate, more audio than allowed) is
// refused, and ends the request, like a frame that fails validation: it
// is one voiced_bad_input_total under its code, as it is on a server-turn
// stream.
func TestBadFrameOfOpenRequestCounted(t *testing.T) {
	tests := []struct {
		name string
		scfg session.Config
		bad  protocol.AudioHeader // the second frame of request r1
		code protocol.Code
	}{
		{name: "seq gap", bad: protocol.AudioHeader{Seq: 2}, code: protocol.CodeBadMessage},
		{name: "sampleRate changed", bad: protocol.AudioHeader{Seq: 1, SampleRate: 8000}, code: protocol.CodeBadAudio},
		{name: "too much audio", scfg: session.Config{MaxAudioPerRequest: 30 * time.Millisecond},
			bad: protocol.AudioHeader{Seq: 1}, code: protocol.CodeBadAudio},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, &fakeStages{}, pipeline.Config{}, tt.scfg)
			c := h.dial()
			dl := time.Now().Add(5 * time.Second)
			c.audio("r1", 0, false, dl)
			tt.bad.RequestID, tt.bad.DeadlineAt = "r1", protocol.Millis(dl)
			b, err := protocol.EncodeBinaryAudio(nil, tt.bad, make([]int16, 320))
			require.NoError(t, err)
			c.sendBinary(b)
			term, _ := c.terminal("r1")
			require.Equal(t, tt.code, errorOf(t, term).Code)
			require.EqualValues(t, 1, metricValue(t, h, `voiced_bad_input_total{code="`+string(tt.code)+`"}`))
			require.EqualValues(t, 1, metricValue(t, h, "voiced_bad_input_total"), "counted once")
		})
	}
}
