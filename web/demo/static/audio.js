// Microphone capture: getUserMedia into an AudioWorklet that resamples to
// the session's rate and posts PCM16 frames.

// MicError is a capture failure with a message for people.
export class MicError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

// describeMicError turns getUserMedia's DOMExceptions into advice.
export function describeMicError(err) {
  switch (err && err.name) {
    case 'NotAllowedError':
    case 'SecurityError':
      return new MicError('refused', 'Microphone access was refused. Allow the microphone for this site (the icon in the address bar) and press Start again.');
    case 'NotFoundError':
    case 'OverconstrainedError':
      return new MicError('missing', 'No microphone was found. Plug one in and press Start again.');
    case 'NotReadableError':
    case 'AbortError':
      return new MicError('busy', 'The microphone could not be opened: another application may be using it.');
    default:
      return new MicError('other', `The microphone could not be started: ${(err && err.message) || err}`);
  }
}

// Capture runs the microphone. onFrame receives {pcm: Int16Array, db}
// for every frame of frameMs at targetRate.
export class Capture {
  // processing turns on the browser's echo cancellation, noise
  // suppression and gain control. They help in a noisy room or with
  // loudspeakers, but they distort speech enough to cost the recogniser
  // words (a synthetic voice came through as "we are not" instead of
  // "where is my order"), so the page leaves them off by default.
  constructor({ targetRate, frameMs, onFrame, onEnded, processing = false }) {
    this.processing = processing;
    this.targetRate = targetRate;
    this.frameMs = frameMs;
    this.onFrame = onFrame;
    this.onEnded = onEnded;
    this.ctx = null;
    this.stream = null;
    this.node = null;
  }

  get running() {
    return this.ctx !== null;
  }

  async start() {
    if (!window.isSecureContext || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      throw new MicError('insecure', 'This page cannot use the microphone: browsers allow it only on https:// or http://localhost (127.0.0.1).');
    }
    if (typeof AudioWorkletNode === 'undefined') {
      throw new MicError('unsupported', 'This browser has no AudioWorklet; use a current Chromium, Firefox or Safari.');
    }
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({
        audio: {
          channelCount: 1,
          echoCancellation: this.processing,
          noiseSuppression: this.processing,
          autoGainControl: this.processing,
        },
      });
    } catch (err) {
      throw describeMicError(err);
    }
    let ctx;
    try {
      ctx = new AudioContext();
      await ctx.audioWorklet.addModule(new URL('./worklet.js', import.meta.url));
      const src = ctx.createMediaStreamSource(stream);
      const node = new AudioWorkletNode(ctx, 'voiced-capture', {
        numberOfInputs: 1,
        numberOfOutputs: 0,
        channelCount: 1,
        channelCountMode: 'explicit',
        processorOptions: { targetRate: this.targetRate, frameMs: this.frameMs },
      });
      node.port.onmessage = (ev) => this.onFrame(ev.data);
      src.connect(node);
      if (ctx.state === 'suspended') await ctx.resume();
      for (const track of stream.getAudioTracks()) {
        track.addEventListener('ended', () => {
          this.stop();
          this.onEnded?.();
        });
      }
      this.ctx = ctx;
      this.stream = stream;
      this.node = node;
      this.inputRate = ctx.sampleRate;
    } catch (err) {
      for (const t of stream.getTracks()) t.stop();
      ctx?.close(); // its render thread would run on for nothing
      throw new MicError('other', `Audio processing could not start: ${err.message}`);
    }
  }

  stop() {
    if (this.node) this.node.port.onmessage = null;
    if (this.stream) for (const t of this.stream.getTracks()) t.stop();
    if (this.ctx) this.ctx.close();
    this.ctx = this.stream = this.node = null;
  }
}
