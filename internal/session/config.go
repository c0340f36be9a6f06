package session

import (
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/voiced/voiced/internal/vad"
)

// Config configures a Server. The zero value means the defaults documented
// on each field.
type Config struct {
	// MaxSessions is the most concurrent sessions; more are refused with
	// HTTP 503 before the upgrade. Default 10000.
	MaxSessions int
	// MaxSessionsPerClient is the most concurrent sessions one client
	// may hold on this server: a tenant (an access token) when Tokens
	// are configured, else a client address (see TrustedProxies); more
	// are refused with HTTP 429 before the upgrade. A phone call counts
	// against the token of its URL, or of its start (checked then:
	// refused, the call is closed with 1008), or, when Twilio signed it
	// (TwilioAuthToken), against the Twilio account, one client for all
	// its calls. A resume that supersedes a session of its conversation
	// still open here, of the same client, is admitted one over the
	// limit, as it ends that one.
	// Default 0: no limit. One token may serve a whole application's
	// users, and many users share an address (a NAT, a corporate proxy,
	// or a proxy not in TrustedProxies, whose address every client
	// would have): only the operator knows how many sessions one client
	// should have.
	MaxSessionsPerClient int
	// TrustedProxies are the proxies (HAProxy) whose X-Forwarded-For
	// names a client's address: for a peer in one of them, the address
	// is the hop nearest the server that is not itself a trusted proxy
	// (ClientAddr); for any other peer, the peer's address, whatever
	// header it sent. Default none.
	TrustedProxies []netip.Prefix
	// MaxMessageBytes is the largest inbound message. Default 256 KiB.
	MaxMessageBytes int64
	// MaxAudioPerRequest is the longest utterance accepted. Default (zero
	// or negative) 30 s.
	MaxAudioPerRequest time.Duration
	// MaxInFlight is the most requests in flight per session; more are
	// refused with overloaded. Default 4.
	MaxInFlight int
	// OutboundQueue is how many messages may wait for a slow client before
	// the session is closed with a policy violation. Default 64; a value
	// below MinOutboundQueue is raised to it.
	OutboundQueue int
	// MaxBufferedAudio bounds the audio, in bytes of 16-bit PCM, that
	// waits for recognizers across all sessions: audio sent faster than
	// real time, or a recognizer behind, queues up to it (and each request
	// up to MaxAudioPerRequest). Past it a request ends with overloaded.
	// Default 256 MiB; negative means no limit.
	MaxBufferedAudio int64
	// MaxBudget caps a request's deadline at this long after its final
	// frame arrived, whatever deadline the client asked for. It is
	// announced in session.ready. Default 1.7 s.
	MaxBudget time.Duration
	// TerminalMargin is how long before the deadline a request's work is
	// given up, so that its terminal message leaves before the deadline
	// even when a stage overruns. Default 10 ms.
	//
	// With a Load that tells how late the process has lately run (a
	// lagger, as *saturation.Monitor is), a request decides its margin
	// when it needs it: TerminalMargin plus twice that lag, at most
	// MaxTerminalMargin. The goroutines that write a terminal wait to run
	// like any other, so a process starved by its own load or by others
	// starts answering earlier rather than answering late.
	TerminalMargin time.Duration
	// MaxTerminalMargin bounds the margin grown with the lag. 0 means
	// the default, 300 ms; a positive value up to TerminalMargin means
	// the margin never grows.
	MaxTerminalMargin time.Duration
	// FeedBatch is how much of a streaming request's audio is queued
	// before its recognizer is woken to take it; the final frame always
	// wakes it at once. Waking per frame would cost a goroutine hand-off
	// per frame; the price is that partial transcripts (and the
	// recognizer's work) trail the audio by up to this much. Default
	// 60 ms (three 20 ms frames); negative means every frame.
	FeedBatch time.Duration
	// WriteTimeout bounds one write to the client. Default (zero or
	// negative) 5 s: a deadline in the past would fail every write.
	WriteTimeout time.Duration
	// Tokens, when not empty, are the bearer tokens a client must present
	// (Authorization: Bearer or the access_token query parameter).
	Tokens []string
	// OriginPatterns are the extra browser origins allowed besides the
	// server's own host (see websocket.AcceptOptions).
	OriginPatterns []string
	// SampleRate is a session's sample rate until the client changes it.
	// Default 16000.
	SampleRate int
	// Tombstones is how many ended request ids a session remembers, so
	// that frames still in flight for them are ignored rather than treated
	// as new requests. Default 32.
	Tombstones int
	// Speech, when not nil, speaks answers to sessions that ask for it
	// (session.update speech); nil means speech is off.
	Speech Synthesizer
	// LogTranscripts logs transcripts and answers at info level. Off by
	// default: speech is personal data.
	LogTranscripts bool
	// IdleTimeout closes a session that has sent no whole message for
	// this long (1001, "idle timeout"): a client that upgrades and sends
	// nothing, or trickles a message a byte at a time. Clients keep a
	// quiet session open with a ping. Default 5 min; negative means never.
	IdleTimeout time.Duration
	// CallStartTimeout is how long a phone call (ServeTwilio) has to
	// send a valid start message (with a valid token, when tokens are
	// configured and its URL brought none); then it is closed (1008).
	// Without it anyone who can reach the server could hold sessions
	// with calls that never authenticate, and a call whose start was
	// malformed would stay open and silent. Default 10s (Twilio sends
	// start right after connecting). At most a quarter of MaxSessions
	// calls wait so at once; more are refused (503) before the upgrade.
	CallStartTimeout time.Duration
	// ReturnMemoryAfter: once at least 1,000 sessions were admitted
	// since the last return (a burst, or a trickle that adds up) and then
	// none for this long, the server runs a collection and returns the
	// memory the upgrades freed to the operating system
	// (debug.FreeOSMemory), rather than keep it until the runtime returns
	// it slowly; not while it sheds load or has lately run more than
	// 10 ms late (it then waits again). It costs CPU once per return
	// (tens of milliseconds at 5,000 sessions), and nothing per frame.
	// Default 2 s; negative means never.
	ReturnMemoryAfter time.Duration
	// Load, when not nil, says when the process is saturated: new
	// requests are then refused with overloaded (cause saturated) and new
	// sessions with HTTP 503, so that accepted work keeps its deadlines.
	Load Saturation
	// InstanceID names this process in session.ready (and in the fleet's
	// registry). Default: a random id.
	InstanceID string
	// Conversations keeps conversations for resume: their history and the
	// terminals a dropped connection missed. Default: in this process's
	// memory (MemoryConversations), so a client can resume on this
	// instance only.
	Conversations ConversationStore
	// ConversationTTL is how long an idle conversation is kept (by the
	// default store). Default 30 min.
	ConversationTTL time.Duration
	// ResumeSecret signs resume tokens; every instance of a fleet needs
	// the same. Default: a random secret, so tokens are valid on this
	// process only.
	ResumeSecret []byte
	// ResumeTTL is how long a resume token is valid. Default
	// ConversationTTL.
	ResumeTTL time.Duration
	// Detector makes the voice activity detector of a server-turn
	// session's stream at rate Hz (one of vad.Rates). Nil means vad.New
	// with its defaults; a build without it refuses server turn detection.
	Detector func(rate int) (vad.Detector, error)
	// Greeting is what a phone call (ServeTwilio) hears first, when the
	// server can speak. Default DefaultGreeting; "-" means none.
	Greeting string
	// TwilioAuthToken, when set, is the Twilio account's auth token: a
	// phone call's handshake (ServeTwilio) must then carry Twilio's
	// X-Twilio-Signature of its URL (TwilioURL), or it is refused with
	// HTTP 403; a signed call needs no token of Tokens. A secret: never
	// logged.
	TwilioAuthToken string
	// TwilioPublicURL is the wss:// URL of ServeTwilio as Twilio requests
	// it (the <Stream url> of the TwiML, without its query), which a
	// proxy or tunnel in front of the server rewrites (scheme, host, path);
	// an empty path means the request's. The request's query is appended
	// as it arrived. Empty: the URL is rebuilt from the request (see
	// TwilioTrustForwarded).
	TwilioPublicURL string
	// TwilioTrustForwarded rebuilds the URL Twilio signed, when
	// TwilioPublicURL is not set, from the X-Forwarded-Proto and
	// X-Forwarded-Host headers: only for a server that only a proxy
	// setting them reaches, since anyone else can send them too.
	TwilioTrustForwarded bool
}

// Saturation reports whether the process is too busy to take on more
// work; *saturation.Monitor is the real one.
type Saturation interface {
	Saturated() bool
}

// lagger is a Saturation that tells how late the process has lately run
// at worst (*saturation.Monitor's Lag); the terminal margin grows with it.
type lagger interface {
	Lag() time.Duration
}

// lagFactor is how many times the lag a request keeps back on top of
// TerminalMargin: a terminal waits to run at least twice (the deadline's
// timer, then the goroutine that writes it).
const lagFactor = 2

// requestAdmitter is a Saturation that takes some new requests while the
// process is saturated (*saturation.Monitor keeps a limit on the requests
// in flight); with a Saturation that is not one, no new request starts
// while it is saturated.
type requestAdmitter interface {
	AdmitRequest(inFlight int) bool
}

// WithDefaults returns c with each zero field set to its documented
// default (a random instance id and resume secret, a memory store).
func (c Config) WithDefaults() Config {
	if c.MaxSessions == 0 {
		c.MaxSessions = 10000
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = 256 << 10
	}
	if c.MaxAudioPerRequest <= 0 {
		c.MaxAudioPerRequest = 30 * time.Second
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 4
	}
	if c.OutboundQueue == 0 {
		c.OutboundQueue = 64
	}
	c.OutboundQueue = max(c.OutboundQueue, MinOutboundQueue)
	if c.MaxBufferedAudio == 0 {
		c.MaxBufferedAudio = 256 << 20
	}
	if c.MaxBudget == 0 {
		c.MaxBudget = 1700 * time.Millisecond
	}
	if c.TerminalMargin == 0 {
		c.TerminalMargin = 10 * time.Millisecond
	}
	if c.MaxTerminalMargin == 0 {
		c.MaxTerminalMargin = 300 * time.Millisecond
	}
	if c.FeedBatch == 0 {
		c.FeedBatch = 60 * time.Millisecond
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.SampleRate == 0 {
		c.SampleRate = 16000
	}
	if c.CallStartTimeout <= 0 {
		c.CallStartTimeout = 10 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.ReturnMemoryAfter == 0 {
		c.ReturnMemoryAfter = 2 * time.Second
	}
	if c.Tombstones == 0 {
		c.Tombstones = 32
	}
	if c.InstanceID == "" {
		c.InstanceID = uuid.NewString()[:8]
	}
	if c.ConversationTTL == 0 {
		c.ConversationTTL = 30 * time.Minute
	}
	if c.ResumeTTL == 0 {
		c.ResumeTTL = c.ConversationTTL
	}
	if len(c.ResumeSecret) == 0 {
		c.ResumeSecret = NewResumeSecret()
	}
	if c.Conversations == nil {
		c.Conversations = NewMemoryConversations(c.ConversationTTL)
	}
	return c
}
