// The session connection: a WebSocket to /v1/session that reconnects with
// exponential backoff and jitter, resumes its conversation with the last
// resumeToken (see resume.js), keeps the clock aligned with pings, and
// hands server messages to the page as events.
import { PROTOCOL, ServerClock, nowMs, decodeAudioFrame } from './protocol.js';
import { ResumeState, resumeURL, probeURL, refusedResume, refusedAccess, DRAIN_JITTER_MS } from './resume.js';

const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 15000;
const PING_EVERY_MS = 5000;
const WARMUP_PINGS = 4; // quick round trips right after connecting
const WARMUP_GAP_MS = 150;
const PONG_TIMEOUT_MS = 10000; // no pong for this long: the link is dead
// DIAL_TIMEOUT_MS bounds a dial up to its session.ready, as the Go
// client's DialTimeout does.
export const DIAL_TIMEOUT_MS = 10000;

// backoffDelay is the wait before reconnect attempt n (1-based): doubling
// from 500 ms to at most 15 s, with "equal jitter" (half fixed, half
// random) so that many pages dropped together do not return in step.
export function backoffDelay(n, rand = Math.random) {
  const d = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, n - 1));
  return Math.round(d / 2 + (rand() * d) / 2);
}

// Client events (all CustomEvent, details in detail):
//   status  {state: 'connecting'|'open'|'draining'|'waiting'|'closed', attempt,
//           delayMs, reason, resumed (open), resumable (waiting: a token is kept,
//           so the turns in flight may still get their terminals)}
//   ready   the session.ready message (client.continues: it goes on with the
//           conversation of the token presented, resumed or not)
//   replayed  a resumed session's replay of missed terminals is over (they
//           came as message events before it): {serverNow}
//   audio   {header, pcm} an answer.audio chunk (binary, or base64 text)
//   message any other server message
//   clock   {offset, rtt}
export class VoicedClient extends EventTarget {
  constructor(url) {
    super();
    this.url = url;
    this.clock = new ServerClock();
    this.ws = null;
    this.ready = null; // session.ready of the current session
    this.resume = new ResumeState();
    this.draining = false; // the server said session.draining
    this.replaying = false; // continues, and the first pong not yet in
    this.continues = false; // the session goes on with the token's conversation
    this.attempt = 0;
    this.stopped = true;
    this.timers = new Set();
  }

  // connected: a session is ready on an open connection.
  get connected() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN && this.ready !== null;
  }

  // open: a session that takes new requests. A draining one does not, but
  // still takes the rest of a request in flight (sendBinary).
  get open() {
    return this.connected && !this.draining;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    this.clearTimers();
    if (this.ws) this.ws.close(1000, 'page closed');
  }

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  later(fn, ms) {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  clearTimers() {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }

  connect() {
    this.clearTimers();
    this.ready = null;
    this.awaitingSince = null;
    this.draining = false;
    this.replaying = false;
    this.clock.reset();
    this.emit('status', { state: 'connecting', attempt: this.attempt });
    const token = this.resume.token;
    const url = resumeURL(this.url, token);
    let ws;
    try {
      ws = new WebSocket(url, PROTOCOL);
    } catch (err) {
      this.lost(`cannot open a WebSocket: ${err.message}`);
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
    };
    ws.onmessage = (ev) => this.onMessage(ws, ev);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.ready = null;
      let reason = ev.reason || closeText(ev.code);
      if (ev.code === 1000 && this.stopped) reason = 'closed';
      if (!opened && !this.stopped) {
        // The upgrade failed, and browsers hide its HTTP status: ask the
        // same URL over plain HTTP whether a token was refused.
        this.probe(url, reason, ev.code);
        return;
      }
      this.lost(reason, ev.code, ev.code === 1012 || this.draining);
    };
    // onerror carries no detail in browsers; onclose follows it.
    // The keep-alive starts with session.ready: before it, a link that
    // went dead mid-handshake (or a server that stalls) would leave the
    // page connecting, its held turns waiting, until TCP gives up.
    this.later(() => {
      if (this.ws === ws && this.ready === null) this.abandon('no session.ready', 'no session.ready from the server in time');
    }, DIAL_TIMEOUT_MS);
  }

  // probe asks why an upgrade failed. The server checks the access and
  // resume tokens before the upgrade, so a GET without Upgrade gets the
  // same 401 and its body; valid tokens get another refusal (the upgrade
  // is missing), a server that is down none at all.
  // A probe that gets no answer in DIAL_TIMEOUT_MS is given up as
  // unreachable: a server that stalls it would otherwise leave the page
  // waiting, its held turns too, with no next attempt scheduled.
  async probe(url, reason, code) {
    let status = 0;
    let body = '';
    let retryAfter = 0;
    const ctl = new AbortController();
    const t = setTimeout(() => ctl.abort(), DIAL_TIMEOUT_MS);
    try {
      const r = await fetch(probeURL(url), { cache: 'no-store', credentials: 'omit', signal: ctl.signal });
      status = r.status;
      retryAfter = parseInt(r.headers.get('Retry-After') ?? '', 10) || 0;
      body = await r.text();
    } catch {
      // Unreachable or stalled: keep the token for the next attempt.
    } finally {
      clearTimeout(t);
    }
    if (this.stopped || this.ws !== null) return;
    if (refusedResume(status, body)) {
      this.resume.refused();
      this.clearTimers();
      // A new session at once, as the Go client does.
      this.emit('status', { state: 'waiting', attempt: this.attempt, delayMs: 0, reason: `${body.trim()}: starting a new conversation`, code: 401, resumable: false });
      this.connect();
      return;
    }
    if (refusedAccess(status, body)) {
      this.lost(body.trim(), 401, false, { access: true });
      return;
    }
    if (status === 429 || status === 503) {
      // Refused for this client's sessions (429) or the server's state
      // (503: full, warming up, saturated, draining): its body says which,
      // and Retry-After when a new attempt can succeed.
      this.lost(`voiced refused the session (HTTP ${status}): ${body.trim()}`, status, false, {}, retryAfter * 1000);
      return;
    }
    this.lost(reason, code);
  }

  // lost schedules the next attempt: with backoff, or almost at once
  // after a drain (1012, session.draining): the instance went away on
  // purpose, and another one (or its restart) takes the token.
  // No sooner than minDelayMs (a refusal's Retry-After).
  lost(reason, code, restart = false, detail = {}, minDelayMs = 0) {
    this.clearTimers();
    if (this.stopped) {
      this.emit('status', { state: 'closed', reason, code });
      return;
    }
    this.attempt++;
    const delayMs = restart ? Math.round(Math.random() * DRAIN_JITTER_MS) : Math.max(minDelayMs, backoffDelay(this.attempt));
    this.emit('status', { state: 'waiting', attempt: this.attempt, delayMs, reason, code, resumable: this.resume.token !== '', ...detail });
    this.later(() => this.connect(), delayMs);
  }

  onMessage(ws, ev) {
    if (typeof ev.data !== 'string') {
      // Binary messages are answer.audio, framed like inbound audio.
      let frame;
      try {
        frame = decodeAudioFrame(ev.data);
      } catch {
        return;
      }
      if (frame.header.type === 'answer.audio') this.emit('audio', frame);
      return;
    }
    const recvAt = nowMs();
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch {
      return;
    }
    switch (msg.type) {
      case 'session.ready':
        if (msg.protocol !== PROTOCOL) {
          this.ready = null;
          ws.close(1002, 'unknown protocol');
          return;
        }
        this.ready = msg;
        this.attempt = 0;
        // continues: the session goes on with the token's conversation
        // (resumed, or without its history when the server's store was
        // away): it replays the terminals it missed right after
        // session.ready, before it answers any ping.
        this.continues = this.resume.onReady(msg);
        this.replaying = this.continues;
        this.clock.fromReady(msg.serverTime, recvAt);
        this.emit('status', { state: 'open', attempt: 0, resumed: !!msg.resumed });
        this.emit('ready', msg);
        this.emitClock();
        for (let i = 0; i < WARMUP_PINGS; i++) this.later(() => this.ping(), i * WARMUP_GAP_MS);
        this.later(() => this.keepAlive(), PING_EVERY_MS);
        return;
      case 'answer.audio':
        this.emit('audio', { header: msg, pcm: pcmFromBase64(msg.audio || '') });
        return;
      case 'pong':
        this.awaitingSince = null;
        this.clock.fromPong(msg.clientTime, msg.serverTime, recvAt);
        this.emitClock();
        if (this.replaying) {
          this.replaying = false;
          this.emit('replayed', { serverNow: this.clock.serverNow() });
        }
        return;
      case 'session.draining':
        // No new request here; the requests in flight end, then the
        // server closes with 1012 and the page comes back at once.
        this.draining = true;
        this.emit('status', { state: 'draining', closeInMs: msg.closeInMs });
        return;
      case 'result':
        // Replayed results come before the first pong of a resumed
        // session: their tokens are older than its session.ready's.
        this.resume.onResult(msg, this.replaying);
        this.emit('message', msg);
        return;
      default:
        this.emit('message', msg);
    }
  }

  emitClock() {
    this.emit('clock', { offset: this.clock.offset, rtt: this.clock.rtt });
  }

  ping() {
    this.awaitingSince ??= nowMs();
    this.sendJSON({ type: 'ping', clientTime: nowMs() });
  }

  keepAlive() {
    if (!this.connected) return;
    if (this.awaitingSince != null && nowMs() - this.awaitingSince > PONG_TIMEOUT_MS) {
      // A half-open TCP connection never fires onclose by itself, and
      // close() waits for the server's close frame, which a dead link
      // never brings: the browser fires onclose only when its closing
      // handshake times out, a minute later. Let the socket go and
      // reconnect now; nothing more is read from it.
      this.abandon('no pong', 'no pong from the server: the connection is dead');
      return;
    }
    this.ping();
    this.later(() => this.keepAlive(), PING_EVERY_MS);
  }

  // abandon lets the socket go without waiting for its close (a dead link
  // never brings one) and reconnects.
  abandon(closeReason, reason) {
    const ws = this.ws;
    this.ws = null;
    this.ready = null;
    ws.onmessage = null;
    ws.onclose = null;
    ws.close(4000, closeReason);
    this.lost(reason, 4000);
  }

  // sendJSON sends a text message; it reports whether the session was open.
  sendJSON(obj) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(obj));
    return true;
  }

  sendBinary(buf) {
    if (!this.connected) return false;
    this.ws.send(buf);
    return true;
  }
}

// pcmFromBase64 decodes the base64 form of answer.audio's samples.
function pcmFromBase64(b64) {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const view = new DataView(bytes.buffer);
  const pcm = new Int16Array(bytes.length >> 1);
  for (let i = 0; i < pcm.length; i++) pcm[i] = view.getInt16(2 * i, true);
  return pcm;
}

export function closeText(code) {
  switch (code) {
    case 1001:
      return 'the server is going away (shutting down)';
    case 1006:
      return 'the connection dropped (server unreachable or refused the session)';
    case 1008:
      return 'closed by the server for a policy violation (not reading fast enough?)';
    case 1009:
      return 'a message was too big for the server';
    case 1011:
      return 'the server hit an internal error';
    case 1012:
      return 'the server is restarting (drained): reconnecting at once';
    default:
      return `closed with status ${code}`;
  }
}
