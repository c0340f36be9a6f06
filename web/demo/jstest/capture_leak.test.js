import { test } from 'node:test';
import assert from 'node:assert/strict';

test('a failed Capture.start closes the AudioContext it opened', async () => {
  const contexts = [];
  let tracksStopped = 0;
  globalThis.window = { isSecureContext: true };
  Object.defineProperty(globalThis, 'navigator', {
    configurable: true,
    value: { mediaDevices: { getUserMedia: async () => ({ getTracks: () => [{ stop: () => tracksStopped++ }], getAudioTracks: () => [] }) } },
  });
  globalThis.AudioWorkletNode = class {};
  globalThis.AudioContext = class {
    constructor() { this.closed = false; this.state = 'running'; this.audioWorklet = { addModule: async () => { throw new Error('module failed'); } }; contexts.push(this); }
    close() { this.closed = true; return Promise.resolve(); }
  };
  const { Capture } = await import('../static/audio.js');
  const c = new Capture({ targetRate: 16000, frameMs: 20, onFrame() {} });
  await assert.rejects(c.start(), /Audio processing could not start/);
  assert.equal(tracksStopped, 1, 'the microphone is released');
  assert.equal(contexts.length, 1);
  assert.equal(contexts[0].closed, true, 'the AudioContext is left running');
});
