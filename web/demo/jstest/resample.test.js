import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Resampler, toPCM16, levelDb, Framer } from '../static/resample.js';

function sine(freq, rate, seconds, amp = 0.5) {
  const n = Math.round(rate * seconds);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = amp * Math.sin((2 * Math.PI * freq * i) / rate);
  return out;
}

function peak(x, from = 0) {
  let p = 0;
  for (let i = from; i < x.length; i++) p = Math.max(p, Math.abs(x[i]));
  return p;
}

test('48 kHz to 16 kHz keeps speech-band tones and the length ratio', () => {
  const r = new Resampler(48000, 16000);
  const out = r.process(sine(1000, 48000, 1));
  assert.ok(Math.abs(out.length - 16000) < 40, `got ${out.length} samples`);
  assert.ok(Math.abs(peak(out, 200) - 0.5) < 0.02, `1 kHz peak ${peak(out, 200)}`);
});

test('tones above the output Nyquist are filtered out, not aliased', () => {
  const r = new Resampler(48000, 16000);
  const out = r.process(sine(12000, 48000, 0.5));
  // Plain decimation would fold 12 kHz to 4 kHz at full amplitude.
  assert.ok(peak(out, 200) < 0.02, `12 kHz leaked with peak ${peak(out, 200)}`);
});

test('chunked processing equals one-shot processing', () => {
  const x = sine(440, 44100, 0.3);
  const whole = new Resampler(44100, 16000).process(x);
  const r = new Resampler(44100, 16000);
  const parts = [];
  for (let i = 0; i < x.length; i += 128) parts.push(...r.process(x.subarray(i, i + 128)));
  assert.equal(parts.length, whole.length);
  for (let i = 0; i < whole.length; i++) assert.ok(Math.abs(parts[i] - whole[i]) < 1e-6, `sample ${i}`);
});

test('a constant passes with gain 1 and equal rates pass through', () => {
  const dc = new Float32Array(4800).fill(0.25);
  const out = new Resampler(48000, 16000).process(dc);
  for (let i = 100; i < out.length; i++) assert.ok(Math.abs(out[i] - 0.25) < 1e-4);
  const same = new Resampler(16000, 16000).process(dc);
  assert.deepEqual([...same], [...dc]);
});

test('toPCM16 scales and clips', () => {
  assert.deepEqual([...toPCM16(Float32Array.from([0, 1, -1, 2, -2, 0.5]))], [0, 32767, -32768, 32767, -32768, 16384]);
});

test('levelDb', () => {
  assert.equal(levelDb(new Int16Array(320)), -Infinity);
  const full = new Int16Array(320).fill(32767);
  assert.ok(Math.abs(levelDb(full)) < 0.01);
  const half = new Int16Array(320).fill(16384);
  assert.ok(Math.abs(levelDb(half) + 6.02) < 0.05);
});

test('Framer cuts fixed-size frames across pushes', () => {
  const f = new Framer(320);
  assert.equal(f.push(new Int16Array(300)).length, 0);
  const frames = f.push(Int16Array.from({ length: 700 }, (_, i) => i));
  assert.equal(frames.length, 3);
  for (const fr of frames) assert.equal(fr.length, 320);
  assert.equal(frames[0][300], 0); // the first frame ends with the second push's start
  assert.equal(frames[1][0], 20);
  assert.equal(f.n, 40);
});
