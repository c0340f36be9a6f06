import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EnergyVAD } from '../static/vad.js';

const LOUD = -20;
const QUIET = -70;

function run(vad, levels) {
  return levels.map((db) => vad.push(db));
}

test('an utterance opens after startMs of speech and closes after the hangover', () => {
  const vad = new EnergyVAD(20, { thresholdDb: -45, startMs: 60, hangoverMs: 100 });
  const ev = run(vad, [QUIET, LOUD, LOUD, LOUD, LOUD, QUIET, QUIET, QUIET, QUIET, QUIET, QUIET]);
  assert.deepEqual(ev, ['silence', 'silence', 'silence', 'start', 'speech', 'speech', 'speech', 'speech', 'speech', 'end', 'silence']);
});

test('a short click does not open an utterance', () => {
  const vad = new EnergyVAD(20, { thresholdDb: -45, startMs: 60, hangoverMs: 100 });
  assert.deepEqual(run(vad, [LOUD, LOUD, QUIET, LOUD, LOUD, QUIET]), Array(6).fill('silence'));
});

test('a pause shorter than the hangover keeps the utterance open', () => {
  const vad = new EnergyVAD(20, { thresholdDb: -45, startMs: 20, hangoverMs: 100 });
  const ev = run(vad, [LOUD, QUIET, QUIET, QUIET, QUIET, LOUD, QUIET]);
  assert.equal(ev[0], 'start');
  assert.ok(!ev.includes('end'));
});

test('settings change at run time, and a long utterance is cut', () => {
  const vad = new EnergyVAD(20, { thresholdDb: -45, startMs: 20, hangoverMs: 1000, maxUtteranceMs: 100 });
  vad.set({ thresholdDb: -10 });
  assert.equal(vad.push(LOUD), 'silence');
  vad.set({ thresholdDb: -45 });
  const ev = run(vad, [LOUD, LOUD, LOUD, LOUD, LOUD, LOUD]);
  assert.deepEqual(ev, ['start', 'speech', 'speech', 'speech', 'end', 'start']);
});
