import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeAudioFrame, encodeStreamFrame, decodeAudioFrame, ServerClock, validRequestId } from '../static/protocol.js';
import { backoffDelay } from '../static/client.js';
import { layout } from '../static/timeline.js';

test('binary audio frame: big-endian header length, JSON header, little-endian PCM', () => {
  const buf = encodeAudioFrame({ requestId: 'r1', deadlineAt: 1700000000123.6, seq: 3, final: true }, Int16Array.from([1, -2, 0x1234]));
  const bytes = new Uint8Array(buf);
  const n = (bytes[0] << 24) | (bytes[1] << 16) | (bytes[2] << 8) | bytes[3];
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + n)));
  assert.deepEqual(header, { type: 'audio', requestId: 'r1', deadlineAt: 1700000000124, seq: 3, final: true });
  assert.deepEqual([...bytes.subarray(4 + n)], [0x01, 0x00, 0xfe, 0xff, 0x34, 0x12]);
  const back = decodeAudioFrame(buf);
  assert.deepEqual([...back.pcm], [1, -2, 0x1234]);
});

test('request ids follow the server rule', () => {
  assert.ok(validRequestId('abc123-1'));
  assert.ok(!validRequestId(''));
  assert.ok(!validRequestId('a b'));
  assert.ok(!validRequestId('x'.repeat(65)));
});

test('the clock keeps the offset of the shortest round trip', () => {
  const c = new ServerClock();
  c.fromReady(10_000, 9_000);
  assert.equal(c.offset, 1000);
  c.fromPong(9_100, 10_160, 9_200); // rtt 100, offset 1010
  c.fromPong(9_300, 10_312, 9_320); // rtt 20, offset 1002
  c.fromPong(9_400, 10_600, 9_700); // rtt 300, offset 1050
  assert.equal(c.rtt, 20);
  assert.equal(c.offset, 1002);
  assert.equal(c.serverNow(20_000), 21_002);
});

test('reconnect backoff doubles with jitter up to its cap', () => {
  assert.equal(backoffDelay(1, () => 0), 250);
  assert.equal(backoffDelay(1, () => 1), 500);
  assert.equal(backoffDelay(3, () => 1), 2000);
  assert.equal(backoffDelay(30, () => 1), 15000);
  assert.equal(backoffDelay(30, () => 0), 7500);
});

test('timeline layout: intent and retrieval after STT, the LLM where the budget says', () => {
  const L = layout({
    timings: { stt: 100, intent: 20, retrieval: 40, llm: 300, total: 450 },
    budget: { deadlineAt: 1, llmStartLeftMs: 1550, maxBudgetMs: 1700, effectiveBudgetMs: 1700 },
  });
  const by = Object.fromEntries(L.bars.map((b) => [b.key, b]));
  assert.deepEqual(by.stt, { key: 'stt', start: 0, end: 100 });
  assert.deepEqual(by.intent, { key: 'intent', start: 100, end: 120 });
  assert.deepEqual(by.retrieval, { key: 'retrieval', start: 100, end: 140 });
  assert.deepEqual(by.llm, { key: 'llm', start: 150, end: 450 });
  assert.equal(L.deadline, 1700);
  assert.ok(L.span >= 1700);
});

test('timeline layout: stages that did not run have no bar', () => {
  const L = layout({ timings: { stt: 100, intent: 5, total: 130 }, budget: { effectiveBudgetMs: 300, maxBudgetMs: 1700 } });
  assert.deepEqual(L.bars.map((b) => b.key), ['stt', 'intent']);
  assert.equal(L.llmStartLeftMs, null);
});

test('server turn detection: a stream frame carries only seq', () => {
  const buf = encodeStreamFrame(7, Int16Array.from([1, -2]));
  const back = decodeAudioFrame(buf);
  assert.deepEqual(back.header, { seq: 7 });
  assert.deepEqual([...back.pcm], [1, -2]);
});

test('timeline with a server turn: the speech row ends the end-of-turn silence before 0', () => {
  const L = layout({ timings: { stt: 100, total: 400 }, budget: { effectiveBudgetMs: 1000 } },
    { startMs: 1200, endMs: 2000, silenceMs: 500 });
  assert.deepEqual(L.speech, { key: 'speech', start: -1300, end: -500 });
  assert.equal(L.lo, -1300);
  assert.ok(Math.abs(L.span - 2300 * 1.08) < 1e-9);
  assert.equal(layout({ timings: { total: 1 } }).lo, 0);
});

test('timeline layout: the reserve and each stage latest start', () => {
  const L = layout({
    timings: { stt: 100, total: 180 },
    budget: { effectiveBudgetMs: 300, maxBudgetMs: 1700, reserveMs: 100, minimumsMs: { intent: 1, llm: 120 } },
  });
  assert.equal(L.reserve, 100);
  assert.deepEqual(L.latestStart, { intent: 199, llm: 80 });
  const none = layout({ timings: { total: 5 }, budget: {} });
  assert.equal(none.reserve, null);
  assert.deepEqual(none.latestStart, {});
});
