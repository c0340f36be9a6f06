// One turn of the conversation: a request from its first frame to its one
// terminal message, and the card that shows it.
import { ERROR_TEXT, DEGRADATION_TEXT } from './protocol.js';
import { renderTimeline } from './timeline.js';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

// silenceEnded is the silence after its speech on which a server turn
// ended (input.speech_stopped): decidedMs - audioEndMs, which is longer
// than silenceMs when the server held the turn for unfinished words
// (holdMs); silenceMs from a server that does not say.
export function silenceEnded(msg, silenceMs) {
  if (typeof msg.decidedMs !== 'number' || typeof msg.audioEndMs !== 'number') return silenceMs;
  return Math.max(msg.decidedMs - msg.audioEndMs, 0);
}

// foundArticles keeps the passages worth showing: a score above 0, one
// per title, best first as retrieval ranks them.
export function foundArticles(passages) {
  const seen = new Set();
  const out = [];
  for (const p of passages || []) {
    if (!(p.score > 0) || seen.has(p.title)) continue;
    seen.add(p.title);
    out.push(p);
  }
  return out;
}

function labelled(label, body) {
  const row = el('div', 'field');
  row.append(el('span', 'field-label', label), body);
  return row;
}

// States: listening (frames streaming), thinking (final frame sent),
// done (result), error (error terminal), lost (connection gone first, and
// not resumed in time). While the page reconnects, a turn keeps its state
// and says it waits (data-held).
export class Turn {
  constructor(requestId, n, { onCancel }) {
    this.id = requestId;
    this.n = n;
    this.seq = 0;
    this.terminal = false;
    this.cancelRequested = false;
    this.silenced = false; // the user stopped its spoken answer
    this.answerText = '';
    this.startedAt = performance.now();
    this.finalSentAt = null;
    this.deadlineAt = undefined; // the last frame's, on the server's clock

    const card = el('article', 'turn');
    card.dataset.requestId = requestId;
    card.setAttribute('aria-labelledby', `turn-h-${n}`);
    const head = el('header', 'turn-head');
    const h = el('h3', null, `Turn ${n}`);
    h.id = `turn-h-${n}`;
    this.state = el('span', 'badge');
    this.cancelBtn = el('button', 'cancel', 'Cancel');
    this.cancelBtn.type = 'button';
    this.cancelBtn.setAttribute('aria-label', `Cancel turn ${n}`);
    this.cancelBtn.addEventListener('click', () => onCancel(this));
    head.append(h, el('code', 'rid', requestId), this.state, this.cancelBtn);

    this.partial = el('span', 'partial');
    this.final = el('span', 'final-transcript');
    const tr = el('p', 'transcript');
    tr.append(this.final, this.partial);
    this.intent = el('span', 'intent', '…');
    this.articles = el('ol', 'articles');
    this.answer = el('p', 'answer');
    this.answer.setAttribute('aria-live', 'off');
    this.meta = el('div', 'meta');
    this.timelineBox = el('div', 'timeline-box');

    card.append(
      head,
      labelled('You said', tr),
      labelled('Intent', this.intent),
      labelled('Sources', this.articles),
      labelled('Answer', this.answer),
      this.timelineBox,
      this.meta,
    );
    this.card = card;
    this.setState('listening', 'listening');
  }

  get inFlight() {
    return !this.terminal;
  }

  setState(state, text) {
    this.card.dataset.state = state;
    this.state.textContent = text;
    this.state.className = `badge badge-${state}`;
    this.cancelBtn.hidden = this.terminal;
  }

  // onSpeechStarted and onSpeechStopped record where the server judged the
  // turn's speech to start and end, in ms of the page's audio stream
  // (server turn detection).
  onSpeechStarted(msg) {
    this.speech = { startMs: msg.audioStartMs };
    this.card.dataset.server = 'true';
    this.card.dataset.speechStartMs = String(msg.audioStartMs);
    this.setState('listening', 'speech detected');
  }

  onSpeechStopped(msg, silenceMs) {
    if (!this.speech) return;
    this.speech.endMs = msg.audioEndMs;
    this.speech.silenceMs = silenceEnded(msg, silenceMs);
    this.card.dataset.speechEndMs = String(msg.audioEndMs);
    this.finalSent();
  }

  finalSent() {
    this.finalSentAt = performance.now();
    if (!this.terminal) this.setState('thinking', 'thinking');
  }

  onTranscript(msg) {
    if (msg.final) {
      this.final.textContent = msg.text;
      this.partial.textContent = '';
      this.card.dataset.transcript = msg.text;
    } else {
      this.partial.textContent = msg.text;
      this.card.dataset.partials = String(Number(this.card.dataset.partials || 0) + 1);
    }
  }

  // onAudio counts a chunk of the spoken answer.
  onAudio(header, samples) {
    const d = this.card.dataset;
    d.audioChunks = String(Number(d.audioChunks || 0) + 1);
    d.audioSamples = String(Number(d.audioSamples || 0) + samples);
    if (header.final) d.audioFinal = 'true';
  }

  // onPlaybackStopped notes that the user stopped the spoken answer after
  // playedMs: the conversation keeps only the words heard by then.
  onPlaybackStopped(playedMs) {
    this.card.dataset.heardMs = String(playedMs);
    this.heard = el('p', 'heard', `Stopped after ${(playedMs / 1000).toFixed(1)} s of speech: the conversation remembers only the words heard.`);
    this.meta.append(this.heard);
  }

  onIntent(msg) {
    this.intent.textContent = `${msg.name} (${Math.round(msg.confidence * 100)}%)`;
    this.card.dataset.intent = msg.name;
  }

  // onRetrieval shows what retrieval found, until the result names the
  // sources the answer used: articles that matched nothing (score 0) and
  // repeats of a title are left out.
  onRetrieval(msg) {
    this.articles.replaceChildren();
    this.articles.dataset.kind = 'found';
    for (const p of foundArticles(msg.passages)) {
      const li = el('li', 'found');
      li.append(el('span', 'article-title', p.title), el('span', 'article-meta', ` found · score ${p.score.toFixed(2)}`));
      this.articles.append(li);
    }
    if (this.articles.children.length === 0) this.articles.append(el('li', 'muted', 'none found'));
  }

  // showSources lists the passages the answer was built from.
  showSources(sources) {
    this.articles.replaceChildren();
    this.articles.dataset.kind = 'sources';
    for (const s of sources || []) {
      const li = el('li', 'source');
      li.append(el('span', 'article-title', s.title), el('span', 'article-meta', ` ${s.passage}`));
      this.articles.append(li);
    }
    if (this.articles.children.length === 0) this.articles.append(el('li', 'muted', 'none: this answer cites no article'));
  }

  onAnswerDelta(msg) {
    this.answerText += msg.text;
    this.card.dataset.deltas = String(Number(this.card.dataset.deltas || 0) + 1);
    this.card.dataset.streamed = this.answerText;
    this.answer.textContent = this.answerText;
    this.answer.classList.add('streaming');
  }

  // onResult ends the turn with its result; it returns the answer text.
  onResult(msg) {
    this.terminal = true;
    this.answer.classList.remove('streaming');
    if (msg.transcript != null && !this.final.textContent) this.onTranscript({ text: msg.transcript, final: true });
    this.partial.textContent = '';
    if (msg.intent) this.onIntent(msg.intent);
    else this.intent.textContent = 'unknown';
    this.answerText = msg.answer;
    this.answer.textContent = msg.answer;
    this.showSources(msg.sources);
    this.card.dataset.answer = msg.answer;
    this.timelineBox.replaceChildren(renderTimeline(msg, this.speech));

    this.meta.replaceChildren();
    if (msg.provider) this.meta.append(labelled('Provider', el('span', 'provider', msg.provider)));
    const b = msg.budget || {};
    if (b.effectiveBudgetMs != null) {
      const capped = b.effectiveBudgetMs < (this.askedBudgetMs ?? 0) - 5;
      this.meta.append(labelled('Budget', el('span', null,
        `${b.effectiveBudgetMs} ms${capped ? ` (asked ${this.askedBudgetMs} ms; the server caps at ${b.maxBudgetMs} ms)` : ''}`)));
    }
    const sp = msg.speech;
    if (sp) {
      this.meta.append(labelled('Speech', el('span', null, sp.audioMs > 0
        ? `${(sp.audioMs / 1000).toFixed(1)} s of ${sp.voice} (${sp.engine}), ${sp.spokenSentences} of ${sp.sentences} sentences; first audio ${sp.firstAudioMs} ms after the end of speech`
        : 'not spoken (no time for the first sentence)')));
      if (sp.audioMs > 0) this.card.dataset.firstAudioMs = String(sp.firstAudioMs);
    }
    if (this.heard) this.meta.append(this.heard);
    if (this.finalSentAt != null) {
      this.meta.append(labelled('Round trip', el('span', null,
        `${Math.round(performance.now() - this.finalSentAt)} ms from the final frame to the result, as seen by this page`)));
    }
    if (msg.degraded) {
      const box = el('div', 'degraded');
      box.append(el('strong', null, 'Degraded answer:'));
      const ul = el('ul');
      for (const r of msg.degradation || []) {
        const li = el('li');
        li.append(el('code', null, r), document.createTextNode(DEGRADATION_TEXT[r] ? ` ${DEGRADATION_TEXT[r]}` : ''));
        ul.append(li);
      }
      box.append(ul);
      this.meta.append(box);
      this.card.dataset.degraded = 'true';
    }
    this.setState('done', msg.degraded ? 'answered (degraded)' : 'answered');
    return msg.answer;
  }

  onError(msg) {
    this.terminal = true;
    this.answer.classList.remove('streaming');
    this.partial.textContent = '';
    this.card.dataset.code = msg.code;
    const box = el('p', 'turn-error');
    box.append(el('code', null, msg.code), document.createTextNode(` ${ERROR_TEXT[msg.code] || ''} ${msg.message || ''}`));
    this.meta.replaceChildren(box);
    this.setState('error', msg.code === 'cancelled' ? 'cancelled' : msg.code === 'replaced' ? 'replaced' : 'failed');
  }

  // onReconnecting marks a turn whose connection is gone while the page
  // resumes: its terminal message may still come.
  onReconnecting() {
    if (this.terminal) return;
    this.card.dataset.held = 'true';
    this.state.textContent = `${this.card.dataset.state}: waiting for the connection`;
  }

  // onLost ends the turn locally: the connection went before its terminal
  // message, so none will come.
  onLost() {
    if (this.terminal) return;
    this.terminal = true;
    this.answer.classList.remove('streaming');
    this.meta.replaceChildren(el('p', 'turn-error', 'The connection was lost before this turn ended.'));
    this.setState('lost', 'connection lost');
  }

  requestCancel() {
    this.cancelRequested = true;
    this.cancelBtn.disabled = true;
    this.cancelBtn.textContent = 'Cancelling…';
  }
}
