package protocol

import (
	"encoding/json"
	"fmt"
)

// ServerMessage is a decoded server event: its common fields plus the raw
// message for decoding into its concrete type. Clients (voiceload, tests)
// use it to dispatch on Type.
type ServerMessage struct {
	Type      string `json:"type"`
	RequestID string `json:"requestId,omitempty"`
	// ResumeToken is a result's fresh resume token (Result.ResumeToken),
	// read in the same pass: a client keeps the latest.
	ResumeToken string          `json:"resumeToken,omitempty"`
	Raw         json.RawMessage `json:"-"`
}

// DecodeServer decodes a server message's type, requestId and, on a
// result, its resume token.
func DecodeServer(b []byte) (ServerMessage, error) {
	var m ServerMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode server message: %w", err)
	}
	m.Raw = b
	return m, nil
}

// Terminal reports whether a server message type ends its request.
func Terminal(typ string) bool { return typ == TypeResult || typ == TypeError }

// As decodes the raw message into v.
func (m ServerMessage) As(v any) error { return json.Unmarshal(m.Raw, v) }
