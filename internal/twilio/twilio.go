// Package twilio is the codec of Twilio's bidirectional Media Streams
// WebSocket protocol: the JSON text messages Twilio sends (connected,
// start, media, dtmf, mark, stop) and the ones a server sends back (media,
// mark, clear), with the checks a server needs before trusting them. It
// does no I/O; the server's handler owns the socket.
//
// Twilio's numbers are JSON strings (sequenceNumber, chunk, timestamp),
// except those in start.mediaFormat; audio is base64 of raw G.711 μ-law at
// 8000 Hz, no file header, inbound in 20 ms (160-byte) payloads in
// practice.
package twilio

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/voiced/voiced/internal/protocol"
)

// Event names.
const (
	EventConnected = "connected" // from Twilio, first; no streamSid
	EventStart     = "start"     // from Twilio: stream metadata
	EventMedia     = "media"     // both ways: audio
	EventDTMF      = "dtmf"      // from Twilio: a key pressed
	EventMark      = "mark"      // both ways: sent after audio; echoed when it has played (or been cleared)
	EventStop      = "stop"      // from Twilio: the stream stopped or the call ended
	EventClear     = "clear"     // to Twilio: drop the audio queued for playback; pending marks are echoed
)

// The one media format Twilio streams.
const (
	Encoding   = "audio/x-mulaw"
	SampleRate = 8000
)

var (
	// ErrMessage: a message is not valid Media Streams JSON, or lacks a
	// field its event requires.
	ErrMessage = errors.New("twilio: bad message")
	// ErrUnknownEvent: a well-formed message of an event this package does
	// not know; a server should ignore it, not fail the call.
	ErrUnknownEvent = errors.New("twilio: unknown event")
	// ErrFormat: the stream's media format is not μ-law at 8000 Hz mono.
	ErrFormat = errors.New("twilio: unsupported media format")
	// ErrSequence: a sequenceNumber or chunk is out of order or missing.
	ErrSequence = errors.New("twilio: message out of sequence")
	// ErrDuplicate: a message Twilio sent again (a retransmit, or a
	// resend on reconnect): a media chunk at or before the last of its
	// track, or another message at or before the last sequenceNumber.
	// Its content was already taken; a server drops it. It is also an
	// ErrSequence.
	ErrDuplicate = fmt.Errorf("%w: duplicate", ErrSequence)
)

// Message is one Media Streams message in either direction. Exactly the
// field of its event is set (none for connected and clear).
type Message struct {
	Event          string `json:"event"`
	SequenceNumber string `json:"sequenceNumber,omitempty"`
	StreamSid      string `json:"streamSid,omitempty"`
	// connected
	Protocol string `json:"protocol,omitempty"`
	Version  string `json:"version,omitempty"`

	Start *Start `json:"start,omitempty"`
	Media *Media `json:"media,omitempty"`
	DTMF  *DTMF  `json:"dtmf,omitempty"`
	Mark  *Mark  `json:"mark,omitempty"`
	Stop  *Stop  `json:"stop,omitempty"`
}

// Start describes the stream.
type Start struct {
	AccountSid       string            `json:"accountSid"`
	StreamSid        string            `json:"streamSid"`
	CallSid          string            `json:"callSid"`
	Tracks           []string          `json:"tracks"`
	CustomParameters map[string]string `json:"customParameters"`
	MediaFormat      MediaFormat       `json:"mediaFormat"`
}

// MediaFormat is the stream's audio format; its numbers are JSON numbers.
type MediaFormat struct {
	Encoding   string `json:"encoding"`
	SampleRate int    `json:"sampleRate"`
	Channels   int    `json:"channels"`
}

// Media carries audio. From Twilio every field is set; to Twilio only
// Payload.
type Media struct {
	Track     string `json:"track,omitempty"`     // "inbound" or "outbound"
	Chunk     string `json:"chunk,omitempty"`     // 1, 2, … per track
	Timestamp string `json:"timestamp,omitempty"` // ms since the stream started
	Payload   string `json:"payload"`             // base64 μ-law
}

// DTMF is a key the caller pressed.
type DTMF struct {
	Track string `json:"track"` // "inbound_track"
	Digit string `json:"digit"`
}

// Mark names a point in the outbound audio.
type Mark struct {
	Name string `json:"name"`
}

// Stop ends the stream.
type Stop struct {
	AccountSid string `json:"accountSid"`
	CallSid    string `json:"callSid"`
}

// Parse decodes and checks one text message from Twilio. A message of an
// unknown event comes back with ErrUnknownEvent; anything malformed with
// ErrMessage.
func Parse(data []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMessage, err)
	}
	return m, m.check()
}

func (m Message) check() error {
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%w: %s without %s", ErrMessage, m.Event, what)
		}
		return nil
	}
	if m.Event == EventConnected {
		return nil
	}
	// Every other message from Twilio carries the stream and its
	// position in it.
	switch m.Event {
	case EventStart, EventMedia, EventDTMF, EventMark, EventStop:
	case "":
		return fmt.Errorf("%w: no event", ErrMessage)
	default:
		return fmt.Errorf("%w: %q", ErrUnknownEvent, m.Event)
	}
	if err := need(m.StreamSid != "", "streamSid"); err != nil {
		return err
	}
	if _, err := m.Seq(); err != nil {
		return err
	}
	switch m.Event {
	case EventStart:
		return need(m.Start != nil && m.Start.StreamSid == m.StreamSid && m.Start.CallSid != "", "start.streamSid (the same) and start.callSid")
	case EventMedia:
		if err := need(m.Media != nil && m.Media.Track != "", "media.track"); err != nil {
			return err
		}
		if _, err := m.Media.ChunkNumber(); err != nil {
			return err
		}
		if _, err := m.Media.TimestampMs(); err != nil {
			return err
		}
		_, err := m.Media.Audio()
		return err
	case EventDTMF:
		// One key of the keypad: anything else is not Twilio's, and
		// with -log-transcripts it would be logged at whatever length
		// the peer sent.
		return need(m.DTMF != nil && len(m.DTMF.Digit) == 1 && strings.Contains("0123456789*#ABCD", m.DTMF.Digit), "dtmf.digit (one of 0-9, *, #, A-D)")
	case EventMark:
		return need(m.Mark != nil && m.Mark.Name != "", "mark.name")
	case EventStop:
		return need(m.Stop != nil, "stop")
	}
	return nil
}

// Seq returns the message's sequenceNumber (1 for start, then one more
// per message).
func (m Message) Seq() (int64, error) { return count("sequenceNumber", m.SequenceNumber, 1) }

// ChunkNumber returns the media chunk's number (from 1, per track).
func (m *Media) ChunkNumber() (int64, error) { return count("chunk", m.Chunk, 1) }

// TimestampMs returns the media's time in ms since the stream started.
func (m *Media) TimestampMs() (int64, error) { return count("timestamp", m.Timestamp, 0) }

// Audio decodes the payload: raw μ-law bytes at 8000 Hz.
func (m *Media) Audio() ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(m.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: media payload: %v", ErrMessage, err)
	}
	return b, nil
}

func count(name, s string, least int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < least {
		if len(s) > 24 {
			s = s[:24] + "…" // the peer's text, into the server's log
		}
		return 0, fmt.Errorf("%w: %s %q (want a decimal string, at least %d)", ErrMessage, name, s, least)
	}
	return n, nil
}

// CheckFormat reports whether the stream is one voiced can take: μ-law,
// 8000 Hz, one channel.
func (s *Start) CheckFormat() error {
	f := s.MediaFormat
	if f.Encoding != Encoding || f.SampleRate != SampleRate || f.Channels != 1 {
		// The peer's text, into the close reason and the log: cut.
		enc := protocol.Truncate(f.Encoding, 24)
		return fmt.Errorf("%w: %q at %d Hz, %d channels (want %s at %d Hz, mono)", ErrFormat, enc, f.SampleRate, f.Channels, Encoding, SampleRate)
	}
	return nil
}

// Sequence checks that messages from Twilio come in order: sequenceNumber
// one more each time from start on, and each track's chunks one more each
// time from 1. The zero value is ready for a new stream.
type Sequence struct {
	seq    int64
	chunks map[string]int64
}

// Check accepts the next message, or says what is out of order. A
// message already seen (see ErrDuplicate) leaves the state as it was, so
// that the message after it is not reported as a gap; a media chunk seen
// before under a new sequenceNumber records that number alone.
func (q *Sequence) Check(m Message) error {
	if m.Event == EventConnected {
		return nil
	}
	n, err := m.Seq()
	if err != nil {
		return err
	}
	prev := q.seq
	// Only Twilio's own tracks are followed: the track is the peer's
	// text, and a count per name it makes up would grow without bound.
	tracked := m.Event == EventMedia && m.Media != nil && (m.Media.Track == "inbound" || m.Media.Track == "outbound")
	var c int64
	if tracked {
		if c, err = m.Media.ChunkNumber(); err != nil {
			return err
		}
		if last := q.chunks[m.Media.Track]; c <= last {
			// Its audio was taken, but a new sequenceNumber was used
			// on it: the message after it is not a gap.
			q.seq = max(prev, n)
			return fmt.Errorf("%w: %s chunk %d (sequenceNumber %d) after chunk %d", ErrDuplicate, m.Media.Track, c, n, last)
		}
	} else if n <= prev {
		return fmt.Errorf("%w: %s sequenceNumber %d after %d", ErrDuplicate, m.Event, n, prev)
	}
	// Each number is recorded whether or not it follows the last: after
	// a gap the stream goes on from where it is, and only the gap is
	// reported.
	q.seq = max(prev, n)
	var gaps []error
	if n != prev+1 {
		gaps = append(gaps, fmt.Errorf("%w: sequenceNumber %d after %d", ErrSequence, n, prev))
	}
	if tracked {
		if q.chunks == nil {
			q.chunks = map[string]int64{}
		}
		if want := q.chunks[m.Media.Track] + 1; c != want {
			gaps = append(gaps, fmt.Errorf("%w: %s chunk %d, want %d", ErrSequence, m.Media.Track, c, want))
		}
		q.chunks[m.Media.Track] = c
	}
	return errors.Join(gaps...)
}

// MediaMessage is the message that queues μ-law audio for playback on the
// call: raw bytes at 8000 Hz, no header, any length.
func MediaMessage(streamSid string, mulaw []byte) Message {
	return Message{Event: EventMedia, StreamSid: streamSid, Media: &Media{Payload: base64.StdEncoding.EncodeToString(mulaw)}}
}

// MarkMessage is a mark after the audio queued so far; Twilio echoes it
// when that audio has played, or at once when it is cleared.
func MarkMessage(streamSid, name string) Message {
	return Message{Event: EventMark, StreamSid: streamSid, Mark: &Mark{Name: name}}
}

// ClearMessage drops the audio queued for playback (barge-in).
func ClearMessage(streamSid string) Message {
	return Message{Event: EventClear, StreamSid: streamSid}
}

// Encode marshals a message for a WebSocket text frame.
func Encode(m Message) ([]byte, error) { return json.Marshal(m) }
