package twilio

import (
	"bytes"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

// A call as Twilio sends it (the shapes of Twilio's Media Streams docs:
// numbers are strings except in mediaFormat).
var call = []string{
	`{"event":"connected","protocol":"Call","version":"1.0.0"}`,
	`{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC11","streamSid":"MZ22","callSid":"CA33","tracks":["inbound"],"customParameters":{"token":"t0k"},"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZ22"}`,
	`{"event":"media","sequenceNumber":"2","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xFF}, 160)) + `"},"streamSid":"MZ22"}`,
	`{"event":"media","sequenceNumber":"3","media":{"track":"inbound","chunk":"2","timestamp":"25","payload":"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x7F}, 160)) + `"},"streamSid":"MZ22"}`,
	`{"event":"dtmf","streamSid":"MZ22","sequenceNumber":"4","dtmf":{"track":"inbound_track","digit":"1"}}`,
	`{"event":"mark","sequenceNumber":"5","streamSid":"MZ22","mark":{"name":"utt-42"}}`,
	`{"event":"stop","sequenceNumber":"6","streamSid":"MZ22","stop":{"accountSid":"AC11","callSid":"CA33"}}`,
}

func TestParseCall(t *testing.T) {
	var q Sequence
	var msgs []Message
	for _, s := range call {
		m, err := Parse([]byte(s))
		require.NoError(t, err, s)
		require.NoError(t, q.Check(m), s)
		msgs = append(msgs, m)
	}
	require.Equal(t, "Call", msgs[0].Protocol)
	require.Equal(t, "1.0.0", msgs[0].Version)
	st := msgs[1].Start
	require.Equal(t, "CA33", st.CallSid)
	require.Equal(t, map[string]string{"token": "t0k"}, st.CustomParameters)
	require.Equal(t, []string{"inbound"}, st.Tracks)
	require.NoError(t, st.CheckFormat())
	audio, err := msgs[2].Media.Audio()
	require.NoError(t, err)
	require.Equal(t, bytes.Repeat([]byte{0xFF}, 160), audio)
	ts, err := msgs[3].Media.TimestampMs()
	require.NoError(t, err)
	require.Equal(t, int64(25), ts)
	require.Equal(t, "1", msgs[4].DTMF.Digit)
	require.Equal(t, "utt-42", msgs[5].Mark.Name)
	require.Equal(t, "CA33", msgs[6].Stop.CallSid)
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want error
	}{
		{`not json`, ErrMessage},
		{`{"sequenceNumber":"1"}`, ErrMessage},
		{`{"event":"media","sequenceNumber":"2","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":""}}`, ErrMessage},                  // no streamSid
		{`{"event":"media","sequenceNumber":2,"streamSid":"MZ","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":""}}`, ErrMessage},   // a number, not a string
		{`{"event":"media","sequenceNumber":"x","streamSid":"MZ","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":""}}`, ErrMessage}, // not decimal
		{`{"event":"media","sequenceNumber":"2","streamSid":"MZ","media":{"track":"inbound","chunk":"0","timestamp":"5","payload":""}}`, ErrMessage}, // chunks count from 1
		{`{"event":"media","sequenceNumber":"2","streamSid":"MZ","media":{"track":"inbound","chunk":"1","timestamp":"-1","payload":""}}`, ErrMessage},
		{`{"event":"media","sequenceNumber":"2","streamSid":"MZ","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":"%%%"}}`, ErrMessage},
		{`{"event":"media","sequenceNumber":"2","streamSid":"MZ"}`, ErrMessage},
		{`{"event":"start","sequenceNumber":"1","streamSid":"MZ","start":{"streamSid":"MZ9","callSid":"CA"}}`, ErrMessage}, // streamSids differ
		{`{"event":"mark","sequenceNumber":"3","streamSid":"MZ","mark":{}}`, ErrMessage},
		{`{"event":"dtmf","sequenceNumber":"3","streamSid":"MZ"}`, ErrMessage},
		{`{"event":"dtmf","sequenceNumber":"3","streamSid":"MZ","dtmf":{"track":"inbound_track","digit":"12"}}`, ErrMessage}, // one key
		{`{"event":"dtmf","sequenceNumber":"3","streamSid":"MZ","dtmf":{"track":"inbound_track","digit":"x"}}`, ErrMessage},  // not a key
		{`{"event":"dtmf","sequenceNumber":"3","streamSid":"MZ","dtmf":{"track":"inbound_track","digit":"\u0000"}}`, ErrMessage},
		{`{"event":"stop","sequenceNumber":"3","streamSid":"MZ"}`, ErrMessage},
		{`{"event":"transcription","sequenceNumber":"3","streamSid":"MZ"}`, ErrUnknownEvent},
	} {
		_, err := Parse([]byte(tt.msg))
		require.ErrorIs(t, err, tt.want, tt.msg)
	}
}

func TestCheckFormat(t *testing.T) {
	for _, f := range []MediaFormat{
		{"audio/x-alaw", 8000, 1},
		{"audio/x-mulaw", 16000, 1},
		{"audio/x-mulaw", 8000, 2},
	} {
		s := Start{MediaFormat: f}
		require.ErrorIs(t, s.CheckFormat(), ErrFormat, "%+v", f)
	}
}

func TestSequence(t *testing.T) {
	parse := func(s string) Message {
		m, err := Parse([]byte(s))
		require.NoError(t, err)
		return m
	}
	var q Sequence
	require.NoError(t, q.Check(parse(call[0])))
	require.NoError(t, q.Check(parse(call[1])))
	require.ErrorIs(t, q.Check(parse(call[3])), ErrSequence, "sequenceNumber 3 after 1")

	q = Sequence{}
	require.NoError(t, q.Check(parse(call[1])))
	// sequenceNumber 2 but chunk 2: the first chunk is missing.
	m := parse(call[3])
	m.SequenceNumber = "2"
	require.ErrorIs(t, q.Check(m), ErrSequence)
}

// TestOutbound: the messages to Twilio, byte for byte as its docs show
// them (no track, chunk or timestamp on outbound media).
func TestOutbound(t *testing.T) {
	for _, tt := range []struct {
		m    Message
		want string
	}{
		{MediaMessage("MZ22", []byte{0xFF, 0x7F, 0x00}), `{"event":"media","streamSid":"MZ22","media":{"payload":"/38A"}}`},
		{MarkMessage("MZ22", "utt-42"), `{"event":"mark","streamSid":"MZ22","mark":{"name":"utt-42"}}`},
		{ClearMessage("MZ22"), `{"event":"clear","streamSid":"MZ22"}`},
	} {
		b, err := Encode(tt.m)
		require.NoError(t, err)
		require.Equal(t, tt.want, string(b))
	}
	// A server can read back what it sent (the test double's side).
	m, err := Parse([]byte(`{"event":"mark","sequenceNumber":"9","streamSid":"MZ22","mark":{"name":"utt-42"}}`))
	require.NoError(t, err)
	require.Equal(t, MarkMessage("MZ22", "utt-42").Mark, m.Mark)
}

// TestDTMFKeys: every key of a phone's keypad (and the A-D column) is a
// digit Twilio sends; nothing else is.
func TestDTMFKeys(t *testing.T) {
	for _, k := range "0123456789*#ABCD" {
		m, err := Parse([]byte(`{"event":"dtmf","sequenceNumber":"3","streamSid":"MZ","dtmf":{"track":"inbound_track","digit":"` + string(k) + `"}}`))
		require.NoError(t, err, string(k))
		require.Equal(t, string(k), m.DTMF.Digit)
	}
}
