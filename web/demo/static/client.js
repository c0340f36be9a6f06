// The session connection: a WebSocket to /v1/session that reconnects with
// exponential backoff and jitter, keeps the clock aligned with pings, and
// hands server messages to the page as events.
import { PROTOCOL, ServerClock, nowMs, decodeAudioFrame } from './protocol.js';

const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 15000;
const PING_EVERY_MS = 5000;
const WARMUP_PINGS = 4; // quick round trips right after connecting
const WARMUP_GAP_MS = 150;
const PONG_TIMEOUT_MS = 10000; // no pong for this long: the link is dead

// backoffDelay is the wait before reconnect attempt n (1-based): doubling
// from 500 ms to at most 15 s, with "equal jitter" (half fixed, half
// random) so that many pages dropped together do not return in step.
export function backoffDelay(n, rand = Math.random) {
  const d = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, n - 1));
  return Math.round(d / 2 + (rand() * d) / 2);
}

// Client events (all CustomEvent, details in detail):
//   status  {state: 'connecting'|'open'|'waiting'|'closed', attempt, delayMs, reason}
//   ready   the session.ready message
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
    this.attempt = 0;
    this.stopped = true;
    this.timers = new Set();
  }

  get open() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN && this.ready !== null;
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
    this.clock.reset();
    this.emit('status', { state: 'connecting', attempt: this.attempt });
    let ws;
    try {
      ws = new WebSocket(this.url, PROTOCOL);
    } catch (err) {
      this.lost(`cannot open a WebSocket: ${err.message}`);
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    ws.onmessage = (ev) => this.onMessage(ws, ev);
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.ready = null;
      let reason = ev.reason || closeText(ev.code);
      if (ev.code === 1000 && this.stopped) reason = 'closed';
      this.lost(reason, ev.code);
    };
    // onerror carries no detail in browsers; onclose follows it.
  }

  lost(reason, code) {
    this.clearTimers();
    if (this.stopped) {
      this.emit('status', { state: 'closed', reason, code });
      return;
    }
    this.attempt++;
    const delayMs = backoffDelay(this.attempt);
    this.emit('status', { state: 'waiting', attempt: this.attempt, delayMs, reason, code });
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
        this.clock.fromReady(msg.serverTime, recvAt);
        this.emit('status', { state: 'open', attempt: 0 });
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
    if (!this.open) return;
    if (this.awaitingSince != null && nowMs() - this.awaitingSince > PONG_TIMEOUT_MS) {
      // A half-open TCP connection never fires onclose by itself.
      this.ws.close(4000, 'no pong from the server');
      return;
    }
    this.ping();
    this.later(() => this.keepAlive(), PING_EVERY_MS);
  }

  // sendJSON sends a text message; it reports whether the session was open.
  sendJSON(obj) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(obj));
    return true;
  }

  sendBinary(buf) {
    if (!this.open) return false;
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

function closeText(code) {
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
    default:
      return `closed with status ${code}`;
  }
}
