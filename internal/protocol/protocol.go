// Package protocol defines the voiced.v1 wire protocol: the JSON messages
// exchanged over a session's WebSocket, the binary audio frame layout, the
// error codes, and their validation. The server, the load generator and the
// tests all speak the protocol through this package, so there is one
// definition of every message.
package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/voiced/voiced/internal/audio/mulaw"
)

// Name is the protocol identifier sent in session.ready.
const Name = "voiced.v1"

// Message types sent by clients.
const (
	TypeAudio         = "audio"
	TypeCancel        = "cancel"
	TypeSessionUpdate = "session.update"
	TypePing          = "ping"
	// TypePlayback reports how much of a request's answer.audio the
	// client played before it stopped playback (barge-in).
	TypePlayback = "playback"
)

// Message types sent by the server.
const (
	TypeSessionReady = "session.ready"
	// TypeSessionDraining tells the client that the server is shutting
	// down: start no new request on this session.
	TypeSessionDraining = "session.draining"
	TypePong            = "pong"
	TypeTranscript      = "transcript"
	TypeIntent          = "intent"
	TypeRetrieval       = "retrieval"
	TypeAnswerDelta     = "answer.delta"
	// TypeAnswerAudio carries a chunk of the spoken answer (speech on).
	TypeAnswerAudio = "answer.audio"
	TypeResult      = "result"
	TypeError       = "error"
	// TypeSpeechStarted and TypeSpeechStopped report the turns the
	// server finds in a server-turn session's audio.
	TypeSpeechStarted = "input.speech_started"
	TypeSpeechStopped = "input.speech_stopped"
)

// Code is an error code carried by an error message.
type Code string

// The error codes of protocol v1. docs/protocol.md says when each is sent.
const (
	CodeBadMessage       Code = "bad_message"
	CodeBadAudio         Code = "bad_audio"
	CodeDeadlineExceeded Code = "deadline_exceeded"
	CodeCancelled        Code = "cancelled"
	CodeReplaced         Code = "replaced"
	CodeInterrupted      Code = "interrupted"
	CodeOverloaded       Code = "overloaded"
	CodeRateLimited      Code = "rate_limited"
	CodePolicyBlocked    Code = "policy_blocked"
	CodeUnavailable      Code = "unavailable"
	CodeInternal         Code = "internal"
)

// Codes lists every error code, in the order docs/protocol.md gives them.
var Codes = []Code{
	CodeBadMessage, CodeBadAudio, CodeDeadlineExceeded, CodeCancelled, CodeReplaced, CodeInterrupted,
	CodeOverloaded, CodeRateLimited, CodePolicyBlocked, CodeUnavailable, CodeInternal,
}

// MessageDraining is the message of the unavailable error that refuses a
// request opened while the server drains (close 1012 in docs/protocol.md):
// a client, or a load generator, tells this refusal from other
// unavailable errors by it, and sends the request again after resuming.
const MessageDraining = "server shutting down: no new requests"

// Error is a protocol error: a code for machines and a message for people.
// It is what the decoding functions return for bad input, and what the
// server sends back.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Errorf returns an *Error with the given code and formatted message, cut
// to MaxErrorMessage bytes: a message may quote the client's input (an
// unknown field's name, as encoding/json reports it), and a 200 KB field
// name must not come back as a 200 KB error.
func Errorf(code Code, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > MaxErrorMessage {
		msg = Truncate(msg, MaxErrorMessage-len("…"))
	}
	return &Error{Code: code, Message: msg}
}

// MaxErrorMessage is the longest error message the server sends, in
// bytes, the "…" that marks a cut one included (as protocol.md says).
const MaxErrorMessage = 512

// CodeOf returns the protocol code carried by err, or CodeInternal when err
// carries none.
func CodeOf(err error) Code {
	if pe, ok := errors.AsType[*Error](err); ok {
		return pe.Code
	}
	return CodeInternal
}

// Audio format of a session.
const (
	EncodingPCM16LE   = "pcm_s16le"
	DefaultSampleRate = 16000
)

// Inbound audio encodings a client may choose with session.update.
const (
	EncodingPCM16 = "pcm16" // 16-bit little-endian PCM, the default
	// EncodingMuLaw is G.711 μ-law, one byte a sample, at MuLawRate
	// only: what telephone media streams carry.
	EncodingMuLaw = "mulaw"
	MuLawRate     = 8000
)

// SupportedSampleRates are the input rates a client may declare.
var SupportedSampleRates = []int{8000, 16000, 22050, 24000, 44100, 48000}

// SampleRateSupported reports whether hz is one of SupportedSampleRates.
func SampleRateSupported(hz int) bool {
	for _, r := range SupportedSampleRates {
		if r == hz {
			return true
		}
	}
	return false
}

// AudioFormat describes the PCM a session expects.
type AudioFormat struct {
	Encoding   string `json:"encoding"`
	SampleRate int    `json:"sampleRate"`
	Channels   int    `json:"channels"`
}

// SessionReady is the first message of every session.
type SessionReady struct {
	Type        string      `json:"type"`
	Protocol    string      `json:"protocol"`
	SessionID   string      `json:"sessionId"`
	ServerTime  int64       `json:"serverTime"`
	MaxBudgetMs int64       `json:"maxBudgetMs"`
	Audio       AudioFormat `json:"audio"`
	// Instance is the id of the server instance serving the session.
	Instance string `json:"instance"`
	// ConversationID names the conversation the session continues.
	ConversationID string `json:"conversationId"`
	// ResumeToken, presented as ?resume= on a new connection, continues
	// the conversation there (opaque; valid for the server's resume TTL).
	ResumeToken string `json:"resumeToken"`
	// Resumed says the session continues an earlier connection's
	// conversation, with its history.
	Resumed bool `json:"resumed"`
	// Speech describes the speech synthesiser; absent when the server
	// has none.
	Speech *SpeechInfo `json:"speech,omitempty"`
}

// SpeechInfo is what the server's speech synthesiser offers.
type SpeechInfo struct {
	Engine      string   `json:"engine"`
	Voices      []string `json:"voices"`
	SampleRates []int    `json:"sampleRates"`
}

// Encodings of answer.audio.
const (
	SpeechBinary = "binary" // binary frames, the default
	SpeechBase64 = "base64" // text messages with base64 PCM in "audio"
)

// SpeechSettings are a session's speech settings (session.update).
type SpeechSettings struct {
	// Voice is one of session.ready's voices; "" means the default.
	Voice string `json:"voice,omitempty"`
	// SampleRate is one of session.ready's sampleRates; 0 means 16000.
	SampleRate int `json:"sampleRate,omitempty"`
	// Encoding is SpeechBinary ("" means it) or SpeechBase64.
	Encoding string `json:"encoding,omitempty"`
}

// AudioHeader is the JSON header of an audio message. In a text frame the
// PCM travels base64-encoded in Audio; in a binary frame it follows the
// header and Audio is empty.
type AudioHeader struct {
	Type       string `json:"type"`
	RequestID  string `json:"requestId"`
	DeadlineAt int64  `json:"deadlineAt"`
	Seq        int64  `json:"seq"`
	Final      bool   `json:"final"`
	SampleRate int    `json:"sampleRate,omitempty"`
	Audio      string `json:"audio,omitempty"`
}

// Cancel asks the server to cancel one request.
type Cancel struct {
	Type      string `json:"type"`
	RequestID string `json:"requestId"`
}

// SessionUpdate changes session settings. Nil fields are left unchanged.
type SessionUpdate struct {
	Type       string `json:"type"`
	SampleRate *int   `json:"sampleRate,omitempty"`
	Supersede  *bool  `json:"supersede,omitempty"`
	// Encoding is the inbound audio's encoding: EncodingPCM16 or
	// EncodingMuLaw (at MuLawRate only).
	Encoding *string `json:"encoding,omitempty"`
	// TurnDetection switches between client and server turns (see
	// TurnDetection); absent leaves the mode as it is.
	TurnDetection *TurnDetection `json:"turnDetection,omitempty"`
	// Speech is the raw "speech" field: absent (nil) leaves speech as it
	// is, null turns it off, an object turns it on (see SpeechUpdate).
	Speech json.RawMessage `json:"speech,omitempty"`
}

// SpeechUpdate interprets u.Speech: set reports whether the field was
// present; a nil s with set true turns speech off.
func (u *SessionUpdate) SpeechUpdate() (s *SpeechSettings, set bool, err error) {
	if u.Speech == nil {
		return nil, false, nil
	}
	if string(bytes.TrimSpace(u.Speech)) == "null" {
		return nil, true, nil
	}
	var v SpeechSettings
	if err := decodeStrict(u.Speech, &v); err != nil {
		return nil, true, Errorf(CodeBadMessage, "session.update: speech: %v", err)
	}
	if v.SampleRate == 0 {
		v.SampleRate = DefaultSampleRate
	}
	if !SampleRateSupported(v.SampleRate) {
		return nil, true, Errorf(CodeBadMessage, "session.update: speech: unsupported sampleRate %d: want one of %v", v.SampleRate, SupportedSampleRates)
	}
	switch v.Encoding {
	case "":
		v.Encoding = SpeechBinary
	case SpeechBinary, SpeechBase64:
	default:
		return nil, true, Errorf(CodeBadMessage, "session.update: speech: unknown encoding %q: want %q or %q",
			Truncate(v.Encoding, 40), SpeechBinary, SpeechBase64)
	}
	return &v, true, nil
}

// Playback reports that the client played PlayedMs of a request's
// answer.audio before stopping (a barge-in): the session cuts the answer
// in its history to the words heard by then.
type Playback struct {
	Type      string `json:"type"`
	RequestID string `json:"requestId"`
	PlayedMs  int64  `json:"playedMs"`
}

// Ping asks for a pong, for clock alignment and liveness.
type Ping struct {
	Type       string `json:"type"`
	ClientTime int64  `json:"clientTime"`
}

// SessionDraining says the server is draining: requests in flight finish,
// new ones are refused with unavailable, and the session closes once it
// has none, at most CloseInMs from now.
type SessionDraining struct {
	Type      string `json:"type"`
	CloseInMs int64  `json:"closeInMs"`
}

// Pong answers a ping.
type Pong struct {
	Type       string `json:"type"`
	ClientTime int64  `json:"clientTime"`
	ServerTime int64  `json:"serverTime"`
}

// Transcript carries a partial (Final false) or final transcript.
type Transcript struct {
	Type      string `json:"type"`
	RequestID string `json:"requestId"`
	Text      string `json:"text"`
	Final     bool   `json:"final"`
}

// Intent carries the classified intent.
type Intent struct {
	Type       string  `json:"type"`
	RequestID  string  `json:"requestId"`
	Name       string  `json:"name"`
	Confidence float64 `json:"confidence"`
}

// Passage is one retrieved passage.
type Passage struct {
	ID    string  `json:"id"`
	Title string  `json:"title"`
	Score float64 `json:"score"`
}

// Retrieval carries the passages retrieved for a request.
type Retrieval struct {
	Type      string    `json:"type"`
	RequestID string    `json:"requestId"`
	Passages  []Passage `json:"passages"`
}

// AnswerDelta carries the next piece of the streamed answer.
type AnswerDelta struct {
	Type      string `json:"type"`
	RequestID string `json:"requestId"`
	Text      string `json:"text"`
}

// AnswerAudioHeader is the JSON header of an answer.audio message. In a
// binary frame the PCM (16-bit little-endian mono at SampleRate) follows
// it; in a text message it travels base64-encoded in Audio.
type AnswerAudioHeader struct {
	Type       string `json:"type"`
	RequestID  string `json:"requestId"`
	Seq        int64  `json:"seq"`
	SampleRate int    `json:"sampleRate"`
	Final      bool   `json:"final"`
	// Encoding is EncodingMuLaw when the audio is μ-law (a μ-law session
	// whose speech is at MuLawRate); absent for 16-bit PCM.
	Encoding string `json:"encoding,omitempty"`
	Audio    string `json:"audio,omitempty"`
}

// EncodeAnswerAudio builds an answer.audio message: a binary frame framed
// like inbound audio, or with base64 a text message.
// With h.Encoding EncodingMuLaw the samples are sent as μ-law bytes.
func EncodeAnswerAudio(h AnswerAudioHeader, pcm []int16, base64Text bool) ([]byte, error) {
	h.Type = TypeAnswerAudio
	var raw []byte
	if h.Encoding == EncodingMuLaw {
		raw = mulaw.AppendEncode(nil, pcm)
	} else {
		raw = make([]byte, 0, 2*len(pcm))
		for _, s := range pcm {
			raw = binary.LittleEndian.AppendUint16(raw, uint16(s))
		}
	}
	if base64Text {
		h.Audio = base64.StdEncoding.EncodeToString(raw)
		return json.Marshal(h)
	}
	h.Audio = ""
	hdr, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(hdr)+len(raw)), uint32(len(hdr)))
	out = append(out, hdr...)
	return append(out, raw...), nil
}

// DecodeAnswerAudio parses an answer.audio message, binary (a frame) or
// text (JSON with base64 "audio"), into its header and samples.
func DecodeAnswerAudio(msg []byte, binaryFrame bool) (AnswerAudioHeader, []int16, error) {
	var h AnswerAudioHeader
	var raw []byte
	if binaryFrame {
		if len(msg) < 4 {
			return h, nil, Errorf(CodeBadMessage, "answer.audio frame of %d bytes", len(msg))
		}
		n := binary.BigEndian.Uint32(msg)
		if n == 0 || uint64(n) > uint64(len(msg)-4) {
			return h, nil, Errorf(CodeBadMessage, "answer.audio: bad header length %d", n)
		}
		if err := decodeStrict(msg[4:4+n], &h); err != nil {
			return h, nil, Errorf(CodeBadMessage, "answer.audio header: %v", err)
		}
		raw = msg[4+n:]
	} else {
		if err := decodeStrict(msg, &h); err != nil {
			return h, nil, Errorf(CodeBadMessage, "answer.audio: %v", err)
		}
		var err error
		if raw, err = base64.StdEncoding.DecodeString(h.Audio); err != nil {
			return h, nil, Errorf(CodeBadMessage, "answer.audio: bad base64: %v", err)
		}
		h.Audio = ""
	}
	mu := h.Encoding == EncodingMuLaw
	if h.Type != TypeAnswerAudio || (!mu && len(raw)%2 != 0) || (h.Encoding != "" && !mu) {
		return h, nil, Errorf(CodeBadMessage, "not an answer.audio message of whole samples")
	}
	a := Audio{PCM: raw}
	return h, a.Decode(nil, mu), nil
}

// Timings are stage and total durations in milliseconds. A stage that did
// not run is omitted.
type Timings struct {
	STT       *int64 `json:"stt,omitempty"`
	Intent    *int64 `json:"intent,omitempty"`
	Retrieval *int64 `json:"retrieval,omitempty"`
	LLM       *int64 `json:"llm,omitempty"`
	TTS       *int64 `json:"tts,omitempty"` // speech on: from the speech stage's start to its last audio (or where speech stopped short)
	Total     int64  `json:"total"`
}

// Budget reports the request's deadline and how much of it was left when
// the LLM stage started (absent when it did not start).
type Budget struct {
	DeadlineAt        int64  `json:"deadlineAt"`
	LLMStartLeftMs    *int64 `json:"llmStartLeftMs,omitempty"`
	MaxBudgetMs       int64  `json:"maxBudgetMs"`
	EffectiveBudgetMs int64  `json:"effectiveBudgetMs"`
	// ReserveMs is kept back from every stage for sending the answer;
	// MinimumsMs is the least budget each stage needed to start (by stage
	// name), as the request found them.
	ReserveMs  int64            `json:"reserveMs"`
	MinimumsMs map[string]int64 `json:"minimumsMs,omitempty"`
}

// ResultIntent is the intent as reported in a result.
type ResultIntent struct {
	Name       string  `json:"name"`
	Confidence float64 `json:"confidence"`
}

// Result is the successful terminal message of a request.
type Result struct {
	Type        string        `json:"type"`
	RequestID   string        `json:"requestId"`
	Transcript  string        `json:"transcript"`
	Intent      *ResultIntent `json:"intent,omitempty"`
	Answer      string        `json:"answer"`
	Degraded    bool          `json:"degraded"`
	Degradation []string      `json:"degradation"`
	Provider    string        `json:"provider,omitempty"`
	// Sources are the passages the answer was built from, in the order
	// used; empty (not absent) for greetings, goodbyes, out-of-scope and
	// templated answers.
	Sources []Source `json:"sources"`
	Timings Timings  `json:"timings"`
	Budget  Budget   `json:"budget"`
	// Speech reports the spoken answer; absent when speech is off.
	Speech *ResultSpeech `json:"speech,omitempty"`
	// ResumeToken is a fresh token for the conversation, as in
	// session.ready: a session's first token expires -resume-ttl after
	// it, however long the session goes on, and a client that holds the
	// latest can resume until that long after its last answer.
	ResumeToken string `json:"resumeToken,omitempty"`
}

// Source is one passage an answer was built from.
type Source struct {
	Article string `json:"article"` // the article's id
	Passage string `json:"passage"` // the passage's id, "article#n"
	Title   string `json:"title"`
}

// ResultSpeech reports a request's spoken answer: how many sentences the
// answer had and how many were spoken (in full or in part), the length of
// the audio sent, and the time from the final frame's arrival to the
// first answer.audio (absent when none was sent).
type ResultSpeech struct {
	Engine          string `json:"engine"`
	Voice           string `json:"voice"`
	Sentences       int    `json:"sentences"`
	SpokenSentences int    `json:"spokenSentences"`
	AudioMs         int64  `json:"audioMs"`
	FirstAudioMs    *int64 `json:"firstAudioMs,omitempty"`
}

// ErrorMessage is the failing terminal message of a request, or a
// session-level error when RequestID is empty.
type ErrorMessage struct {
	Type      string `json:"type"`
	RequestID string `json:"requestId,omitempty"`
	Code      Code   `json:"code"`
	Message   string `json:"message"`
}

// Envelope is what every inbound text message is first decoded into, to
// find its type.
type Envelope struct {
	Type string `json:"type"`
}

// Millis converts t to protocol time: milliseconds since the Unix epoch.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// Time converts protocol time to a time.Time.
func Time(ms int64) time.Time { return time.UnixMilli(ms) }

// MaxRequestIDLen is the longest valid requestId.
const MaxRequestIDLen = 64

// ValidRequestID reports whether id is 1 to 64 characters of [A-Za-z0-9._:-].
func ValidRequestID(id string) bool {
	if len(id) == 0 || len(id) > MaxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// Audio is a decoded audio message: its header and its PCM payload, still
// in little-endian bytes.
type Audio struct {
	Header AudioHeader
	PCM    []byte
}

// Decode decodes the payload, μ-law bytes when muLaw is set, else 16-bit
// PCM, appending the samples to dst.
func (a *Audio) Decode(dst []int16, muLaw bool) []int16 {
	if muLaw {
		return mulaw.AppendDecode(dst, a.PCM)
	}
	return a.Samples(dst)
}

// Samples decodes the payload into 16-bit samples, appending to dst.
func (a *Audio) Samples(dst []int16) []int16 {
	// Grown once and filled by index rather than appended sample by
	// sample: this runs on every frame, and the loop compiles to plain
	// 16-bit loads and stores.
	n := len(a.PCM) / 2
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	pcm := a.PCM[:2*n]
	for i := range out {
		out[i] = int16(binary.LittleEndian.Uint16(pcm[2*i:]))
	}
	return dst[:len(dst)+n]
}

// DecodeBinaryAudio parses a binary audio frame: a 4-byte big-endian
// header length, the JSON header, then little-endian PCM. The returned PCM
// aliases frame. When the header parses but fails validation, the header
// is returned with the error, so the error can be tied to its request.
func DecodeBinaryAudio(frame []byte) (Audio, error) {
	return Inbound{}.DecodeBinaryAudio(frame)
}

// Inbound says how a session reads its audio messages: the client's
// turns (the zero value: every frame names its request) or the server's
// (frames carry only seq), and 16-bit PCM or μ-law.
type Inbound struct {
	ServerTurns bool
	MuLaw       bool
}

// DecodeBinaryAudio is DecodeBinaryAudio for a session reading in.
func (in Inbound) DecodeBinaryAudio(frame []byte) (Audio, error) {
	if len(frame) < 4 {
		return unread(), Errorf(CodeBadMessage, "binary frame of %d bytes is shorter than its 4-byte header length", len(frame))
	}
	h := binary.BigEndian.Uint32(frame)
	if h == 0 || uint64(h) > uint64(len(frame)-4) {
		return unread(), Errorf(CodeBadMessage, "bad header length %d in a binary frame of %d bytes", h, len(frame))
	}
	var a Audio
	if err := decodeHeader(frame[4:4+h], &a.Header); err != nil {
		return in.salvage(frame[4 : 4+h]), Errorf(CodeBadMessage, "audio header: %v", err)
	}
	if a.Header.Audio != "" {
		// The header was read: its error is the request's it names.
		a.Header.Audio = ""
		return a, Errorf(CodeBadMessage, `audio header: "audio" is for text frames; a binary frame carries its PCM after the header`)
	}
	a.PCM = frame[4+h:]
	return a, in.validate(&a)
}

// DecodeTextAudio parses an audio message sent as a text frame, with its
// PCM base64-encoded in "audio".
func DecodeTextAudio(msg []byte) (Audio, error) { return Inbound{}.DecodeTextAudio(msg) }

// DecodeTextAudio is DecodeTextAudio for a session reading in.
func (in Inbound) DecodeTextAudio(msg []byte) (Audio, error) {
	var a Audio
	if err := decodeStrict(msg, &a.Header); err != nil {
		return in.salvage(msg), Errorf(CodeBadMessage, "audio message: %v", err)
	}
	pcm, err := base64.StdEncoding.DecodeString(a.Header.Audio)
	a.Header.Audio = ""
	if err != nil {
		return a, Errorf(CodeBadAudio, `audio message: "audio" is not valid base64: %v`, err)
	}
	a.PCM = pcm
	return a, in.validate(&a)
}

// salvage reads the requestId and seq of an audio header that is valid
// JSON but failed to decode (a value of the wrong type, an unknown
// field), so that its error can be tied to its request: it ends
// the request in flight, or refuses the one a first frame would open. A
// seq that is not an integer reads as -1, a frame after the first, so such
// a frame can never refuse an id it did not open. Malformed JSON, a
// requestId that is not a string and server-turn frames (which name no
// request) give an Audio that names no request: a session-level error.
// Its seq reads as -1 too (unread), so that a server-turn stream does not
// count such a frame, as it would one at seq 0.
//
// The two keys are matched as encoding/json matches the header's fields
// (a key spelt in another case is the field's, the last of a repeated key
// counts), so that the request an error is tied to is the one the same
// header names when it decodes.
func (in Inbound) salvage(header []byte) Audio {
	var a Audio
	var fields struct {
		RequestID json.RawMessage `json:"requestId"`
		Seq       json.RawMessage `json:"seq"`
	}
	if in.ServerTurns || json.Unmarshal(header, &fields) != nil {
		return unread()
	}
	if fields.RequestID == nil || json.Unmarshal(fields.RequestID, &a.Header.RequestID) != nil {
		return unread()
	}
	if fields.Seq != nil && json.Unmarshal(fields.Seq, &a.Header.Seq) != nil {
		a.Header.Seq = -1
	}
	return a
}

// unread is the Audio returned with the error of a frame whose header
// could not be read: it names no request, and its seq, -1, is no frame's.
func unread() Audio { return Audio{Header: AudioHeader{Seq: -1}} }

func (in Inbound) validate(a *Audio) error {
	h := &a.Header
	if in.ServerTurns {
		return in.validateStream(a)
	}
	if h.Type != TypeAudio {
		return Errorf(CodeBadMessage, "audio header has type %q, want %q", h.Type, TypeAudio)
	}
	if !ValidRequestID(h.RequestID) {
		return Errorf(CodeBadMessage, "invalid requestId %q: want 1 to 64 characters of [A-Za-z0-9._:-]", Truncate(h.RequestID, 80))
	}
	if h.DeadlineAt == 0 {
		// Absent reads as 0: not a value the client sent.
		return Errorf(CodeBadMessage, "deadlineAt is missing (or 0): want a positive integer of milliseconds since the Unix epoch, on the server's clock")
	}
	if h.DeadlineAt < 0 {
		return Errorf(CodeBadMessage, "deadlineAt must be a positive integer of milliseconds since the Unix epoch, got %d", h.DeadlineAt)
	}
	if h.Seq < 0 {
		return Errorf(CodeBadMessage, "seq must not be negative, got %d", h.Seq)
	}
	return in.validatePayload(a)
}

// validateStream checks a frame of a server-turn session's stream: it
// carries only seq (and optionally sampleRate); the requests are the
// server's to name and to end.
func (in Inbound) validateStream(a *Audio) error {
	h := &a.Header
	switch {
	case h.Type != "" && h.Type != TypeAudio:
		return Errorf(CodeBadMessage, "audio header has type %q, want %q", h.Type, TypeAudio)
	case h.RequestID != "" || h.DeadlineAt != 0 || h.Final:
		return Errorf(CodeBadMessage, "server turn detection is on: an audio frame carries only seq (and sampleRate); "+
			"requestId, deadlineAt and final are the server's")
	case h.Seq < 0:
		return Errorf(CodeBadMessage, "seq must not be negative, got %d", h.Seq)
	}
	return in.validatePayload(a)
}

// validatePayload checks the frame's rate and payload against the
// session's encoding.
func (in Inbound) validatePayload(a *Audio) error {
	h := &a.Header
	if h.SampleRate != 0 && !SampleRateSupported(h.SampleRate) {
		return Errorf(CodeBadAudio, "unsupported sampleRate %d: want one of %v", h.SampleRate, SupportedSampleRates)
	}
	if in.MuLaw {
		if h.SampleRate != 0 && h.SampleRate != MuLawRate {
			return Errorf(CodeBadAudio, "sampleRate %d with mu-law audio: mu-law is at %d Hz only", h.SampleRate, MuLawRate)
		}
		return nil
	}
	if len(a.PCM)%2 != 0 {
		return Errorf(CodeBadAudio, "odd PCM byte count %d: samples are 16-bit", len(a.PCM))
	}
	return nil
}

// DecodeText decodes a text message into one of *Audio, *Cancel,
// *SessionUpdate, *Playback or *Ping, validating it. An audio message whose header
// parses but fails validation is returned with the error.
func DecodeText(msg []byte) (any, error) { return Inbound{}.DecodeText(msg) }

// DecodeText is DecodeText for a session reading in.
func (in Inbound) DecodeText(msg []byte) (any, error) {
	if p, ok := fastPing(msg); ok {
		return &p, nil
	}
	var env Envelope
	if err := json.Unmarshal(msg, &env); err != nil {
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
			return nil, Errorf(CodeBadMessage, "%v", typeError(te)) // JSON, but "type" is not a string
		}
		return nil, Errorf(CodeBadMessage, "malformed JSON: %v", err)
	}
	switch env.Type {
	case TypeAudio:
		a, err := in.DecodeTextAudio(msg)
		return &a, err
	case TypeCancel:
		var c Cancel
		if err := decodeStrict(msg, &c); err != nil {
			return nil, Errorf(CodeBadMessage, "cancel: %v", err)
		}
		if !ValidRequestID(c.RequestID) {
			return nil, Errorf(CodeBadMessage, "cancel: invalid requestId %q", Truncate(c.RequestID, 80))
		}
		return &c, nil
	case TypeSessionUpdate:
		var u SessionUpdate
		if err := decodeStrict(msg, &u); err != nil {
			return nil, Errorf(CodeBadMessage, "session.update: %v", err)
		}
		if u.SampleRate != nil && !SampleRateSupported(*u.SampleRate) {
			return nil, Errorf(CodeBadAudio, "session.update: unsupported sampleRate %d: want one of %v", *u.SampleRate, SupportedSampleRates)
		}
		if _, _, err := u.SpeechUpdate(); err != nil {
			return nil, err
		}
		if err := u.checkEncoding(); err != nil {
			return nil, err
		}
		if u.TurnDetection != nil {
			if err := u.TurnDetection.check(); err != nil {
				return nil, err
			}
		}
		return &u, nil
	case TypePlayback:
		var p Playback
		if err := decodeStrict(msg, &p); err != nil {
			return nil, Errorf(CodeBadMessage, "playback: %v", err)
		}
		if !ValidRequestID(p.RequestID) {
			return nil, Errorf(CodeBadMessage, "playback: invalid requestId %q", Truncate(p.RequestID, 80))
		}
		if p.PlayedMs < 0 {
			return nil, Errorf(CodeBadMessage, "playback: playedMs must not be negative, got %d", p.PlayedMs)
		}
		return &p, nil
	case TypePing:
		var p Ping
		if err := decodeStrict(msg, &p); err != nil {
			return nil, Errorf(CodeBadMessage, "ping: %v", err)
		}
		return &p, nil
	case "":
		return nil, Errorf(CodeBadMessage, `message has no "type"`)
	default:
		return nil, Errorf(CodeBadMessage, "unknown message type %q", Truncate(env.Type, 40))
	}
}

// decodeStrict unmarshals one JSON object into v, refusing unknown fields
// so that misspelt fields are reported rather than silently ignored, and
// refusing non-integer numbers for integer fields (encoding/json does).
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
			return typeError(te)
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return errors.New("unknown field " + f)
		}
		return err
	}
	// encoding/json decodes a bare null into a struct as nothing at all,
	// without an error: a server-turn frame whose header is null would
	// pass for {"seq":0}.
	if rest := bytes.TrimLeft(b, " \t\r\n"); len(rest) > 0 && rest[0] == 'n' {
		return errors.New("null where a JSON object is expected")
	}
	// Not dec.More: it reads a '}' or ']' next as the end of a list, and
	// let "{...}}" through.
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) != 0 {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// typeError words a value of the wrong JSON type in the protocol's terms:
// the field's name as the client wrote it (its path, for a nested one)
// and what it must be. encoding/json's own message names the server's Go
// struct and type ("Go struct field AudioHeader.seq of type int64").
func typeError(te *json.UnmarshalTypeError) error {
	var want string
	t := te.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "an integer"
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.String:
		want = "a string"
	case reflect.Bool:
		want = "true or false"
	case reflect.Slice, reflect.Array:
		want = "an array"
	default:
		want = "an object"
	}
	// Value is "string", "bool", "array", "object", "number", or
	// "number 1.5" when the number itself did not fit.
	got := "a " + te.Value
	if n, ok := strings.CutPrefix(te.Value, "number "); ok {
		got = Truncate(n, 40)
	} else if te.Value == "array" || te.Value == "object" {
		got = "an " + te.Value
	}
	if te.Field == "" {
		return fmt.Errorf("want %s, got %s", want, got)
	}
	return fmt.Errorf("%q: want %s, got %s", te.Field, want, got)
}

// EncodeBinaryAudio builds a binary audio frame from a header and PCM
// samples, appending to dst.
func EncodeBinaryAudio(dst []byte, h AudioHeader, pcm []int16) ([]byte, error) {
	h.Type = TypeAudio
	h.Audio = ""
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0) // the header's length, once known
	if ValidRequestID(h.RequestID) {
		// A client sends this 50 times a second per stream: written by
		// hand, it costs no reflection and no allocation. A valid id
		// needs no escaping.
		dst = appendHeader(dst, &h)
	} else {
		// Anything else (tests send invalid ids on purpose) as
		// encoding/json writes it.
		hdr, err := json.Marshal(h)
		if err != nil {
			return nil, err
		}
		dst = append(dst, hdr...)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	for _, s := range pcm {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(s))
	}
	return dst, nil
}

// appendHeader appends h as JSON, exactly as encoding/json writes it, for
// a request id that needs no escaping.
func appendHeader(dst []byte, h *AudioHeader) []byte {
	dst = append(dst, `{"type":"audio","requestId":"`...)
	dst = append(dst, h.RequestID...)
	dst = append(dst, `","deadlineAt":`...)
	dst = strconv.AppendInt(dst, h.DeadlineAt, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, h.Seq, 10)
	dst = append(dst, `,"final":`...)
	dst = strconv.AppendBool(dst, h.Final)
	if h.SampleRate != 0 {
		dst = append(dst, `,"sampleRate":`...)
		dst = strconv.AppendInt(dst, int64(h.SampleRate), 10)
	}
	return append(dst, '}')
}

// EncodeTextAudio builds a text audio message with base64 PCM.
func EncodeTextAudio(h AudioHeader, pcm []int16) ([]byte, error) {
	h.Type = TypeAudio
	raw := make([]byte, 0, 2*len(pcm))
	for _, s := range pcm {
		raw = binary.LittleEndian.AppendUint16(raw, uint16(s))
	}
	h.Audio = base64.StdEncoding.EncodeToString(raw)
	return json.Marshal(h)
}

// Truncate cuts s to at most n bytes at a character's start, marked
// with "…" when cut (the mark's 3 bytes come on top of n): for text that
// quotes a peer's input into an error or a close reason.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut at a character's start: half a character would be invalid
	// UTF-8, sent on as U+FFFD.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
