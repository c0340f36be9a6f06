import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resumeURL, probeURL, refusedResume, refusedAccess, ResumeState, Orphans, TERMINAL_GRACE_MS } from '../static/resume.js';
import { closeText } from '../static/client.js';

test('resumeURL adds ?resume= and keeps ?access_token=', () => {
  const base = 'ws://127.0.0.1:8080/v1/session?access_token=s3cret';
  assert.equal(resumeURL(base, ''), base);
  const u = new URL(resumeURL(base, 'abc.d-f_'));
  assert.equal(u.searchParams.get('access_token'), 's3cret');
  assert.equal(u.searchParams.get('resume'), 'abc.d-f_');
  assert.equal(u.pathname, '/v1/session');
  // A newer token replaces the older one rather than adding a second.
  const again = new URL(resumeURL(u.toString(), 'new'));
  assert.deepEqual(again.searchParams.getAll('resume'), ['new']);
});

test('probeURL is the plain HTTP twin of the WebSocket URL', () => {
  assert.equal(probeURL('ws://h:1/v1/session?resume=t&access_token=a'), 'http://h:1/v1/session?resume=t&access_token=a');
  assert.equal(probeURL('wss://h/v1/session?resume=t'), 'https://h/v1/session?resume=t');
});

test('only a 401 naming the resume token is a refused token', () => {
  const cases = [
    [401, 'resume token expired\n', true],
    [401, 'resume token forged or altered: bad signature\n', true],
    [401, 'resume token belongs to another client', true],
    [401, 'resume token malformed', true],
    [401, 'missing or invalid access token\n', false], // the access token: a new session would not help
    [503, 'server is draining', false],
    [400, 'WebSocket protocol violation', false], // the token was fine: only the upgrade is missing
    [0, '', false], // unreachable
  ];
  for (const [status, body, want] of cases) assert.equal(refusedResume(status, body), want, `${status} ${body}`);
});

test('a 401 not naming the resume token is a refused access token', () => {
  const cases = [
    [401, 'missing or invalid access token\n', true], // the page needs ?access_token=
    [401, 'resume token expired\n', false],
    [503, 'server is draining', false],
    [400, 'WebSocket protocol violation', false],
    [0, '', false], // unreachable
  ];
  for (const [status, body, want] of cases) assert.equal(refusedAccess(status, body), want, `${status} ${body}`);
});

test('ResumeState takes a live result\'s fresh token, not a replayed one\'s', () => {
  const s = new ResumeState();
  s.onReady({ resumeToken: 't1', conversationId: 'c' });
  s.onResult({ type: 'result', resumeToken: 't2' }, false);
  assert.equal(s.token, 't2', 'a long session keeps a token it can resume with');
  s.onResult({ type: 'result' }, false); // a server that sends none
  assert.equal(s.token, 't2');
  s.onReady({ resumeToken: 't3', conversationId: 'c', resumed: true });
  s.onResult({ type: 'result', resumeToken: 't2' }, true);
  assert.equal(s.token, 't3', 'a replayed result\'s token is older than session.ready\'s');
});

test('ResumeState keeps the latest token and forgets a refused one', () => {
  const s = new ResumeState();
  assert.equal(s.token, '');
  s.onReady({ resumeToken: 't1', conversationId: 'c', instance: 'i1' });
  s.onReady({ resumeToken: 't2', conversationId: 'c', instance: 'i2', resumed: true });
  assert.equal(s.token, 't2');
  assert.equal(s.instance, 'i2');
  s.refused();
  assert.equal(s.token, '');
  s.onReady({ conversationId: 'c2' }); // a server without resume
  assert.equal(s.token, '');
});

test('close 1012 reads as a restart the page comes back from at once', () => {
  assert.match(closeText(1012), /restarting/);
  assert.match(closeText(4321), /4321/);
});

// fakeTimers runs timers by hand.
function fakeTimers() {
  const timers = new Map();
  let next = 1;
  return {
    timers,
    setTimer: (fn, ms) => {
      timers.set(next, { fn, ms });
      return next++;
    },
    clearTimer: (id) => timers.delete(id),
    fire() {
      for (const [id, t] of [...timers]) {
        timers.delete(id);
        t.fn();
      }
    },
  };
}

function turn(id, deadlineAt) {
  return {
    id,
    deadlineAt,
    terminal: false,
    lost: 0,
    onLost() {
      this.lost++;
      this.terminal = true;
    },
  };
}

test('orphans: a fresh session ends every held turn as lost', () => {
  const ft = fakeTimers();
  const o = new Orphans(ft);
  const a = turn('a', 5000), b = turn('b', 6000);
  o.hold(a);
  o.hold(b);
  o.hold(a); // held again after another failed attempt: once
  assert.equal(o.size, 2);
  o.onReady(false);
  assert.equal(a.lost, 1);
  assert.equal(b.lost, 1);
  assert.equal(o.size, 0);
});

test('orphans: replayed terminals win, the rest are lost after deadline plus grace', () => {
  const ft = fakeTimers();
  const o = new Orphans(ft);
  const answered = turn('answered', 10_000);
  const late = turn('late', 10_500); // deadline still ahead when the replay ends
  const past = turn('past', 9_000); // deadline gone: only the grace
  const never = turn('never', undefined); // no frame reached the server
  for (const t of [answered, late, past, never]) o.hold(t);
  o.onReady(true);
  assert.equal(o.size, 4, 'a resumed session keeps them waiting');
  answered.terminal = true; // its result came in the replay
  o.onReplayed(10_000);
  assert.deepEqual([...ft.timers.values()].map((t) => t.ms).sort((x, y) => x - y),
    [TERMINAL_GRACE_MS, TERMINAL_GRACE_MS, 500 + TERMINAL_GRACE_MS]);
  ft.fire();
  assert.equal(answered.lost, 0);
  assert.equal(late.lost, 1);
  assert.equal(past.lost, 1);
  assert.equal(never.lost, 1);
  assert.equal(o.size, 0);
});

// heldThenResumed holds one turn (deadline 1000) across a resumed session
// whose replay ended at server time 1000.
function heldThenResumed(opts) {
  const o = new Orphans(opts);
  const t = turn('t', 1000);
  o.hold(t);
  o.onReady(true);
  o.onReplayed(1000);
  return { o, t };
}

test('orphans: a terminal arriving before the grace ends cancels nothing visible', () => {
  const ft = fakeTimers();
  const { t } = heldThenResumed(ft);
  t.terminal = true; // its result came live on the resumed session
  ft.fire();
  assert.equal(t.lost, 0);
});

test('orphans: losing the connection again stops the grace until the next replay', () => {
  const ft = fakeTimers();
  const { o, t } = heldThenResumed(ft);
  assert.equal(ft.timers.size, 1);
  o.hold(t); // lost again before its terminal came
  assert.equal(ft.timers.size, 0);
  assert.equal(t.lost, 0);
  o.onReady(true);
  o.onReplayed(1200);
  assert.equal(ft.timers.size, 1);
  ft.fire();
  assert.equal(t.lost, 1);
});

test('orphans: the default timers are the real ones', async () => {
  const { t } = heldThenResumed({ graceMs: 1 });
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(t.lost, 1);
});

test('orphans: a held turn given up by hand is lost once', () => {
  const ft = fakeTimers();
  const { o, t } = heldThenResumed(ft);
  assert.ok(o.has('t'));
  o.lose('t');
  assert.ok(!o.has('t'));
  assert.equal(t.lost, 1);
  assert.equal(ft.timers.size, 0);
  o.lose('t');
  assert.equal(t.lost, 1);
});

test('ResumeState.onReady tells whether the session continues the conversation, resumed or not', () => {
  const s = new ResumeState();
  assert.equal(s.onReady({ resumeToken: 't1', conversationId: 'c' }), false, 'the first session is new');
  // The store was away: resumed false, same conversation; the server
  // still replays and hands over the terminals it holds.
  assert.equal(s.onReady({ resumeToken: 't2', conversationId: 'c', resumed: false }), true);
  assert.equal(s.onReady({ resumeToken: 't3', conversationId: 'c', resumed: true }), true);
  s.refused();
  assert.equal(s.onReady({ resumeToken: 't4', conversationId: 'c2' }), false, 'a new conversation');
});

test('orphans: the wait is capped at the session maxBudgetMs after the last frame, whatever deadlineAt asked', () => {
  const ft = fakeTimers();
  const o = new Orphans(ft);
  // The page asked for a minute (the budget slider goes past the
  // server's cap); the server's deadline was min(deadlineAt, the final
  // frame's arrival + maxBudgetMs).
  const t = turn('t', 1000 + 60_000);
  t.sentAt = 1000; // the last frame left at server time 1000
  o.hold(t);
  o.onReady(true, 300);
  o.onReplayed(1100);
  assert.deepEqual([...ft.timers.values()].map((x) => x.ms), [200 + TERMINAL_GRACE_MS]);
  ft.fire();
  assert.equal(t.lost, 1);
});

test('orphans: a connection that flaps faster than the grace does not hold a turn for ever', () => {
  const ft = fakeTimers();
  const o = new Orphans(ft);
  const t = turn('t', 1000);
  o.hold(t);
  o.onReady(true);
  o.onReplayed(1000); // give-up at 1000 + grace, fixed now
  // Lost and resumed again and again, each time before the grace ran out.
  let now = 1000;
  for (let i = 0; i < 10 && t.lost === 0; i++) {
    now += TERMINAL_GRACE_MS / 4;
    o.hold(t);
    o.onReady(true);
    o.onReplayed(now);
    const [timer] = [...ft.timers.values()];
    assert.ok(timer.ms <= 1000 + TERMINAL_GRACE_MS - now + 0, `resume ${i}: waits ${timer.ms} ms more at ${now}, past deadline + grace`);
    if (timer.ms === 0) ft.fire();
  }
  assert.equal(t.lost, 1, 'given up at its deadline plus the grace');
});
