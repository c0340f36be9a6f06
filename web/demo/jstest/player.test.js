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
