package protocol_test

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/protocol"
)

func TestBinaryAudioRoundTrip(t *testing.T) {
	pcm := []int16{0, 1, -1, 32767, -32768}
	h := protocol.AudioHeader{RequestID: "req-1.a:b_c", DeadlineAt: 1764489601700, Seq: 3, Final: true, SampleRate: 48000}
	b, err := protocol.EncodeBinaryAudio(nil, h, pcm)
	require.NoError(t, err)
	a, err := protocol.DecodeBinaryAudio(b)
	require.NoError(t, err)
	h.Type = protocol.TypeAudio
	require.Equal(t, h, a.Header)
	require.Equal(t, pcm, a.Samples(nil))
}

// TestBinaryHeaderAsJSON: the hand-written header of a binary frame is
// byte for byte what encoding/json writes, for valid request ids and
// for ids that need escaping (which take encoding/json's path).
func TestBinaryHeaderAsJSON(t *testing.T) {
	tests := []protocol.AudioHeader{
		{RequestID: "r1", DeadlineAt: 1764489601700},
		{RequestID: "req-1.a:b_c", DeadlineAt: 1, Seq: 49, Final: true, SampleRate: 8000},
		{RequestID: "x", DeadlineAt: -5, Seq: -1, SampleRate: -3}, // invalid values are the server's to refuse
		{RequestID: "", DeadlineAt: 0},
		{RequestID: `quote"back\\slash`, DeadlineAt: 2},
		{RequestID: "<tag>&\u2028\x00é", DeadlineAt: 3},
		{RequestID: "ok", DeadlineAt: 4, Audio: "ignored in a binary frame"},
	}
	for _, h := range tests {
		b, err := protocol.EncodeBinaryAudio([]byte("prefix"), h, []int16{7})
		require.NoError(t, err)
		require.Equal(t, "prefix", string(b[:6]), "appends to dst")
		b = b[6:]
		n := binary.BigEndian.Uint32(b)
		h.Type, h.Audio = protocol.TypeAudio, ""
		want, err := json.Marshal(h)
		require.NoError(t, err)
		require.Equal(t, string(want), string(b[4:4+n]), "header of %+v", h)
		require.Equal(t, []byte{7, 0}, b[4+n:], "then the PCM")
	}
}

// BenchmarkEncodeBinaryAudio is a client's cost per 20 ms frame at 16 kHz.
func BenchmarkEncodeBinaryAudio(b *testing.B) {
	h := protocol.AudioHeader{RequestID: "s12-3", DeadlineAt: 1764489601700, Seq: 17, SampleRate: 16000}
	pcm := make([]int16, 320)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = protocol.EncodeBinaryAudio(buf[:0], h, pcm); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTextAudioRoundTrip(t *testing.T) {
	pcm := []int16{5, -5}
	b, err := protocol.EncodeTextAudio(protocol.AudioHeader{RequestID: "r", DeadlineAt: 1}, pcm)
	require.NoError(t, err)
	m, err := protocol.DecodeText(b)
	require.NoError(t, err)
	a := m.(*protocol.Audio)
	require.Equal(t, pcm, a.Samples(nil))
	require.Empty(t, a.Header.Audio)
}

func TestValidRequestID(t *testing.T) {
	tests := map[string]bool{
		"r1": true, "A.b_c:d-9": true, "": false, "has space": false, "é": false,
		string(make([]byte, 65)): false,
	}
	long := make([]byte, 64)
	for i := range long {
		long[i] = 'x'
	}
	tests[string(long)] = true
	for id, want := range tests {
		require.Equal(t, want, protocol.ValidRequestID(id), "%q", id)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		code protocol.Code
	}{
		{"trailing data", `{"type":"ping","clientTime":1} {}`, protocol.CodeBadMessage},
		{"array", `[]`, protocol.CodeBadMessage},
		{"cancel unknown field", `{"type":"cancel","requestId":"r","why":1}`, protocol.CodeBadMessage},
		{"negative seq", `{"type":"audio","requestId":"r","deadlineAt":5,"seq":-1,"audio":""}`, protocol.CodeBadMessage},
		{"wrong type in header", `{"type":"audio","requestId":5,"deadlineAt":5,"seq":0,"audio":""}`, protocol.CodeBadMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := protocol.DecodeText([]byte(tt.text))
			require.Error(t, err)
			require.Equal(t, tt.code, protocol.CodeOf(err))
		})
	}
}

func BenchmarkDecodeBinaryAudio(b *testing.B) {
	frame, _ := protocol.EncodeBinaryAudio(nil, protocol.AudioHeader{RequestID: "r1", DeadlineAt: 1764489601700, Seq: 12}, make([]int16, 320))
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var dst []int16
	for b.Loop() {
		a, err := protocol.DecodeBinaryAudio(frame)
		if err != nil {
			b.Fatal(err)
		}
		dst = a.Samples(dst[:0])
	}
}

func TestAnswerAudioRoundTrip(t *testing.T) {
	pcm := []int16{0, 1, -1, 32767, -32768}
	h := protocol.AnswerAudioHeader{RequestID: "r1", Seq: 2, SampleRate: 16000, Final: true}
	for _, b64 := range []bool{false, true} {
		b, err := protocol.EncodeAnswerAudio(h, pcm, b64)
		require.NoError(t, err)
		if !b64 {
			n := binary.BigEndian.Uint32(b)
			require.JSONEq(t, `{"type":"answer.audio","requestId":"r1","seq":2,"sampleRate":16000,"final":true}`, string(b[4:4+n]))
			require.Len(t, b, 4+int(n)+2*len(pcm))
		}
		got, samples, err := protocol.DecodeAnswerAudio(b, !b64)
		require.NoError(t, err)
		want := h
		want.Type = protocol.TypeAnswerAudio
		require.Equal(t, want, got)
		require.Equal(t, pcm, samples)
	}
}

func TestSessionUpdateSpeech(t *testing.T) {
	tests := []struct {
		name string
		text string
		set  bool
		want *protocol.SpeechSettings
		code protocol.Code // "" for no error
	}{
		{"absent", `{"type":"session.update","supersede":true}`, false, nil, ""},
		{"off", `{"type":"session.update","speech":null}`, true, nil, ""},
		{"defaults", `{"type":"session.update","speech":{}}`, true,
			&protocol.SpeechSettings{SampleRate: 16000, Encoding: protocol.SpeechBinary}, ""},
		{"all", `{"type":"session.update","speech":{"voice":"kal","sampleRate":24000,"encoding":"base64"}}`, true,
			&protocol.SpeechSettings{Voice: "kal", SampleRate: 24000, Encoding: protocol.SpeechBase64}, ""},
		{"bad rate", `{"type":"session.update","speech":{"sampleRate":12345}}`, true, nil, protocol.CodeBadMessage},
		{"bad encoding", `{"type":"session.update","speech":{"encoding":"mp3"}}`, true, nil, protocol.CodeBadMessage},
		{"unknown field", `{"type":"session.update","speech":{"speed":2}}`, true, nil, protocol.CodeBadMessage},
		{"not an object", `{"type":"session.update","speech":true}`, true, nil, protocol.CodeBadMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := protocol.DecodeText([]byte(tt.text))
			if tt.code != "" {
				require.Equal(t, tt.code, protocol.CodeOf(err))
				return
			}
			require.NoError(t, err)
			s, set, err := m.(*protocol.SessionUpdate).SpeechUpdate()
			require.NoError(t, err)
			require.Equal(t, tt.set, set)
			require.Equal(t, tt.want, s)
		})
	}
}

func TestDecodePlayback(t *testing.T) {
	m, err := protocol.DecodeText([]byte(`{"type":"playback","requestId":"r1","playedMs":1840}`))
	require.NoError(t, err)
	require.Equal(t, &protocol.Playback{Type: protocol.TypePlayback, RequestID: "r1", PlayedMs: 1840}, m)
	for _, bad := range []string{
		`{"type":"playback","requestId":"r1","playedMs":-1}`,
		`{"type":"playback","requestId":"","playedMs":5}`,
		`{"type":"playback","requestId":"r1","playedMs":1.5}`,
		`{"type":"playback","requestId":"r1","playedMs":5,"x":1}`,
	} {
		_, err := protocol.DecodeText([]byte(bad))
		require.Equal(t, protocol.CodeBadMessage, protocol.CodeOf(err), bad)
	}
}
