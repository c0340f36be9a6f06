// The capture AudioWorklet: it runs on the audio thread, resamples the
// microphone to the session's rate, converts to PCM16 and posts fixed-size
// frames (with their level, for the VAD and the meter) to the page. Doing
// this here keeps the main thread free and the frames evenly timed.
import { Resampler, toPCM16, levelDb, Framer } from './resample.js';

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { targetRate, frameMs } = options.processorOptions;
    // sampleRate is the AudioContext's rate, a global of the worklet scope.
    this.resampler = new Resampler(sampleRate, targetRate);
    this.framer = new Framer(Math.round((targetRate * frameMs) / 1000));
  }

  process(inputs) {
    const input = inputs[0];
    if (input && input.length > 0) {
      let mono = input[0];
      if (input.length > 1) {
        // Mix down: browsers may hand a stereo track even when mono was
        // asked for.
        mono = new Float32Array(input[0].length);
        for (const ch of input) for (let i = 0; i < ch.length; i++) mono[i] += ch[i] / input.length;
      }
      const pcm = toPCM16(this.resampler.process(mono));
      for (const frame of this.framer.push(pcm)) {
        this.port.postMessage({ pcm: frame, db: levelDb(frame) }, [frame.buffer]);
      }
    }
    return true; // keep running until the node is disconnected
  }
}

registerProcessor('voiced-capture', CaptureProcessor);
