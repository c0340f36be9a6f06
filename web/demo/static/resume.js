// Resume, as the Go reference client (package client) does it: keep the
// last session.ready's resumeToken, dial again with ?resume=TOKEN, start a
// fresh session when the server refuses the token, and let the turns sent
// on the lost connection wait for the terminal messages the resumed
// session replays. The pure parts live here so that node can test them.

// TERMINAL_GRACE_MS is how long after its deadline (or after the replay,
// if later) a turn of a lost connection waits for its terminal message on
// the resumed session before the page calls it lost. The server sends a
// terminal by the deadline; the grace covers the trip and a server that
// noticed the lost connection late.
export const TERMINAL_GRACE_MS = 2000;

// DRAIN_JITTER_MS spreads the reconnections of pages closed together by a
// draining instance (close 1012): they come back at once, not in step.
export const DRAIN_JITTER_MS = 250;

// resumeURL is the session URL asking to resume with token (none: base as
// it is). Other parameters, such as ?access_token=, are kept.
export function resumeURL(base, token) {
  if (!token) return base;
  const u = new URL(base);
  u.searchParams.set('resume', token);
  return u.toString();
}

// probeURL is the plain HTTP twin of a WebSocket URL: the page asks it
// why an upgrade failed, since browsers hide the status of a refused one.
export function probeURL(wsURL) {
  const u = new URL(wsURL);
  u.protocol = u.protocol === 'wss:' ? 'https:' : 'http:';
  return u.toString();
}

// refusedResume tells, from the answer to the probe of a failed upgrade,
// whether the server refused the resume token (HTTP 401 whose body names
// the resume token: malformed, forged, expired or foreign). A 401 for the
// access token, a 503 or a network error is not a refused token: the page
// keeps it and retries with backoff.
export function refusedResume(status, body) {
  return status === 401 && /^resume token/.test(body.trim());
}

// refusedAccess tells, from the answer to the probe of a failed upgrade,
// whether the server refused the access token (HTTP 401 not about the
// resume token): the page's URL needs ?access_token=, or another one.
export function refusedAccess(status, body) {
  return status === 401 && !refusedResume(status, body);
}

// ResumeState is what the page keeps between connections.
export class ResumeState {
  constructor() {
    this.token = '';
    this.conversationId = '';
    this.instance = '';
  }

  // onReady takes a session.ready: its token is the one to present next.
  // It reports whether the session continues the conversation of the
  // token presented for it: resumed, or accepted without its history
  // ("resumed": false when the server could not read its store, same
  // conversationId), whose terminals the server still replays and hands
  // over. Only a new conversation means the held turns are lost.
  onReady(msg) {
    const continues = !!msg.resumed || (this.token !== '' && !!msg.conversationId && msg.conversationId === this.conversationId);
    this.token = msg.resumeToken || '';
    this.conversationId = msg.conversationId || '';
    this.instance = msg.instance || '';
    return continues;
  }

  // onResult keeps a result's fresh token: a session's first expires
  // -resume-ttl after session.ready, however long the session goes on. A
  // replayed result's is older than its session.ready's.
  onResult(msg, replayed) {
    if (!replayed && msg.resumeToken) this.token = msg.resumeToken;
  }

  // refused forgets a token the server will not take: the next session
  // starts a new conversation.
  refused() {
    this.token = '';
  }
}

// orphanDeadline is the latest the server can end a turn: its last
// frame's deadlineAt, but no more than maxBudgetMs after that frame left
// (the server's deadline is min(deadlineAt, the final frame's arrival +
// maxBudgetMs); the grace covers the trip). 0 when no frame was sent.
export function orphanDeadline(turn, maxBudgetMs) {
  const d = turn.deadlineAt ?? 0;
  if (turn.sentAt == null || !(maxBudgetMs > 0)) return d;
  return Math.min(d, turn.sentAt + maxBudgetMs);
}

// Orphans holds the turns sent on a connection that was lost, until each
// gets its terminal message from the resumed session or is given up:
// at once when the next session is not a resumed one (its terminals will
// never come), else TERMINAL_GRACE_MS after the later of its deadline
// (capped at the session's maxBudgetMs after its last frame) and the end
// of the first replay it waited through. That moment is fixed then: a
// connection lost and resumed again does not extend it. A turn is any
// object with id, terminal, deadlineAt (server clock, ms; absent when no
// frame was sent), optionally sentAt (server clock, ms, when its last
// frame left) and onLost().
export class Orphans {
  // The timer functions are wrapped: a browser's setTimeout called as a
  // method of another object throws "Illegal invocation".
  constructor({ setTimer = (fn, ms) => setTimeout(fn, ms), clearTimer = (id) => clearTimeout(id), graceMs = TERMINAL_GRACE_MS } = {}) {
    this.setTimer = setTimer;
    this.clearTimer = clearTimer;
    this.graceMs = graceMs;
    this.maxBudgetMs = 0; // the session's, from session.ready (onReady); 0: unknown
    this.held = new Map(); // id -> {turn, timer, giveUpAt}
  }

  get size() {
    return this.held.size;
  }

  // has tells whether the turn id is held.
  has(id) {
    return this.held.has(id);
  }

  // hold keeps a turn in flight on a lost connection. A turn held again
  // (the connection was lost again) waits for the next session.
  hold(turn) {
    if (turn.terminal) return;
    const h = this.held.get(turn.id);
    if (h) {
      if (h.timer != null) this.clearTimer(h.timer);
      h.timer = null;
      return;
    }
    this.held.set(turn.id, { turn, timer: null, giveUpAt: null });
  }

  // onReady is told whether the new session resumed the conversation: if
  // not, every held turn is lost now. maxBudgetMs is its session.ready's:
  // the longest budget the server gives a request after its final frame.
  onReady(resumed, maxBudgetMs) {
    if (maxBudgetMs > 0) this.maxBudgetMs = maxBudgetMs;
    if (!resumed) this.loseAll();
  }

  // onReplayed runs once the resumed session's replay is over (its first
  // pong came): each turn still waiting gets until its deadline plus the
  // grace, a moment fixed at the first replay it waits through.
  // serverNow is the server's clock now.
  onReplayed(serverNow) {
    for (const [id, h] of this.held) {
      if (h.turn.terminal) {
        this.held.delete(id);
        continue;
      }
      if (h.timer != null) continue;
      h.giveUpAt ??= Math.max(orphanDeadline(h.turn, this.maxBudgetMs), serverNow) + this.graceMs;
      h.timer = this.setTimer(() => this.lose(id), Math.max(0, h.giveUpAt - serverNow));
    }
  }

  // loseAll ends every held turn as lost (the page gave up on them).
  loseAll() {
    for (const id of [...this.held.keys()]) this.lose(id);
  }

  lose(id) {
    const h = this.held.get(id);
    if (!h) return;
    this.held.delete(id);
    if (h.timer != null) this.clearTimer(h.timer);
    if (!h.turn.terminal) h.turn.onLost();
  }
}
