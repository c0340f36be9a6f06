package session

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/voiced/voiced/internal/cancel"
	"github.com/voiced/voiced/internal/pipeline"
)

// ConversationStore keeps what a conversation needs to outlive its
// connection: its recent history, and the terminal messages of requests
// that ended while no connection was there to receive them. The session
// server uses it; MemoryConversations is the default, and a shared store
// (Redis) lets a client resume on another instance.
//
// Save runs on the request path, before the result it follows is sent,
// and is bounded by ctx: the request's deadline less the terminal margin,
// so a shared store that cannot write in time gives up (and may write
// behind) rather than hold the result. AddMissed must not block on the
// network: a shared store writes behind. Load and TakeMissed run when a
// session is resumed and are bounded by ctx.
type ConversationStore interface {
	// Load returns the conversation's history; ok is false when the store
	// does not know it (never saved, or expired). An error says its
	// shared storage did not answer: c and ok are then what this process
	// holds, if anything.
	Load(ctx context.Context, id string) (c Conversation, ok bool, err error)
	// Save replaces the conversation's history, and renews its expiry,
	// within ctx; an error says the history is not durable (this
	// process may still hold it).
	Save(ctx context.Context, id string, c Conversation) error
	// AddMissed keeps one terminal message (JSON) for the next session of
	// the conversation: the last MaxMissed, for MissedTTL.
	AddMissed(id string, msg []byte)
	// TakeMissed returns the kept terminal messages, oldest first, and
	// forgets them: each is returned once. With ctx already done it
	// returns, without waiting on the network, those it holds here.
	TakeMissed(ctx context.Context, id string) ([][]byte, error)
}

// Conversation is what a store keeps of one conversation.
type Conversation struct {
	// Tenant is the credentials' identity the conversation belongs to.
	Tenant string          `json:"tenant"`
	Turns  []pipeline.Turn `json:"turns"`
	// Answered is how many turns the conversation has answered, of which
	// Turns are the last: two copies of a history are placed against
	// each other by it (a store that kept a copy while the shared one
	// was away; identical turns, a greeting, tell nothing). 0 in a copy
	// written before it was kept: take len(Turns) (Count).
	Answered int `json:"answered,omitempty"`
}

// Count is how many turns c has answered (Answered, or len(Turns) in a
// copy that does not say).
func (c Conversation) Count() int { return max(c.Answered, len(c.Turns)) }

// Extends reports whether mine is shared with turns answered after it:
// the same tenant, at least as many turns answered, and the same turns
// wherever both windows hold the same turn of the conversation (placed by
// their counts, not found by content: a greeting repeats). Windows that no
// longer overlap (more turns answered here than a window holds) cannot be
// compared: the count decides. A copy that does not extend the shared one
// went on elsewhere, or forked.
func (mine Conversation) Extends(shared Conversation) bool {
	if mine.Tenant != shared.Tenant {
		return false
	}
	if shared.Answered == 0 && len(shared.Turns) > 0 {
		return extendsByContent(mine.Turns, shared.Turns)
	}
	m, sh := mine.Count(), shared.Count()
	if m < sh {
		return false
	}
	// Window entry k of a copy is the conversation's turn count-len+k.
	offset := (sh - len(shared.Turns)) - (m - len(mine.Turns))
	for k, t := range shared.Turns {
		if i := offset + k; i >= 0 && i < len(mine.Turns) && mine.Turns[i] != t {
			return false
		}
	}
	return true
}

// extendsByContent is extends for a shared copy written without its
// count (an instance of an older build, in a rolling deploy): mine holds
// shared's newest turn, at its last place in mine, with the turns before
// it matching as far as both go.
func extendsByContent(mine, shared []pipeline.Turn) bool {
	newest := shared[len(shared)-1]
	for i := len(mine) - 1; i >= 0; i-- {
		if mine[i] != newest {
			continue
		}
		for k := 1; k <= i && k < len(shared); k++ {
			if mine[i-k] != shared[len(shared)-1-k] {
				return false
			}
		}
		return true
	}
	return false
}

// ErrStoreUnavailable is wrapped by a ConversationStore's errors while
// its shared storage is away: an outage the store logs once, which a
// session does not log again for each resume.
var ErrStoreUnavailable = errors.New("conversation store unavailable")

// Limits on the terminal messages kept for a resume.
const (
	MaxMissed = 16
	MissedTTL = 2 * time.Minute
)

// MinOutboundQueue is the smallest outbound queue (Config.OutboundQueue):
// a resumed session is handed up to MaxMissed terminals at once, and the
// messages of its earlier connection's requests as they end, before its
// writer has sent any. A smaller queue took that burst for a client that
// does not read, and closed the resumed session with 1008.
const MinOutboundQueue = 2 * MaxMissed

// Resume refusals, the bodies of the HTTP 401 answers to a bad ?resume=.
var (
	ErrTokenMalformed = errors.New("resume token malformed")
	ErrTokenForged    = errors.New("resume token forged or altered: bad signature")
	ErrTokenExpired   = errors.New("resume token expired")
	ErrTokenForeign   = errors.New("resume token belongs to another client")
)

// resumeClaims is the content of a resume token. The token is opaque to
// clients: base64url(JSON claims) "." base64url(HMAC-SHA256).
type resumeClaims struct {
	Conv   string `json:"c"`
	Tenant string `json:"t"`
	Exp    int64  `json:"e"` // Unix milliseconds
}

// NewResumeSecret returns a random secret, for a server that was given
// none: its tokens are then valid on this process only.
func NewResumeSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

func (s *Server) sign(payload string) string {
	m := hmac.New(sha256.New, s.cfg.ResumeSecret)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issueToken returns a fresh resume token for the conversation.
func (s *Server) issueToken(conv, tenant string) string {
	data, _ := json.Marshal(resumeClaims{Conv: conv, Tenant: tenant, Exp: time.Now().Add(s.cfg.ResumeTTL).UnixMilli()})
	payload := base64.RawURLEncoding.EncodeToString(data)
	return payload + "." + s.sign(payload)
}

// checkToken verifies a resume token presented with the credentials
// whose tenants are t. The signature is checked first, so nothing of a
// forged token is believed.
func (s *Server) checkToken(tok string, t tenants) (resumeClaims, error) {
	var c resumeClaims
	payload, sig, ok := strings.Cut(tok, ".")
	if !ok || payload == "" || sig == "" {
		return c, ErrTokenMalformed
	}
	if !hmac.Equal([]byte(sig), []byte(s.sign(payload))) {
		return c, ErrTokenForged
	}
	data, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(data, &c) != nil || c.Conv == "" {
		return c, ErrTokenMalformed
	}
	if time.Now().UnixMilli() >= c.Exp {
		return c, ErrTokenExpired
	}
	if !t.own(c.Tenant) {
		return c, ErrTokenForeign
	}
	return c, nil
}

// tenants are the identities of one client's credentials: the tenant
// (tenantOf), and the one builds before 2026-12-06 derived, a plain hash
// of the access token, so that during a rolling deploy from such a build
// the resume tokens it issued and the conversations it stored stay this
// client's; a conversation resumed with such a token goes on under it
// (resolveConversation). A token lives -resume-ttl, a conversation
// -conversation-ttl after its last turn: drop legacy once no such build
// can have run for that long.
type tenants struct{ id, legacy string }

// own reports whether a token or a stored conversation naming tenant x
// belongs to these credentials.
func (t tenants) own(x string) bool {
	return hmac.Equal([]byte(x), []byte(t.id)) || t.legacy != "" && hmac.Equal([]byte(x), []byte(t.legacy))
}

// tenantOf is the identity of the credentials r presents: a keyed hash
// of its access token (the token itself never leaves the process), or ""
// when the server asks for none. Keyed with the resume secret, which a
// fleet shares: the tenant is readable in resume tokens and stored in
// Redis, and a plain hash of a weak token could be searched offline.
func (s *Server) tenantOf(r *http.Request) tenants {
	if len(s.cfg.Tokens) == 0 {
		return tenants{}
	}
	return s.tenantsOfToken(bearer(r))
}

// tenantsOfToken is tenantOf for the access token tok.
func (s *Server) tenantsOfToken(tok string) tenants {
	m := hmac.New(sha256.New, s.cfg.ResumeSecret)
	m.Write([]byte("tenant\x00")) // apart from sign's payloads, base64
	m.Write([]byte(tok))
	plain := sha256.Sum256([]byte(tok))
	return tenants{id: hex.EncodeToString(m.Sum(nil)[:12]), legacy: hex.EncodeToString(plain[:12])}
}

// resumption is what the upgrade learned of the conversation a session
// belongs to.
type resumption struct {
	conv    string
	tenant  tenants
	asked   bool // the client presented a valid resume token
	resumed bool // and the store answered, or this process holds the history
	away    bool // the store's shared storage did not answer
	turns   []pipeline.Turn
	count   int // turns answered (Conversation.Count)
}

// resolveConversation reads ?resume= and returns the session's
// conversation, for the credentials tenant (tenantOf(r)): the resumed
// one, or a new one. A bad token is an error to
// answer with 401. It reads no store: a valid token's history is read by
// loadConversation, once the session is admitted, so that a server that
// refuses the upgrade (full, saturated, draining) makes no store read for
// it.
func (s *Server) resolveConversation(r *http.Request, tenant tenants) (resumption, error) {
	tok := r.URL.Query().Get("resume")
	if tok == "" {
		return resumption{conv: uuid.NewString(), tenant: tenant}, nil
	}
	c, err := s.checkToken(tok, tenant)
	if err != nil {
		return resumption{}, err
	}
	// The conversation keeps the form its token names: one the previous
	// build issued goes on under the plain hash, so that every copy of
	// its history (Redis's, this instance's while Redis is away) names the
	// same tenant and can be placed against the others (Extends).
	tenant.id = c.Tenant
	return resumption{conv: c.Conv, tenant: tenant, asked: true}, nil
}

// loadConversation reads the history of a resumed conversation into
// res, within ctx: without it (resumed false) when the store is out of
// reach, and ErrTokenForeign when the store holds it for another tenant.
func (s *Server) loadConversation(ctx context.Context, res *resumption) error {
	if !res.asked {
		return nil
	}
	conv, ok, err := s.cfg.Conversations.Load(ctx, res.conv)
	res.away = err != nil
	switch {
	case err != nil && !ok:
		// Debug: the store's own loss is logged once where it is noticed.
		s.log.Debug("resume: conversation store unavailable; continuing without history", "err", err)
	case ok && !res.tenant.own(conv.Tenant):
		// A signed token names its tenant: only a store shared with
		// another fleet could get here. Never hand the history over.
		return ErrTokenForeign
	default:
		res.resumed, res.turns, res.count = true, conv.Turns, conv.Count() // none if it has no answered turn yet
	}
	return nil
}

// refuseResume answers a bad resume token of a.
func (s *Server) refuseResume(w http.ResponseWriter, err error, a admission) {
	s.metrics.sessionsTotal.WithLabelValues("refused_resume").Inc()
	s.log.Debug("session refused", "outcome", "refused_resume", "err", err, "tenant", a.tenant, "addr", a.addr)
	refuseUnauthorized(w, err.Error())
}

// startConversation gives a session its conversation, before it is ready.
func (sess *Session) startConversation(res resumption) {
	// conv is set under the server's mu, where olderRunning reads it: a
	// drain may look at a session admitted a moment ago.
	sess.srv.mu.Lock()
	sess.conv = res.conv
	sess.srv.convs[res.conv] = append(sess.srv.convs[res.conv], sess)
	sess.srv.mu.Unlock()
	sess.tenants, sess.resumed, sess.resumeAsked, sess.storeAway = res.tenant, res.resumed, res.asked, res.away
	sess.answered, sess.stored = res.count, res.count
	sess.turns = exchanges(res.turns[max(len(res.turns)-maxTurns, 0):])
}

// saveConversation hands the history to the store within ctx; s.mu must
// not be held. An error says the history is not durable; the caller
// counts the turn (remember). One save of a session runs at a time, and
// each takes the history as it is then: two results of one session
// finishing together cannot leave the older history last in the store.
// Waiting for the other save is bounded by ctx, like the save.
func (s *Session) saveConversation(ctx context.Context) error {
	s.mu.Lock()
	if s.saving == nil {
		s.saving = make(chan struct{}, 1)
	}
	slot := s.saving
	s.mu.Unlock()
	select {
	case slot <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait for the session's other save: %w", context.Cause(ctx))
	}
	defer func() { <-slot }()
	s.mu.Lock()
	conv := Conversation{Tenant: s.tenants.id, Turns: s.turnsLocked(), Answered: s.answered}
	stale := s.detached
	s.mu.Unlock()
	if stale {
		conv = s.withStored(ctx, conv)
	}
	return s.srv.cfg.Conversations.Save(ctx, s.conv, conv)
}

// withStored merges mine, the history of s, a session that lost its
// connection, into the store's copy when that copy went on without it.
// The client may have resumed since, had turns answered by the new
// session and lost that connection too: the store's copy then holds turns
// s never saw, which a save of mine alone would overwrite (the client has
// their results). The merge goes by content (mergeTurns), so a turn equal
// to one the store holds is not added twice in that case. A live session
// is the conversation's newest and saves its own. A store that cannot be
// read leaves mine as it is.
func (s *Session) withStored(ctx context.Context, mine Conversation) Conversation {
	stored, ok, _ := s.srv.cfg.Conversations.Load(ctx, s.conv)
	if !ok || stored.Tenant != mine.Tenant || mine.Extends(stored) {
		// Nothing newer stored (the usual case: the store holds this
		// session's own last save): mine as it is, repeated turns and all.
		return mine
	}
	merged, added := mergeTurns(exchanges(stored.Turns), mine.Turns)
	return Conversation{Tenant: mine.Tenant, Turns: turnsOf(merged), Answered: max(stored.Count()+added, mine.Answered)}
}

// turnsLocked copies the history; s.mu must be held.
func (s *Session) turnsLocked() []pipeline.Turn { return turnsOf(s.turns) }

// turnsOf returns the turns of es, and exchanges the exchanges of turns
// (no request id: turns read from a store).
func turnsOf(es []exchange) []pipeline.Turn {
	out := make([]pipeline.Turn, len(es))
	for i, e := range es {
		out[i] = e.Turn
	}
	return out
}

func exchanges(turns []pipeline.Turn) []exchange {
	out := make([]exchange, len(turns))
	for i, t := range turns {
		out[i] = exchange{Turn: t}
	}
	return out
}

// attach makes s the session that receives its conversation's terminals
// from sessions of this process that lost their connection, then replays
// the terminals kept for it. It runs right after session.ready.
//
// These reads come before the session reads its client's first message.
// A store whose read at the upgrade failed (s.storeAway) is likely away,
// and were it hanging, not yet found lost, each read would take its whole
// resume budget out of the deadline of a request sent right after
// session.ready. So it is not read again: the session goes on with what
// it told its client (with this process's copy of the history, if it had
// one, else "resumed": false and none), and it reads, with a context
// already done, only what the store holds without the network (this
// instance's); the terminals kept elsewhere wait for the next resume.
//
// A session made after s (a resume of the client that left s right
// after its session.ready) may have attached first, s being delayed on
// its way here: s then stays out, and is ended as superseded, rather
// than end the connection the client uses now.
func (s *Session) attach(ctx context.Context) {
	s.srv.mu.Lock()
	prev := s.srv.live[s.conv]
	stale := prev != nil && prev.seq > s.seq
	if !stale {
		s.srv.live[s.conv] = s
	}
	s.srv.mu.Unlock()
	if stale {
		s.resumedElsewhere()
		return
	}
	if prev != nil && prev != s {
		prev.resumedElsewhere()
	}
	switch {
	case !s.resumeAsked:
	case s.resumed && !s.storeAway:
		s.catchUp(ctx)
		s.replayMissed(ctx)
	default:
		now, cancel := context.WithCancel(ctx)
		cancel()
		if s.resumed {
			s.catchUp(now)
		}
		s.replayMissed(now)
	}
}

// catchUp reads the conversation's history again now that this process's
// other sessions of it hand their turns here. A session that lost its
// connection and answered a request between this session's load at the
// upgrade and its registration above saved that turn to the store, where
// only this second read finds it. Turns this session already holds are
// not added twice (mergeTurns).
func (s *Session) catchUp(ctx context.Context) {
	conv, ok, _ := s.srv.cfg.Conversations.Load(ctx, s.conv)
	if !ok || !s.tenants.own(conv.Tenant) {
		return // the load at the upgrade has logged a store that is away
	}
	s.mu.Lock()
	var added int
	s.turns, added = mergeTurns(s.turns, conv.Turns)
	// The store's count when it knows more (a repeated turn the merge
	// took for one held).
	s.answered = max(s.answered+added, conv.Count())
	s.stored = max(s.stored, conv.Count())
	s.mu.Unlock()
}

// mergeTurns adds to cur the turns of hist, another copy of the same
// conversation's history, that cur lacks: those after the newest turn the
// two have in common go right after it in cur (they are older than what
// cur gained since), all of hist goes first when they share none, and a
// turn cur gained since is not added again. The result keeps the last
// maxTurns; added is how many turns of hist it took.
//
// The copies are placed against each other where the longest run of
// turns ends alike in both (align), not at the first turn equal to
// hist's newest common one: identical turns (a greeting asked twice)
// would place hist's turns before a repeat cur holds, or take a repeat
// hist gained for the earlier copy cur holds, and drop it.
func mergeTurns(cur []exchange, hist []pipeline.Turn) (merged []exchange, added int) {
	common, at := align(cur, hist)
	// cur's turns after the common ones, each matching one of hist's at
	// most: a hand-off cur holds already, which hist saved too.
	gained := turnsOf(cur[at:])
	var add []exchange
	for _, t := range hist[common+1:] {
		if k := slices.Index(gained, t); k >= 0 {
			gained = slices.Delete(gained, k, k+1)
			continue
		}
		add = append(add, exchange{Turn: t})
	}
	if len(add) == 0 {
		return cur, 0
	}
	out := slices.Concat(cur[:at], add, cur[at:])
	return out[max(len(out)-maxTurns, 0):], len(add)
}

// align returns the index in hist of the newest turn the two copies have
// in common (-1 when none), and the index in cur right after it: the
// place where the longest run of turns ends alike in both, as far as both
// go; of equally long runs, the newest in hist, then in cur.
func align(cur []exchange, hist []pipeline.Turn) (common, at int) {
	common, best := -1, 0
	for i := len(hist) - 1; i >= 0; i-- {
		for j := len(cur) - 1; j >= 0; j-- {
			n := 0
			for n <= min(i, j) && cur[j-n].Turn == hist[i-n] {
				n++
			}
			if n <= min(i, j) || n <= best {
				continue // a turn differs before both start, or a longer run is known
			}
			common, at, best = i, j+1, n
		}
	}
	return common, at
}

// replayMissed sends the terminals the store kept for the conversation.
func (s *Session) replayMissed(ctx context.Context) {
	msgs, err := s.srv.cfg.Conversations.TakeMissed(ctx, s.conv)
	switch {
	case err == nil:
	case errors.Is(err, ErrStoreUnavailable), ctx.Err() != nil:
		s.log.Debug("resume: missed terminals unavailable", "err", err)
	default:
		s.log.Warn("resume: missed terminals unavailable", "err", err)
	}
	var back [][]byte
	for _, m := range msgs {
		if !s.handOver(m) {
			back = append(back, m)
		}
	}
	if n := len(msgs) - len(back); n > 0 {
		s.srv.metrics.replayed.Add(float64(n))
	}
	// s ended meanwhile, past its last flush, or lost its connection (a
	// resume elsewhere may have ended it): on to the conversation's live
	// session, if another, else back to the store.
	s.handOn(back)
}

// takeOver ends the conversation's live session, if an older one, before
// s writes session.ready: from the moment the client reads it, nothing
// more is written to its earlier connection (resumedElsewhere); what that
// session decides meanwhile goes to the store, where s's attach takes it.
// attach looks again, for a session that became live since. A newer live
// session is the client's current connection, and stays.
func (s *Session) takeOver() {
	if !s.resumeAsked {
		return
	}
	if prev := s.srv.liveSession(s.conv); prev != nil && prev.seq < s.seq {
		prev.resumedElsewhere()
	}
}

// resumedElsewhere ends s, whose client has resumed its conversation on
// another session of this process while s's connection was still open
// (a client whose network changed: the old TCP connection is half-open,
// and the server would find it gone only at the idle timeout). From now
// on s's terminals are kept, not written to a connection nobody reads,
// and the connection is closed: its teardown hands what s kept, and what
// its writer could not send, to the live session (flushMissed), and its
// requests whose final frame has arrived run on as for a dropped
// connection.
func (s *Session) resumedElsewhere() {
	s.mu.Lock()
	s.detached = true
	conn := s.conn
	s.mu.Unlock()
	s.log.Debug("superseded by a resumed session of its conversation")
	if conn != nil {
		s.cut(conn)
	}
}

// detachLive forgets s as its conversation's live session, then flushes
// for the last time what other sessions of the conversation handed to s
// after its teardown's flushes, while they still found it live; a
// session that finds it live later is refused (handOver).
func (s *Session) detachLive() {
	s.srv.mu.Lock()
	if s.srv.live[s.conv] == s {
		delete(s.srv.live, s.conv)
	}
	s.srv.mu.Unlock()
	s.flush(true)
}

// isDetached reports whether s has lost its connection.
func (s *Session) isDetached() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detached
}

// liveSession returns the session of this process now serving conv.
func (srv *Server) liveSession(conv string) *Session {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.live[conv]
}

// handOver queues an already encoded terminal message, one the
// conversation's client missed (sent if s can, else kept with its own
// missed ones). It reports false, taking nothing, once s is past its last
// flush (detachLive), or once s has lost its connection: s would keep it
// until its own slowest request ends (teardown's flush), while the
// client may resume meanwhile, here or on another instance. The caller
// keeps the message elsewhere (the store).
func (s *Session) handOver(data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flushedLast || s.detached {
		return false
	}
	s.sendLocked(outbound{data: data, terminal: true})
	return true
}

// keepMissedLocked keeps a terminal message the client did not get, for
// flushMissed; s.mu must be held.
func (s *Session) keepMissedLocked(data []byte) {
	if s.call != nil {
		// A call is never resumed (Twilio starts a new stream): what
		// it missed, a turn's mark, would go to the store for nobody.
		return
	}
	// Only the last MaxMissed are kept for a resume (the store keeps no
	// more): a closing session still reads, and a client that stopped
	// reading but keeps sending must not grow this with every frame.
	if len(s.missed) == MaxMissed {
		copy(s.missed, s.missed[1:])
		s.missed = s.missed[:MaxMissed-1]
	}
	s.missed = append(s.missed, data)
}

// flushMissed hands the terminals the client missed to the session now
// serving its conversation in this process, or to the store for the next
// resume. A session that attaches while the store is written is found by
// the second look: it registers before it takes from the store, so either
// its take sees these messages or this look sees it.
func (s *Session) flushMissed() { s.flush(false) }

// flush is flushMissed; last marks s's last flush (see handOver).
func (s *Session) flush(last bool) {
	s.mu.Lock()
	msgs := s.missed
	s.missed = nil
	s.flushedLast = s.flushedLast || last
	s.mu.Unlock()
	s.handOn(msgs)
}

// handOn hands terminals the client missed to the conversation's live
// session in this process, if another one that can take them, else to
// the store, looking for a live session again after the store.
func (s *Session) handOn(msgs [][]byte) {
	if len(msgs) == 0 {
		return
	}
	if live := s.srv.liveSession(s.conv); live != nil && live != s {
		msgs = slices.DeleteFunc(msgs, live.handOver)
		if len(msgs) == 0 {
			return
		}
	}
	for _, m := range msgs {
		s.srv.cfg.Conversations.AddMissed(s.conv, m)
	}
	s.srv.metrics.missedKept.Add(float64(len(msgs)))
	if live := s.srv.liveSession(s.conv); live != nil && live != s && !live.isDetached() {
		ctx, cancel := context.WithTimeout(s.srv.base, time.Second)
		defer cancel()
		live.replayMissed(ctx)
	}
}

// lostConnection ends the requests of a session whose client went away:
// those still receiving audio end now (client_disconnect, kept as a
// "connection lost" terminal), and those whose final frame has arrived
// run on to their terminal, which is kept too. A phone call's requests
// all end now: a call is never resumed, so nobody could hear the answer.
// It runs in the reader goroutine, once the read loop has ended.
func (s *Session) lostConnection() {
	s.mu.Lock()
	s.detached = true
	s.mu.Unlock()
	for _, h := range s.reqs.Seal() {
		if !h.Value.final || s.call != nil {
			s.endRequest(h.Value, cancel.ClientDisconnect, nil)
		}
	}
}

// keepUnsent keeps the terminals the writer could not send: o, whose write
// failed, and those still queued. It runs in the writer, which stops.
func (s *Session) keepUnsent(o outbound) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ok := true; ok; o, ok = s.popLocked() {
		if o.data != nil && o.terminal {
			s.keepMissedLocked(o.data)
		}
	}
}
