package protocol

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHeaderFastPath: the common forms take the fast path and give what
// encoding/json gives; every other form falls back to it.
func TestHeaderFastPath(t *testing.T) {
	tests := []struct {
		name string
		in   string
		fast bool
	}{
		{"canonical", `{"type":"audio","requestId":"r1","deadlineAt":1764489600000,"seq":7,"final":false,"sampleRate":16000}`, true},
		{"white space", " {\n\t\"type\" : \"audio\" , \"requestId\":\"a.b_c:d-1\",\"deadlineAt\":1,\"seq\":0,\"final\":true }\r\n", true},
		{"other key order", `{"seq":3,"final":true,"requestId":"r","type":"audio","deadlineAt":99}`, true},
		{"empty object", `{}`, true},
		{"negative seq", `{"type":"audio","requestId":"r","deadlineAt":1,"seq":-4}`, true},
		{"escape", `{"type":"audio","requestId":"r\u0031","deadlineAt":1}`, false},
		{"other spelling", `{"type":"audio","RequestId":"r1","deadlineAt":1}`, false},
		{"repeated key", `{"type":"audio","seq":1,"seq":2}`, false},
		{"null", `{"type":"audio","final":null}`, false},
		{"fraction", `{"type":"audio","seq":1.0}`, false},
		{"exponent", `{"type":"audio","deadlineAt":1e3}`, false},
		{"leading zero", `{"type":"audio","seq":01}`, false},
		{"overflow", `{"type":"audio","deadlineAt":99999999999999999999}`, false},
		{"other type", `{"type":"cancel","requestId":"r"}`, false},
		{"unknown key", `{"type":"audio","extra":1}`, false},
		{"audio key", `{"type":"audio","audio":"AAAA"}`, false},
		{"trailing data", `{"type":"audio"} {}`, false},
		{"trailing comma", `{"type":"audio",}`, false},
		{"string for number", `{"type":"audio","seq":"1"}`, false},
		{"non-ASCII", `{"type":"audio","requestId":"é"}`, false},
		{"truncated", `{"type":"audio","seq":1`, false},
		{"word after true", `{"final":truex}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fast AudioHeader
			require.Equal(t, tt.fast, fastHeader([]byte(tt.in), &fast))
			if !tt.fast {
				return
			}
			var slow AudioHeader
			require.NoError(t, decodeStrict([]byte(tt.in), &slow))
			require.Equal(t, slow, fast)
		})
	}
}

// FuzzHeaderFastPath: whatever the fast path accepts, encoding/json
// accepts too, with the same header; decodeHeader's outcome is always
// encoding/json's.
func FuzzHeaderFastPath(f *testing.F) {
	f.Add([]byte(`{"type":"audio","requestId":"r1","deadlineAt":1764489600000,"seq":7,"final":false,"sampleRate":16000}`))
	f.Add([]byte(`{"seq":3,"final":true,"requestId":"r","type":"audio","deadlineAt":99}`))
	f.Add([]byte(`{"type":"audio","seq":-0}`))
	f.Add([]byte(`{"type":"audio","requestId":"x","seq":9223372036854775807}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow AudioHeader
		ok := fastHeader(b, &fast)
		err := decodeStrict(b, &slow)
		if ok {
			if err != nil {
				t.Fatalf("fast path accepted %q, encoding/json refused it: %v", b, err)
			}
			if fast != slow {
				t.Fatalf("%q: fast path %+v, encoding/json %+v", b, fast, slow)
			}
		}
		var got AudioHeader
		gerr := decodeHeader(b, &got)
		if (gerr == nil) != (err == nil) || (err == nil && got != slow) {
			t.Fatalf("%q: decodeHeader %+v, %v; encoding/json %+v, %v", b, got, gerr, slow, err)
		}
	})
}

// FuzzPingFastPath: whatever the ping fast path accepts, DecodeText's
// encoding/json path accepts too, with the same ping.
func FuzzPingFastPath(f *testing.F) {
	f.Add([]byte(`{"type":"ping","clientTime":1764489600000}`))
	f.Add([]byte(`{ "clientTime" : -5 , "type" : "ping" }`))
	f.Add([]byte(`{"type":"ping"}`))
	f.Add([]byte(`{"type":"ping","clientTime":1,"clientTime":2}`))
	f.Add([]byte(`{"type":"ping","clientTime":1.5}`))
	f.Add([]byte(`{"type":"ping","Clienttime":3}`))
	f.Add([]byte(`{"type":"pong","clientTime":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := fastPing(b)
		if !ok {
			return
		}
		var env Envelope
		if err := json.Unmarshal(b, &env); err != nil || env.Type != TypePing {
			t.Fatalf("fast path accepted %q as a ping, encoding/json: type %q, %v", b, env.Type, err)
		}
		var slow Ping
		if err := decodeStrict(b, &slow); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refused it: %v", b, err)
		}
		if fast != slow {
			t.Fatalf("%q: fast path %+v, encoding/json %+v", b, fast, slow)
		}
	})
}

// TestPingFastPath: a keepalive in the common form takes the fast path.
func TestPingFastPath(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{`{"type":"ping","clientTime":1764489600000}`, true},
		{`{"clientTime":7,"type":"ping"}`, true},
		{`{"type":"ping"}`, true},
		{`{"type":"ping","clientTime":1,"clientTime":2}`, false}, // encoding/json decides
		{`{"type":"ping","extra":1}`, false},                     // refused by encoding/json
		{`{"clientTime":7}`, false},
	} {
		_, ok := fastPing([]byte(tc.msg))
		require.Equal(t, tc.want, ok, tc.msg)
		m, err := DecodeText([]byte(tc.msg))
		if tc.want {
			require.NoError(t, err)
			require.IsType(t, &Ping{}, m)
		}
	}
	ping := []byte(`{"type":"ping","clientTime":42}`)
	allocs := testing.AllocsPerRun(100, func() { _, _ = DecodeText(ping) })
	require.LessOrEqual(t, allocs, 1.0, "a ping decodes with one allocation, the result")
}

func BenchmarkDecodeHeader(b *testing.B) {
	hdr := []byte(`{"type":"audio","requestId":"r-123","deadlineAt":1764489600000,"seq":42,"final":false,"sampleRate":16000}`)
	for _, bc := range []struct {
		name string
		fn   func([]byte, *AudioHeader) error
	}{{"fast", decodeHeader}, {"encoding-json", strictHeader}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var h AudioHeader
			for b.Loop() {
				if err := bc.fn(hdr, &h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func strictHeader(b []byte, h *AudioHeader) error { return decodeStrict(b, h) }
