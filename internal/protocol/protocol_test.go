package protocol_test

import (
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
