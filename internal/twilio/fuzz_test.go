package twilio

import (
	"errors"
	"testing"
)

// FuzzParse: whatever a peer sends on the phone endpoint (before and after
// its start is checked), Parse and the checks a server runs on its
// message return an error or a value, never panic; an error is always one
// of the package's kinds; a message that parses survives Encode and Parse
// again; and the sequence check never accepts a message it has called a
// duplicate.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"event":"connected","protocol":"Call","version":"1.0.0"}`,
		`{"event":"start","sequenceNumber":"1","start":{"accountSid":"AC1","streamSid":"MZ1","callSid":"CA1","tracks":["inbound"],"customParameters":{"token":"x"},"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":8000,"channels":1}},"streamSid":"MZ1"}`,
		`{"event":"media","sequenceNumber":"2","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":"/////w=="},"streamSid":"MZ1"}`,
		`{"event":"media","sequenceNumber":"2","media":{"track":"inbound","chunk":"1","timestamp":"5","payload":"!!"},"streamSid":"MZ1"}`,
		`{"event":"dtmf","sequenceNumber":"3","dtmf":{"track":"inbound_track","digit":"1"},"streamSid":"MZ1"}`,
		`{"event":"mark","sequenceNumber":"4","mark":{"name":"turn-1"},"streamSid":"MZ1"}`,
		`{"event":"stop","sequenceNumber":"5","stop":{"accountSid":"AC1","callSid":"CA1"},"streamSid":"MZ1"}`,
		`{"event":"media","sequenceNumber":"-1","media":{"chunk":"99999999999999999999"}}`,
		`{"event":"start","start":{"mediaFormat":{"encoding":"audio/x-mulaw","sampleRate":-8000,"channels":0}}}`,
		`{"event":"surprise"}`,
		`[]`, `null`, ``,
	} {
		f.Add([]byte(s), []byte(s))
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		var q Sequence
		for _, data := range [][]byte{first, second, first} {
			m, err := Parse(data)
			if err != nil {
				if !errors.Is(err, ErrMessage) && !errors.Is(err, ErrUnknownEvent) {
					t.Fatalf("Parse(%q): error of no known kind: %v", data, err)
				}
				continue
			}
			b, err := Encode(m)
			if err != nil {
				t.Fatalf("Encode(Parse(%q)): %v", data, err)
			}
			if _, err := Parse(b); err != nil {
				t.Fatalf("Parse(Encode(Parse(%q))) = %v", data, err)
			}
			if m.Start != nil {
				_ = m.Start.CheckFormat()
			}
			if m.Media != nil {
				_, _ = m.Media.Audio()
				_, _ = m.Media.TimestampMs()
				_, _ = m.Media.ChunkNumber()
			}
			before := q.seq
			if err := q.Check(m); errors.Is(err, ErrDuplicate) && q.seq != before {
				t.Fatalf("a duplicate moved the sequence from %d to %d", before, q.seq)
			}
		}
	})
}
