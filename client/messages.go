package client

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/voiced/voiced/internal/protocol"
)

// The protocol's message types, as the server defines them.
type (
	AudioFormat    = protocol.AudioFormat
	SpeechInfo     = protocol.SpeechInfo
	SpeechSettings = protocol.SpeechSettings
	SessionUpdate  = protocol.SessionUpdate
	Transcript     = protocol.Transcript
	Intent         = protocol.Intent
	Retrieval      = protocol.Retrieval
	AnswerDelta    = protocol.AnswerDelta
	Result         = protocol.Result
	ErrorMessage   = protocol.ErrorMessage
	Code           = protocol.Code
)

// Message types a client receives.
const (
	TypeSessionReady    = protocol.TypeSessionReady
	TypeSessionDraining = protocol.TypeSessionDraining
	TypeTranscript      = protocol.TypeTranscript
	TypeIntent          = protocol.TypeIntent
	TypeRetrieval       = protocol.TypeRetrieval
	TypeAnswerDelta     = protocol.TypeAnswerDelta
	TypeAnswerAudio     = protocol.TypeAnswerAudio
	TypeResult          = protocol.TypeResult
	TypeError           = protocol.TypeError
	// TypeUndecodable marks a message the client could not decode (not
	// JSON, or a malformed answer.audio frame); Raw holds it.
	TypeUndecodable = "client.undecodable"
)

// Subprotocol is the WebSocket subprotocol the client offers and requires.
const Subprotocol = protocol.Name

// SessionReady is the first message of every session. Instance,
// ConversationID, ResumeToken and Resumed come from servers that support
// resume; they are empty otherwise.
type SessionReady struct {
	Type        string      `json:"type"`             // TypeSessionReady
	Protocol    string      `json:"protocol"`         // the subprotocol the server speaks (Subprotocol)
	SessionID   string      `json:"sessionId"`        // this connection's session
	ServerTime  int64       `json:"serverTime"`       // the server's clock when it wrote the message, Unix ms
	MaxBudgetMs int64       `json:"maxBudgetMs"`      // the longest deadline the server grants after a final frame
	Audio       AudioFormat `json:"audio"`            // the session's inbound audio until a session.update
	Speech      *SpeechInfo `json:"speech,omitempty"` // the voices and rates offered; nil: no speech

	Instance       string `json:"instance,omitempty"`       // the server instance serving the session
	ConversationID string `json:"conversationId,omitempty"` // the conversation, across resumes
	ResumeToken    string `json:"resumeToken,omitempty"`    // presented to resume the conversation after a lost connection; Client.Ready gives the latest, from the last result
	Resumed        bool   `json:"resumed,omitempty"`        // the conversation's history was found on resume

	// At is when the client read it (before the clock alignment).
	At time.Time `json:"-"`
}

// Event is one message from the server.
type Event struct {
	// Type is the message's type (TypeResult, TypeTranscript...).
	Type string
	// RequestID is the request the message belongs to; empty for a
	// session-level message.
	RequestID string
	// At is when the message was read.
	At time.Time
	// Raw is the JSON message; for a binary answer.audio, its header.
	Raw json.RawMessage
	// Audio is the chunk of an answer.audio message, binary or base64.
	Audio *AudioChunk
	// Replayed marks a terminal message the client missed while its
	// connection was down, received right after a resumed session.ready,
	// before the clock alignment's pongs (with Config.Pings negative,
	// before the pong of the one ping a resumed session still sends).
	Replayed bool

	resumeToken string // a result's fresh resume token, read with its type
}

// AudioChunk is one chunk of a spoken answer.
type AudioChunk struct {
	Seq        int64   // the chunk's number in its answer, from 0
	SampleRate int     // of PCM, in Hz
	Final      bool    // the answer's last chunk
	PCM        []int16 // 16-bit mono samples
}

// Terminal reports whether the event ends its request (result or error).
func (e Event) Terminal() bool { return protocol.Terminal(e.Type) }

// Decode decodes the message into v: a *Result, *ErrorMessage,
// *Transcript, and so on.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Raw, v) }

// Error returns the event's error message when it is one.
func (e Event) Error() (ErrorMessage, bool) {
	var m ErrorMessage
	if e.Type != TypeError || e.Decode(&m) != nil {
		return m, false
	}
	return m, true
}

// decodeEvent turns one WebSocket message into an event.
func decodeEvent(binaryFrame bool, b []byte, at time.Time) Event {
	if binaryFrame {
		h, pcm, err := protocol.DecodeAnswerAudio(b, true)
		if err != nil {
			return Event{Type: TypeUndecodable, At: at, Raw: b}
		}
		n := binary.BigEndian.Uint32(b) // valid: DecodeAnswerAudio checked it
		return Event{Type: h.Type, RequestID: h.RequestID, At: at, Raw: b[4 : 4+n],
			Audio: &AudioChunk{Seq: h.Seq, SampleRate: h.SampleRate, Final: h.Final, PCM: pcm}}
	}
	m, err := protocol.DecodeServer(b)
	if err != nil {
		return Event{Type: TypeUndecodable, At: at, Raw: b}
	}
	ev := Event{Type: m.Type, RequestID: m.RequestID, At: at, Raw: b, resumeToken: m.ResumeToken}
	if m.Type == TypeAnswerAudio {
		h, pcm, err := protocol.DecodeAnswerAudio(b, false)
		if err != nil {
			return Event{Type: TypeUndecodable, At: at, Raw: b}
		}
		ev.Audio = &AudioChunk{Seq: h.Seq, SampleRate: h.SampleRate, Final: h.Final, PCM: pcm}
	}
	return ev
}
