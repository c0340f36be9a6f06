// Energy voice activity detector with hangover. Pure logic over per-frame
// levels, so it is unit-tested without a microphone.

export const VAD_DEFAULTS = Object.freeze({
  thresholdDb: -45, // a frame at or above this RMS level counts as speech
  startMs: 60, // speech must last this long to open an utterance
  hangoverMs: 600, // silence must last this long to close it
  maxUtteranceMs: 15000, // an utterance is closed after this long anyway
});

// EnergyVAD turns frame levels into utterance events. push returns one of
// 'silence', 'start' (this frame opens an utterance), 'speech' (inside
// one) or 'end' (this frame closes it).
export class EnergyVAD {
  constructor(frameMs, opts = {}) {
    this.frameMs = frameMs;
    this.set(opts);
    this.reset();
  }

  set(opts) {
    this.opts = { ...VAD_DEFAULTS, ...this.opts, ...opts };
  }

  reset() {
    this.inSpeech = false;
    this.voicedMs = 0; // consecutive speech before an utterance opens
    this.quietMs = 0; // consecutive silence inside an utterance
    this.lengthMs = 0; // length of the open utterance
  }

  push(db) {
    const loud = db >= this.opts.thresholdDb;
    if (!this.inSpeech) {
      this.voicedMs = loud ? this.voicedMs + this.frameMs : 0;
      if (this.voicedMs >= this.opts.startMs) {
        this.inSpeech = true;
        this.quietMs = 0;
        this.lengthMs = this.voicedMs;
        return 'start';
      }
      return 'silence';
    }
    this.lengthMs += this.frameMs;
    this.quietMs = loud ? 0 : this.quietMs + this.frameMs;
    if (this.quietMs >= this.opts.hangoverMs || this.lengthMs >= this.opts.maxUtteranceMs) {
      this.inSpeech = false;
      this.voicedMs = 0;
      return 'end';
    }
    return 'speech';
  }
}
