import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { VoicedClient, DIAL_TIMEOUT_MS } from '../static/client.js';

// FakeSocket is the little of a browser WebSocket the client uses; the
// test opens it (or not) by hand.
class FakeSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static all = [];
  constructor(url) {
    this.url = url;
    this.readyState = FakeSocket.CONNECTING;
    this.closedWith = null;
    FakeSocket.all.push(this);
  }
  open() {
    this.readyState = FakeSocket.OPEN;
    this.onopen?.();
  }
  send() {}
  close(code) {
    this.closedWith = code;
  }
}

// A dial whose session.ready never comes (the link went dead during the
// handshake, a server or proxy that stalls) must be given up, as the Go
// client's DialTimeout does: nothing else ends it, since the keep-alive
// starts with session.ready, and a half-open TCP connection fires no
// close for many minutes. The page sat "Connecting…", its held turns
// waiting, until then.
test('a dial without session.ready is given up and retried', (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  for (const [name, open] of [['opened, no session.ready', true], ['upgrade never answered', false]]) {
    FakeSocket.all = [];
    globalThis.WebSocket = FakeSocket;
    const c = new VoicedClient('ws://h/v1/session');
    const states = [];
    c.addEventListener('status', (ev) => states.push(ev.detail));
    c.start();
    const [ws] = FakeSocket.all;
    if (open) ws.open();
    mock.timers.tick(DIAL_TIMEOUT_MS - 1);
    assert.deepEqual(states.map((s) => s.state), ['connecting'], `${name}: too early`);
    mock.timers.tick(1);
    assert.deepEqual(states.map((s) => s.state), ['connecting', 'waiting'], name);
    assert.notEqual(ws.closedWith, null, `${name}: the stalled socket is left open`);
    assert.equal(ws.onclose, null, `${name}: its late close would count as another loss`);
    mock.timers.tick(states[1].delayMs);
    assert.equal(FakeSocket.all.length, 2, `${name}: no new attempt`);
    c.stop();
  }
});

// The probe that asks why an upgrade failed had no time limit: a server
// that answered the failed upgrade and then stalled the probe left the
// page with no next attempt scheduled.
test('a stalled probe is given up and the dial retried', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  FakeSocket.all = [];
  globalThis.WebSocket = FakeSocket;
  let probes = 0;
  globalThis.fetch = (_url, opts) => {
    probes++;
    return new Promise((_, reject) => opts.signal.addEventListener('abort', () => reject(new Error('aborted'))));
  };
  t.after(() => delete globalThis.fetch);
  const c = new VoicedClient('ws://h/v1/session');
  const states = [];
  c.addEventListener('status', (ev) => states.push(ev.detail));
  c.start();
  const [ws] = FakeSocket.all;
  ws.onclose({ code: 1006, reason: '' }); // the upgrade failed
  assert.equal(probes, 1);
  mock.timers.tick(DIAL_TIMEOUT_MS);
  await new Promise((resolve) => setImmediate(resolve)); // the probe's rejection and what follows
  assert.deepEqual(states.map((s) => s.state), ['connecting', 'waiting'], 'no next attempt after a stalled probe');
  mock.timers.tick(states[1].delayMs);
  assert.equal(FakeSocket.all.length, 2, 'no new attempt');
  c.stop();
});

// An upgrade refused for the client's limit (429) or the server's state
// (503) was shown as "the connection dropped (server unreachable or
// refused the session)" and retried within half a second, ignoring
// Retry-After (5 s for a 429, whose slot frees only when one of the
// client's own sessions ends): the probe's answer says why, and when to
// try again.
test('a probe answered 429 or 503 shows its body and waits its Retry-After', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  for (const [status, body, retryAfter] of [
    [429, 'too many sessions for this client: try again once one of them ends', '5'],
    [503, 'starting: engines warming up', '1'],
  ]) {
    FakeSocket.all = [];
    globalThis.WebSocket = FakeSocket;
    globalThis.fetch = async () => new Response(body + '\n', { status, headers: { 'Retry-After': retryAfter } });
    const c = new VoicedClient('ws://h/v1/session');
    const states = [];
    c.addEventListener('status', (ev) => states.push(ev.detail));
    c.start();
    FakeSocket.all[0].onclose({ code: 1006, reason: '' }); // the upgrade failed
    for (let i = 0; i < 5 && states.length < 2; i++) await new Promise((resolve) => setImmediate(resolve));
    const s = states[1];
    assert.equal(s?.state, 'waiting', `${status}`);
    assert.equal(s.code, status);
    assert.match(s.reason, new RegExp(body), `${status}: the server's reason`);
    assert.ok(s.delayMs >= 1000 * Number(retryAfter), `${status}: retried after ${s.delayMs} ms, before Retry-After ${retryAfter} s`);
    c.stop();
  }
  delete globalThis.fetch;
});
