package protocol

import (
	"encoding/binary"
	"strconv"
)

// Turn detection modes (session.update turnDetection.mode).
const (
	// TurnsClient: the client ends each utterance with final:true (the
	// default).
	TurnsClient = "client"
	// TurnsServer: the client streams audio continuously and the server
	// finds the turns with its voice activity detector.
	TurnsServer = "server"
)

// TurnIDPrefix starts the requestId the server gives each turn it finds
// (TurnID: t-1, t-2, … per session; ResumedTurnID in a resumed session).
const TurnIDPrefix = "t-"

// TurnID is the requestId of a session's nth server turn, from 1.
func TurnID(n int) string { return TurnIDPrefix + strconv.Itoa(n) }

// ResumedTurnID is the requestId of the nth server turn of a session that
// continues a conversation (a resume): t-<the start of its session id>-n,
// so that it never repeats an id of the conversation's earlier sessions,
// whose missed terminals the session may receive.
func ResumedTurnID(sessionID string, n int) string {
	return TurnIDPrefix + sessionID[:min(len(sessionID), 8)] + "-" + strconv.Itoa(n)
}

// Defaults and ranges of TurnDetection's fields, in milliseconds. A
// budget above the server's maximum is capped to it, as deadlineAt is.
const (
	DefaultSilenceMs               = 500
	MinSilenceMs, MaxSilenceMs     = 100, 5000
	DefaultPrefixMs                = 300
	MaxPrefixMs                    = 2000
	DefaultMinSpeechMs             = 200
	MinMinSpeechMs, MaxMinSpeechMs = 20, 2000
	MinBudgetMs, MaxBudgetMs       = 100, 60000
	DefaultHoldMs                  = 1000
	MaxHoldMs                      = 5000
)

// TurnDetection is session.update's turnDetection: which side finds the
// ends of utterances and, for the server, how. Nil fields take their
// defaults (Resolved).
type TurnDetection struct {
	// Mode is TurnsServer or TurnsClient.
	Mode string `json:"mode"`
	// SilenceMs is how long silence after speech ends a turn.
	SilenceMs *int `json:"silenceMs,omitempty"`
	// PrefixMs is how much audio before the detected start of speech the
	// turn includes (0: none).
	PrefixMs *int `json:"prefixMs,omitempty"`
	// MinSpeechMs is how much speech starts a turn; shorter bursts
	// (clicks, coughs) start none.
	MinSpeechMs *int `json:"minSpeechMs,omitempty"`
	// Interrupt: speech that starts while an earlier turn is in flight
	// ends that turn with interrupted (default true); false lets the
	// earlier turn finish and the new one runs beside it.
	Interrupt *bool `json:"interrupt,omitempty"`
	// BudgetMs is each turn's budget from the detected end of its
	// speech; default and cap: the server's maxBudgetMs.
	BudgetMs *int `json:"budgetMs,omitempty"`
	// HoldMs is how much longer than SilenceMs a turn waits when the
	// words recognised up to its end of speech are unfinished ("i want
	// to return the"); 0: never.
	HoldMs *int `json:"holdMs,omitempty"`
}

// Turns is a TurnDetection with every default filled in; BudgetMs 0
// means the server's maximum budget.
type Turns struct {
	SilenceMs, PrefixMs, MinSpeechMs, BudgetMs, HoldMs int
	Interrupt                                          bool
}

// Resolved returns the settings with defaults for absent fields.
func (t *TurnDetection) Resolved() Turns {
	or := func(p *int, d int) int {
		if p == nil {
			return d
		}
		return *p
	}
	out := Turns{
		SilenceMs:   or(t.SilenceMs, DefaultSilenceMs),
		PrefixMs:    or(t.PrefixMs, DefaultPrefixMs),
		MinSpeechMs: or(t.MinSpeechMs, DefaultMinSpeechMs),
		BudgetMs:    or(t.BudgetMs, 0),
		HoldMs:      or(t.HoldMs, DefaultHoldMs),
		Interrupt:   t.Interrupt == nil || *t.Interrupt,
	}
	return out
}

func (t *TurnDetection) check() error {
	switch t.Mode {
	case TurnsServer:
	case TurnsClient:
		if t.SilenceMs != nil || t.PrefixMs != nil || t.MinSpeechMs != nil || t.Interrupt != nil || t.BudgetMs != nil || t.HoldMs != nil {
			return Errorf(CodeBadMessage, `session.update: turnDetection: mode "client" takes no other field`)
		}
		return nil
	default:
		return Errorf(CodeBadMessage, "session.update: turnDetection: mode %q: want %q or %q",
			Truncate(t.Mode, 40), TurnsServer, TurnsClient)
	}
	for _, f := range []struct {
		name     string
		v        *int
		min, max int
	}{
		{"silenceMs", t.SilenceMs, MinSilenceMs, MaxSilenceMs},
		{"prefixMs", t.PrefixMs, 0, MaxPrefixMs},
		{"minSpeechMs", t.MinSpeechMs, MinMinSpeechMs, MaxMinSpeechMs},
		{"budgetMs", t.BudgetMs, MinBudgetMs, MaxBudgetMs},
		{"holdMs", t.HoldMs, 0, MaxHoldMs},
	} {
		if f.v != nil && (*f.v < f.min || *f.v > f.max) {
			return Errorf(CodeBadMessage, "session.update: turnDetection: %s %d out of range (want %d..%d)", f.name, *f.v, f.min, f.max)
		}
	}
	return nil
}

// checkEncoding checks the update's inbound encoding: μ-law is at 8000 Hz
// only.
func (u *SessionUpdate) checkEncoding() error {
	if u.Encoding == nil {
		return nil
	}
	switch *u.Encoding {
	case EncodingPCM16:
	case EncodingMuLaw:
		if u.SampleRate != nil && *u.SampleRate != MuLawRate {
			return Errorf(CodeBadAudio, "session.update: mu-law audio is at %d Hz only, not %d", MuLawRate, *u.SampleRate)
		}
	default:
		return Errorf(CodeBadMessage, "session.update: encoding %q: want %q or %q", Truncate(*u.Encoding, 40), EncodingPCM16, EncodingMuLaw)
	}
	return nil
}

// SpeechStarted tells a server-turn session's client that the server
// heard speech begin: a new turn, RequestID, whose speech starts
// AudioStartMs into the client's stream (counted from its first frame).
type SpeechStarted struct {
	Type         string `json:"type"`
	RequestID    string `json:"requestId"`
	AudioStartMs int64  `json:"audioStartMs"`
}

// SpeechStopped tells the client that the turn's speech ended
// AudioEndMs into its stream; the turn's deadline runs from now.
type SpeechStopped struct {
	Type       string `json:"type"`
	RequestID  string `json:"requestId"`
	AudioEndMs int64  `json:"audioEndMs"`
	// DecidedMs is the stream position at which the turn's end was
	// decided: silenceMs after AudioEndMs, up to holdMs more when the
	// turn was held for its unfinished words, or where its audio stopped
	// when it stalled.
	DecidedMs int64 `json:"decidedMs"`
}

// EncodeStreamAudio builds a binary audio frame of a server-turn
// session's stream, appending to dst: the header {"seq":n} (with
// sampleRate when not 0), then payload as is (16-bit little-endian PCM,
// or μ-law bytes in a μ-law session).
func EncodeStreamAudio(dst []byte, seq int64, sampleRate int, payload []byte) []byte {
	var hdr []byte
	hdr = append(hdr, `{"seq":`...)
	hdr = strconv.AppendInt(hdr, seq, 10)
	if sampleRate != 0 {
		hdr = append(hdr, `,"sampleRate":`...)
		hdr = strconv.AppendInt(hdr, int64(sampleRate), 10)
	}
	hdr = append(hdr, '}')
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(hdr)))
	dst = append(dst, hdr...)
	return append(dst, payload...)
}

// AppendPCM appends samples as 16-bit little-endian PCM.
func AppendPCM(dst []byte, pcm []int16) []byte {
	for _, s := range pcm {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(s))
	}
	return dst
}
