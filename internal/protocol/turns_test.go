package protocol_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

func TestSessionUpdateTurnsAndEncoding(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		code protocol.Code // "" when accepted
	}{
		{`{"type":"session.update","turnDetection":{"mode":"server"}}`, ""},
		{`{"type":"session.update","turnDetection":{"mode":"server","silenceMs":100,"prefixMs":0,"minSpeechMs":20,"interrupt":false,"budgetMs":60000}}`, ""},
		{`{"type":"session.update","turnDetection":{"mode":"server","silenceMs":5001}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{"mode":"server","prefixMs":2001}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{"mode":"server","minSpeechMs":19}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{"mode":"server","budgetMs":60001}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{"mode":"server","holdMs":0}}`, ""},
		{`{"type":"session.update","turnDetection":{"mode":"server","holdMs":5000}}`, ""},
		{`{"type":"session.update","turnDetection":{"mode":"server","holdMs":5001}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{"mode":"server","holdMs":-1}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{"mode":"client","holdMs":700}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{"mode":"client"}}`, ""},
		{`{"type":"session.update","turnDetection":{"mode":"client","silenceMs":500}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","turnDetection":{}}`, protocol.CodeBadMessage},
		{`{"type":"session.update","encoding":"mulaw"}`, ""},
		{`{"type":"session.update","encoding":"mulaw","sampleRate":8000}`, ""},
		{`{"type":"session.update","encoding":"mulaw","sampleRate":16000}`, protocol.CodeBadAudio},
		{`{"type":"session.update","encoding":"pcm16","sampleRate":16000}`, ""},
		{`{"type":"session.update","encoding":"alaw"}`, protocol.CodeBadMessage},
	} {
		t.Run(tc.msg, func(t *testing.T) {
			m, err := protocol.DecodeText([]byte(tc.msg))
			if tc.code == "" {
				require.NoError(t, err)
				require.IsType(t, &protocol.SessionUpdate{}, m)
				return
			}
			require.Equal(t, tc.code, protocol.CodeOf(err), "%v", err)
		})
	}
	td := protocol.TurnDetection{Mode: protocol.TurnsServer}
	require.Equal(t, protocol.Turns{SilenceMs: 500, PrefixMs: 300, MinSpeechMs: 200, HoldMs: protocol.DefaultHoldMs, Interrupt: true}, td.Resolved())
	off := 0
	td.HoldMs = &off
	require.Zero(t, td.Resolved().HoldMs, "holdMs 0 switches the hold off")
}

func TestStreamFrames(t *testing.T) {
	server := protocol.Inbound{ServerTurns: true}
	a, err := server.DecodeBinaryAudio(protocol.EncodeStreamAudio(nil, 7, 16000, protocol.AppendPCM(nil, []int16{1, -2})))
	require.NoError(t, err)
	require.Equal(t, int64(7), a.Header.Seq)
	require.Equal(t, []int16{1, -2}, a.Samples(nil))

	for _, tc := range []struct {
		name string
		in   protocol.Inbound
		msg  []byte
		code protocol.Code
	}{
		{"requestId in server mode", server, frame(t, protocol.AudioHeader{RequestID: "r1", Seq: 0}, 2), protocol.CodeBadMessage},
		{"final in server mode", server, frame(t, protocol.AudioHeader{Seq: 0, Final: true}, 2), protocol.CodeBadMessage},
		{"deadlineAt in server mode", server, frame(t, protocol.AudioHeader{Seq: 0, DeadlineAt: 5}, 2), protocol.CodeBadMessage},
		{"odd PCM in server mode", server, protocol.EncodeStreamAudio(nil, 0, 0, []byte{1, 2, 3}), protocol.CodeBadAudio},
		{"client frame in server mode is fine without its fields", server, frame(t, protocol.AudioHeader{Seq: 3}, 2), ""},
		{"mu-law: odd bytes are samples", protocol.Inbound{ServerTurns: true, MuLaw: true}, protocol.EncodeStreamAudio(nil, 0, 8000, []byte{1, 2, 3}), ""},
		{"mu-law at 16 kHz", protocol.Inbound{MuLaw: true}, frame(t, protocol.AudioHeader{RequestID: "r1", DeadlineAt: 5, SampleRate: 16000}, 1), protocol.CodeBadAudio},
		{"server frame in client mode", protocol.Inbound{}, protocol.EncodeStreamAudio(nil, 0, 0, nil), protocol.CodeBadMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.in.DecodeBinaryAudio(tc.msg)
			if tc.code == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.code, protocol.CodeOf(err), "%v", err)
		})
	}
}

// frame encodes a binary frame with n bytes of payload (the header's
// type is set to audio by the encoder).
func frame(t *testing.T, h protocol.AudioHeader, n int) []byte {
	t.Helper()
	b, err := protocol.EncodeBinaryAudio(nil, h, nil)
	require.NoError(t, err)
	return append(b, make([]byte, n)...)
}

// The server's turn ids are part of the wire format (docs/protocol.md).
func TestTurnID(t *testing.T) {
	for n, want := range map[int]string{1: "t-1", 2: "t-2", 12: "t-12"} {
		require.Equal(t, want, protocol.TurnID(n))
	}
}
