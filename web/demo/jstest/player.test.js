import { test } from 'node:test';
import assert from 'node:assert/strict';
import { playedMs, toFloat } from '../static/player.js';

test('playedMs counts each segment up to its length', () => {
  const segs = [{ start: 1, dur: 0.2 }, { start: 1.2, dur: 0.2 }, { start: 1.5, dur: 0.1 }]; // a 100 ms gap before the third
  const cases = [
    [0.5, 0], // not started
    [1.1, 100],
    [1.2, 200],
    [1.45, 400], // in the gap: nothing more heard
    [1.55, 450],
    [9, 500],
  ];
  for (const [now, want] of cases) assert.equal(playedMs(segs, now), want, `at ${now}`);
});

test('toFloat scales 16-bit PCM to [-1, 1)', () => {
  assert.deepEqual([...toFloat(new Int16Array([0, -32768, 16384]))], [0, -1, 0.5]);
});

// fakeAudio is the little of Web Audio the Player uses, on a clock the
// test moves.
function fakeAudio() {
  const ctx = {
    currentTime: 0,
    state: 'running',
    destination: {},
    createBuffer: (ch, n, rate) => ({ duration: n / rate, copyToChannel() {} }),
    createBufferSource: () => ({ connect() {}, start() {}, stop() {} }),
  };
  globalThis.AudioContext = class { constructor() { return ctx; } };
  return ctx;
}

test('an answer without a final chunk stops playing once its request has ended', async () => {
  const ctx = fakeAudio();
  const { Player } = await import('../static/player.js');
  const p = new Player();
  p.push('r1', new Int16Array(3200), 16000, false); // 200 ms, not final
  assert.ok(p.playing);
  ctx.currentTime = 5; // long after its audio
  assert.ok(p.playing, 'no final chunk yet: more audio may come');
  p.end('r2'); // another request: no effect
  assert.ok(p.playing);
  p.end('r1'); // r1's terminal (cancelled: no final chunk will come)
  assert.ok(!p.playing);
});

test('latencyS is outputLatency, else baseLatency, never negative', async () => {
  const { latencyS } = await import('../static/player.js');
  const cases = [
    [{ outputLatency: 0.04, baseLatency: 0.01 }, 0.04],
    [{ outputLatency: 0, baseLatency: 0.01 }, 0.01], // not measured yet
    [{ baseLatency: 0.02 }, 0.02], // a browser without outputLatency
    [{}, 0],
    [{ outputLatency: -1, baseLatency: -0.5 }, 0],
  ];
  for (const [ctx, want] of cases) assert.equal(latencyS(ctx), want, JSON.stringify(ctx));
});

test('a stopped answer reports what was heard, not what the audio clock has played', async () => {
  const ctx = fakeAudio();
  const { Player } = await import('../static/player.js');
  const p = new Player();
  p.push('r1', new Int16Array(3200), 16000, true); // 200 ms from 0.05 s
  ctx.outputLatency = 0.1;
  ctx.currentTime = 0.2; // 150 ms played, 50 ms of it heard
  assert.equal(p.totalHeardMs, 50);
  ctx.currentTime = 0.3; // all played, the last 50 ms not heard yet
  assert.ok(p.playing, 'still audible');
  assert.deepEqual(p.stop(), { requestId: 'r1', playedMs: 150, complete: false });

  p.push('r2', new Int16Array(3200), 16000, true); // 200 ms from 0.35 s
  ctx.outputLatency = 5; // more than has played: none heard
  ctx.currentTime = 0.5;
  assert.deepEqual(p.stop(), { requestId: 'r2', playedMs: 0, complete: false });
});
