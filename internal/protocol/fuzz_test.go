package protocol_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/voiced/voiced/internal/fuzzcheck"
	"github.com/voiced/voiced/internal/protocol"
)

// Decoding may allocate a few times the message it is given (the decoded
// header, base64 output, error text), never what a length in it declares.
const allocPerByte = 16

// FuzzDecodeBinaryAudio decodes arbitrary binary frames. Refused frames
// carry a protocol error the session can send back; accepted ones have a
// valid header equal to what strict encoding/json makes of the header
// bytes, their PCM is the rest of the frame (not a copy), and they survive
// being encoded again.
func FuzzDecodeBinaryAudio(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		var (
			a   protocol.Audio
			err error
		)
		fuzzcheck.AllocBounded(t, len(frame), allocPerByte, func() { a, err = protocol.DecodeBinaryAudio(frame) })
		if err != nil {
			requireRefusal(t, err)
			return
		}
		requireValidAudio(t, &a)
		hlen := binary.BigEndian.Uint32(frame)
		require.Equal(t, referenceHeader(t, frame[4:4+hlen]), a.Header)
		if len(a.PCM) > 0 {
			require.Equal(t, unsafe.SliceData(frame[4+hlen:]), unsafe.SliceData(a.PCM), "PCM must alias the frame")
		}
		require.Len(t, a.PCM, len(frame)-4-int(hlen))

		again, err := protocol.EncodeBinaryAudio(nil, a.Header, a.Samples(nil))
		require.NoError(t, err)
		b, err := protocol.DecodeBinaryAudio(again)
		require.NoError(t, err)
		requireSameAudio(t, &a, &b)
	})
}

// FuzzDecodeText decodes arbitrary text messages. Refused ones carry a
// protocol error; accepted ones are one of the five client messages, valid,
// and decode to the same value once encoded again. An accepted audio
// message also matches strict encoding/json and travels unchanged as a
// binary frame.
func FuzzDecodeText(f *testing.F) {
	f.Fuzz(func(t *testing.T, msg []byte) {
		var (
			m   any
			err error
		)
		fuzzcheck.AllocBounded(t, len(msg), allocPerByte, func() { m, err = protocol.DecodeText(msg) })
		if err != nil {
			requireRefusal(t, err)
			if a, ok := m.(*protocol.Audio); ok {
				require.Empty(t, a.Header.Audio, "the base64 text is not handed back")
			} else {
				require.Nil(t, m)
			}
			return
		}
		switch m := m.(type) {
		case *protocol.Audio:
			requireValidAudio(t, m)
			want := referenceHeader(t, msg)
			pcm, err := base64.StdEncoding.DecodeString(want.Audio)
			require.NoError(t, err)
			want.Audio = ""
			require.Equal(t, want, m.Header)
			require.Equal(t, pcm, m.PCM)

			text, err := protocol.EncodeTextAudio(m.Header, m.Samples(nil))
			require.NoError(t, err)
			again, err := protocol.DecodeText(text)
			require.NoError(t, err)
			requireSameAudio(t, m, again.(*protocol.Audio))
			frame, err := protocol.EncodeBinaryAudio(nil, m.Header, m.Samples(nil))
			require.NoError(t, err)
			b, err := protocol.DecodeBinaryAudio(frame)
			require.NoError(t, err)
			requireSameAudio(t, m, &b)
		case *protocol.Cancel:
			require.Equal(t, protocol.TypeCancel, m.Type)
			require.True(t, protocol.ValidRequestID(m.RequestID))
			requireDecodesTo(t, mustMarshal(t, m), m)
		case *protocol.SessionUpdate:
			require.Equal(t, protocol.TypeSessionUpdate, m.Type)
			if m.SampleRate != nil {
				require.True(t, protocol.SampleRateSupported(*m.SampleRate))
			}
			requireDecodesTo(t, mustMarshal(t, m), m)
		case *protocol.Playback:
			require.Equal(t, protocol.TypePlayback, m.Type)
			require.True(t, protocol.ValidRequestID(m.RequestID))
			require.GreaterOrEqual(t, m.PlayedMs, int64(0))
			requireDecodesTo(t, mustMarshal(t, m), m)
		case *protocol.Ping:
			require.Equal(t, protocol.TypePing, m.Type)
			requireDecodesTo(t, mustMarshal(t, m), m)
		default:
			t.Fatalf("DecodeText returned %T", m)
		}
	})
}

// requireRefusal checks err is what the session sends back for bad input:
// a *protocol.Error with a client-side code and a message.
func requireRefusal(t *testing.T, err error) {
	t.Helper()
	pe, ok := errors.AsType[*protocol.Error](err)
	require.True(t, ok, "%T is not a *protocol.Error: %v", err, err)
	require.Contains(t, []protocol.Code{protocol.CodeBadMessage, protocol.CodeBadAudio}, pe.Code, "%v", err)
	require.NotEmpty(t, pe.Message)
}

// requireValidAudio checks what validation promises of an accepted header.
func requireValidAudio(t *testing.T, a *protocol.Audio) {
	t.Helper()
	h := a.Header
	require.Equal(t, protocol.TypeAudio, h.Type)
	require.True(t, protocol.ValidRequestID(h.RequestID), "requestId %q", h.RequestID)
	require.Positive(t, h.DeadlineAt)
	require.GreaterOrEqual(t, h.Seq, int64(0))
	require.True(t, h.SampleRate == 0 || protocol.SampleRateSupported(h.SampleRate), "sampleRate %d", h.SampleRate)
	require.Empty(t, h.Audio)
	require.Zero(t, len(a.PCM)%2)
}

// referenceHeader decodes an audio header the slow, obvious way: one JSON
// object, no unknown fields, nothing after it. A faster decoder must agree
// with it on everything it accepts.
func referenceHeader(t *testing.T, b []byte) protocol.AudioHeader {
	t.Helper()
	var h protocol.AudioHeader
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&h), "accepted a header encoding/json refuses")
	require.Empty(t, bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"), "accepted a header with trailing data")
	return h
}

func requireSameAudio(t *testing.T, want, got *protocol.Audio) {
	t.Helper()
	require.Equal(t, want.Header, got.Header)
	require.Equal(t, want.PCM, got.PCM) // bytes.Equal: nil and empty are alike
}

func requireDecodesTo(t *testing.T, msg []byte, want any) {
	t.Helper()
	got, err := protocol.DecodeText(msg)
	require.NoError(t, err, "%s", msg)
	require.Equal(t, want, got)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
