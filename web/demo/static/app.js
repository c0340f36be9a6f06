// The demo page: microphone -> VAD or push-to-talk -> protocol v1 frames,
// and server events -> turn cards; spoken answers (answer.audio) -> Web
// Audio, stopped when the user talks over them.
import { VoicedClient } from './client.js';
import { Capture } from './audio.js';
import { EnergyVAD, VAD_DEFAULTS } from './vad.js';
import { encodeAudioFrame, encodeStreamFrame, validRequestId, ERROR_TEXT, TERMINAL } from './protocol.js';
import { Turn } from './turn.js';
import { Player } from './player.js';
import { Orphans } from './resume.js';

const FRAME_MS = 20; // protocol v1 asks for 20-40 ms frames
const PREROLL_MS = 200; // audio kept from before the VAD opens an utterance
const MAX_TURNS_SHOWN = 20;
// The server's end-of-turn silence in server turn detection (its default
// silenceMs): the end of speech is this long before the turn's deadline
// starts counting.
const SERVER_SILENCE_MS = 500;

const $ = (id) => document.getElementById(id);
const ui = {
  conn: $('conn'),
  clock: $('clock'),
  banner: $('banner'),
  bannerText: $('banner-text'),
  bannerClose: $('banner-close'),
  start: $('start'),
  modeVad: $('mode-vad'),
  modePtt: $('mode-ptt'),
  modeServer: $('mode-server'),
  ptt: $('ptt'),
  level: $('level'),
  levelFill: $('level-fill'),
  levelThreshold: $('level-threshold'),
  vadState: $('vad-state'),
  threshold: $('threshold'),
  thresholdOut: $('threshold-out'),
  hangover: $('hangover'),
  hangoverOut: $('hangover-out'),
  minSpeech: $('min-speech'),
  minSpeechOut: $('min-speech-out'),
  budget: $('budget'),
  budgetOut: $('budget-out'),
  budgetNote: $('budget-note'),
  bargeIn: $('barge-in'),
  speak: $('speak'),
  playback: $('playback'),
  processing: $('processing'),
  turns: $('turns'),
  empty: $('turns-empty'),
  announce: $('announce'),
};

// --- connection -------------------------------------------------------

function sessionURL() {
  const u = new URL('/v1/session', location.href);
  u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  // A server that requires tokens accepts them in the query: pass on the
  // page's own ?access_token= so that a shared link works.
  const tok = new URLSearchParams(location.search).get('access_token');
  if (tok) u.searchParams.set('access_token', tok);
  u.hash = '';
  return u.toString();
}

const client = new VoicedClient(sessionURL());
let maxBudgetMs = 1700;
let sessionRate = 16000;
let speechInfo = null; // session.ready's speech: the server's synthesiser

client.addEventListener('status', (ev) => {
  const s = ev.detail;
  ui.conn.dataset.state = s.state;
  switch (s.state) {
    case 'connecting':
      ui.conn.textContent = s.attempt ? `Reconnecting (attempt ${s.attempt})…` : 'Connecting…';
      break;
    case 'open':
      ui.conn.textContent = s.resumed ? 'Connected (resumed)' : 'Connected';
      ui.conn.dataset.resumed = String(!!s.resumed);
      if (ui.banner.dataset.kind === 'connection') hideBanner();
      break;
    case 'draining':
      ui.conn.textContent = 'Server restarting: turns in flight finish, then the page reconnects';
      break;
    case 'waiting':
      ui.conn.textContent = `Disconnected: retrying in ${(s.delayMs / 1000).toFixed(1)} s`;
      if (s.access) {
        // Retrying cannot help until the page's URL has a token voiced
        // takes (-auth-token or VOICED_TOKENS).
        showBanner('connection', `voiced refused the session: ${s.reason}. This server needs an access token: open the page as ${location.pathname}?access_token=TOKEN. Retrying in ${(s.delayMs / 1000).toFixed(1)} s (attempt ${s.attempt}).`);
      } else {
        showBanner('connection', `Connection to voiced lost: ${s.reason}. Reconnecting automatically in ${(s.delayMs / 1000).toFixed(1)} s (attempt ${s.attempt}).`);
      }
      // With a resume token, the turns in flight wait for the terminals
      // the resumed session replays (see resume.js).
      for (const t of turns.values()) {
        if (!s.resumable) t.onLost();
        else if (!t.terminal) {
          orphans.hold(t);
          t.onReconnecting();
        }
      }
      if (!s.resumable) orphans.loseAll();
      // No more audio comes on the lost connection: what came plays out.
      player.end(player.requestId);
      endCaptureTurn();
      break;
    case 'closed':
      ui.conn.textContent = 'Closed';
      break;
  }
});

const orphans = new Orphans();
client.addEventListener('replayed', (ev) => orphans.onReplayed(ev.detail.serverNow));

client.addEventListener('ready', (ev) => {
  const r = ev.detail;
  // "resumed": false with the same conversation (the server's store was
  // away) still replays and hands over the terminals of this instance.
  orphans.onReady(client.continues, r.maxBudgetMs);
  ui.conn.title = `session ${r.sessionId}, conversation ${r.conversationId || '?'}${r.instance ? ` on instance ${r.instance}` : ''}`;
  maxBudgetMs = r.maxBudgetMs;
  sessionRate = r.audio.sampleRate;
  speechInfo = r.speech || null;
  ui.speak.disabled = !speechInfo;
  ui.speak.parentElement.title = speechInfo ? `${speechInfo.engine}, voice ${speechInfo.voices[0]}` : 'This server has no speech synthesiser.';
  syncSupersede();
  syncSpeech();
  serverTold = false; // a new session starts with the client's turns
  syncTurnDetection();
  updateBudget();
  if (capture.running && capture.targetRate !== sessionRate) {
    showBanner('error', `The server expects ${sessionRate} Hz audio; restart the microphone.`);
  }
});

client.addEventListener('clock', (ev) => {
  const { offset, rtt } = ev.detail;
  ui.clock.textContent = Number.isFinite(rtt)
    ? `clock offset ${Math.round(offset)} ms ± ${Math.ceil(rtt / 2)} ms (rtt ${Math.round(rtt)} ms)`
    : `clock offset ${Math.round(offset)} ms (aligning…)`;
});

client.addEventListener('message', (ev) => onServerMessage(ev.detail));
client.addEventListener('audio', (ev) => onAnswerAudio(ev.detail));

function syncSupersede() {
  client.sendJSON({ type: 'session.update', supersede: ui.bargeIn.checked });
}

// Server turn detection: the page streams every frame with only a
// sequence number and the server finds the turns. Every update restarts
// the stream at seq 0.
let streamSeq = 0;
let serverTold = false; // this session is in server turn mode

function serverTurns() {
  return ui.modeServer.checked;
}

function syncTurnDetection() {
  streamSeq = 0;
  if (serverTurns()) {
    serverTold = client.sendJSON({ type: 'session.update', turnDetection: {
      mode: 'server', interrupt: ui.bargeIn.checked, budgetMs: Number(ui.budget.value),
      silenceMs: SERVER_SILENCE_MS,
    } });
  } else if (serverTold) {
    client.sendJSON({ type: 'session.update', turnDetection: { mode: 'client' } });
    serverTold = false;
  }
}

// SPEECH_RATE is the rate the page asks for: the embedded voices' own, so
// the server does not resample; Web Audio converts it for the device.
const SPEECH_RATE = 16000;

function syncSpeech() {
  if (!speechInfo) return;
  if (!ui.speak.checked) {
    stopPlayback();
    client.sendJSON({ type: 'session.update', speech: null });
    return;
  }
  const rate = speechInfo.sampleRates.includes(SPEECH_RATE) ? SPEECH_RATE : speechInfo.sampleRates[0];
  client.sendJSON({ type: 'session.update', speech: { voice: speechInfo.voices[0], sampleRate: rate, encoding: 'binary' } });
}

// --- spoken answers ---------------------------------------------------

const player = new Player();
let playbackTicker = null;

function onAnswerAudio({ header, pcm }) {
  const turn = turns.get(header.requestId);
  // All of a request's audio comes before its terminal message.
  if (!turn || turn.terminal) {
    console.warn('voiced: answer.audio for a request with no turn in flight', header);
    return;
  }
  turn.onAudio(header, pcm.length);
  if (turn.silenced || !ui.speak.checked) return;
  // Another answer's audio (two turns in flight) cuts the one playing
  // short: report it as a barge-in is, and drop the rest of it, which
  // would otherwise cut this one in turn.
  if (player.requestId !== null && player.requestId !== header.requestId) stopPlayback();
  player.push(header.requestId, pcm, header.sampleRate, header.final);
  document.body.dataset.playing = 'true';
  playbackTicker ??= setInterval(showPlayback, 100);
}

// showPlayback shows how much audio has been heard; the browser test
// reads the counter from body's data-played-ms.
function showPlayback() {
  const heard = player.totalHeardMs;
  document.body.dataset.playedMs = String(heard);
  const playing = player.playing;
  document.body.dataset.playing = String(playing);
  ui.playback.textContent = playing ? `Speaking… (${(heard / 1000).toFixed(1)} s heard in all)` : '';
  if (!playing) {
    clearInterval(playbackTicker);
    playbackTicker = null;
    player.stop(); // the answer ended: keep its heard time in the total
  }
}

// stopPlayback silences the answer being spoken (barge-in, Escape) and
// tells the server how much of it was heard, so that the conversation
// remembers only that.
function stopPlayback() {
  const r = player.stop();
  if (!r) return;
  // The rest of its audio is dropped. The mark is the turn's, not its
  // id's: a fresh session numbers its server turns from t-1 again.
  const turn = turns.get(r.requestId);
  if (turn) turn.silenced = true;
  showPlayback();
  if (r.complete) return;
  // Only the session that ran the request knows it: another one (after a
  // reconnect) would answer the report with bad_message.
  if (!turn || !client.ready || turn.sessionId !== client.ready.sessionId) return;
  client.sendJSON({ type: 'playback', requestId: r.requestId, playedMs: r.playedMs });
  turn.onPlaybackStopped(r.playedMs);
  announce(`Stopped speaking after ${(r.playedMs / 1000).toFixed(1)} s.`);
}

// --- turns ------------------------------------------------------------

const turns = new Map(); // requestId -> Turn
let turnCounter = 0;
const idPrefix = Math.random().toString(36).slice(2, 8);

function onServerMessage(msg) {
  if (!msg.requestId) {
    if (msg.type === 'error') {
      showBanner('error', `Server error ${msg.code}: ${ERROR_TEXT[msg.code] || ''} ${msg.message}`);
    }
    return;
  }
  if (msg.type === 'input.speech_started') {
    // A turn the server found: it names it.
    // The user talks: the answer being spoken stops at once (with
    // barge-in on, the server also ends the turn still in flight).
    stopPlayback();
    newTurn(msg.requestId).onSpeechStarted(msg);
    return;
  }
  const turn = turns.get(msg.requestId);
  // Nothing of a request follows its terminal message. Either would be a
  // server bug, unless the page gave the turn up as lost before its
  // terminal came back from a resumed session.
  if (!turn || turn.terminal) {
    if (turn?.card.dataset.state !== 'lost') console.warn('voiced: message for a request with no turn in flight', msg);
    return;
  }
  switch (msg.type) {
    case 'input.speech_stopped':
      turn.onSpeechStopped(msg, SERVER_SILENCE_MS);
      // The server set the turn's deadline when it detected the end of
      // speech, just before this message: at most now plus the budget. A
      // turn held over a lost connection waits for its terminal until then
      // (plus the grace), as one the page ended itself does.
      turn.deadlineAt = client.clock.serverNow() + Math.min(Number(ui.budget.value), maxBudgetMs);
      break;
    case 'transcript':
      turn.onTranscript(msg);
      break;
    case 'intent':
      turn.onIntent(msg);
      break;
    case 'retrieval':
      turn.onRetrieval(msg);
      break;
    case 'answer.delta':
      turn.onAnswerDelta(msg);
      break;
    case 'result': {
      player.end(msg.requestId);
      const answer = turn.onResult(msg);
      announce(`Turn ${turn.n} answered${msg.degraded ? ' (degraded)' : ''}: ${answer}`);
      break;
    }
    case 'error':
      // Cancelled, replaced, interrupted or failed: its answer is not
      // spoken on (and no final audio chunk will come).
      if (player.requestId === msg.requestId) {
        player.stop();
        showPlayback();
      }
      turn.onError(msg);
      announce(`Turn ${turn.n} ${msg.code === 'cancelled' ? 'cancelled' : `failed: ${ERROR_TEXT[msg.code] || msg.code}`}`);
      break;
  }
  if (TERMINAL.has(msg.type)) updateEmpty();
}

// newTurn shows a new turn: the page's own request, or, with serverId,
// one the server found.
function newTurn(serverId) {
  turnCounter++;
  const id = serverId ?? `${idPrefix}-${turnCounter}`;
  if (!validRequestId(id)) throw new Error(`bad request id ${id}`);
  const turn = new Turn(id, turnCounter, { onCancel: cancelTurn });
  turn.askedBudgetMs = Number(ui.budget.value);
  turn.sessionId = client.ready?.sessionId;
  turns.set(id, turn);
  ui.turns.prepend(turn.card);
  while (ui.turns.children.length > MAX_TURNS_SHOWN) {
    const last = ui.turns.lastElementChild;
    // A fresh session's server turns reuse ids (t-1, ...) of earlier
    // sessions' cards: drop the id only if it is still this card's.
    if (turns.get(last.dataset.requestId)?.card === last) turns.delete(last.dataset.requestId);
    last.remove();
  }
  updateEmpty();
  return turn;
}

function cancelTurn(turn) {
  if (turn.terminal || turn.cancelRequested) return;
  // A turn of a lost connection cannot be cancelled from another session
  // (the server would not know its id): the page gives it up.
  if (orphans.has(turn.id)) {
    orphans.lose(turn.id);
    return;
  }
  turn.requestCancel();
  // The server answers with the turn's terminal message: error
  // "cancelled", or the result if it was already on its way.
  if (!client.sendJSON({ type: 'cancel', requestId: turn.id })) turn.onLost();
}

function latestInFlight() {
  let best = null;
  for (const t of turns.values()) if (t.inFlight && (!best || t.n > best.n)) best = t;
  return best;
}

function updateEmpty() {
  ui.empty.hidden = turns.size > 0;
}

// --- capture ----------------------------------------------------------

const vad = new EnergyVAD(FRAME_MS);
const preroll = []; // the last PREROLL_MS of frames, for the VAD's start
let current = null; // the turn whose utterance is being captured
let pttHeld = false;

const capture = new Capture({
  targetRate: 16000,
  frameMs: FRAME_MS,
  onFrame,
  onEnded: () => {
    showBanner('error', 'The microphone stopped (unplugged or revoked). Press Start to try again.');
    micStopped();
  },
});

function onFrame({ pcm, db }) {
  showLevel(db);
  preroll.push(pcm);
  const keep = Math.ceil((PREROLL_MS + vad.opts.startMs) / FRAME_MS);
  while (preroll.length > keep) preroll.shift();

  if (serverTurns()) {
    if (serverTold && client.open && client.sendBinary(encodeStreamFrame(streamSeq, pcm))) streamSeq++;
    return;
  }
  if (ui.modePtt.checked) {
    if (pttHeld && current) sendFrame(current, pcm, false);
    return;
  }
  // Without echo cancellation the microphone hears the page's own spoken
  // answer: unless barge-in is on (use headphones), do not open a turn on it.
  const selfHeard = !capture.processing && !ui.bargeIn.checked && player.playing;
  const ev = vad.push(selfHeard && !current ? -Infinity : db);
  ui.vadState.textContent = ev === 'silence' ? 'silence' : 'speech';
  ui.level.dataset.speech = String(ev !== 'silence' && ev !== 'end');
  switch (ev) {
    case 'start':
      beginTurn(preroll.slice());
      break;
    case 'speech':
      if (current) sendFrame(current, pcm, false);
      break;
    case 'end':
      if (current) sendFrame(current, pcm, true);
      endCaptureTurn();
      break;
  }
}

function beginTurn(frames) {
  if (!client.open) {
    showBanner('connection', client.draining
      ? 'voiced is restarting: that utterance was not sent. The page reconnects by itself.'
      : 'Not connected to voiced: that utterance was not sent.');
    return;
  }
  // The user talks: the answer being spoken stops at once.
  stopPlayback();
  current = newTurn();
  for (const pcm of frames) sendFrame(current, pcm, false);
}

// sendFrame sends one frame of turn's utterance. Once the turn has its
// terminal message (cancelled, replaced, deadline) the rest of the
// utterance is dropped: the server would ignore it anyway.
function sendFrame(turn, pcm, final) {
  if (turn.terminal) return;
  // The deadline slides with the speech: it is the budget from now on
  // the server's clock, so the final frame's deadline is the budget from
  // the end of the utterance.
  turn.sentAt = client.clock.serverNow();
  turn.deadlineAt = turn.sentAt + Number(ui.budget.value);
  const frame = encodeAudioFrame({
    requestId: turn.id,
    deadlineAt: turn.deadlineAt,
    seq: turn.seq,
    final,
    // Declared only when it differs from the session's (a server with
    // another default rate, after a reconnect).
    sampleRate: capture.targetRate !== sessionRate ? capture.targetRate : undefined,
  }, pcm);
  if (!client.sendBinary(frame)) {
    turn.onLost();
    return;
  }
  turn.seq++;
  turn.card.dataset.frames = String(turn.seq);
  if (final) turn.finalSent();
}

function endCaptureTurn() {
  current = null;
}

function pttDown() {
  if (pttHeld || !capture.running || !ui.modePtt.checked) return;
  pttHeld = true;
  ui.ptt.setAttribute('aria-pressed', 'true');
  ui.ptt.textContent = 'Talking… release to send';
  beginTurn(preroll.slice(-Math.ceil(100 / FRAME_MS)));
}

function pttUp() {
  if (!pttHeld) return;
  pttHeld = false;
  ui.ptt.setAttribute('aria-pressed', 'false');
  ui.ptt.textContent = 'Hold to talk';
  if (current) {
    // The last frame carries final; an empty PCM payload is a valid frame.
    sendFrame(current, new Int16Array(0), true);
    endCaptureTurn();
  }
}

async function toggleMic() {
  if (capture.running) {
    micStopped();
    return;
  }
  ui.start.disabled = true;
  ui.start.textContent = 'Starting…';
  // Browsers start audio output only in a user gesture: this click.
  player.unlock();
  try {
    capture.processing = ui.processing.checked;
    capture.targetRate = sessionRate;
    await capture.start();
    hideBanner('mic');
    ui.start.textContent = 'Stop microphone';
    ui.start.setAttribute('aria-pressed', 'true');
    document.body.dataset.mic = 'on';
    updateMode();
  } catch (err) {
    showBanner('mic', err.message);
    ui.start.textContent = 'Start microphone';
    document.body.dataset.mic = 'error';
  } finally {
    ui.start.disabled = false;
  }
}

function micStopped() {
  capture.stop();
  pttUp();
  if (current && !current.terminal) {
    // Close the utterance so the server is not left waiting for it.
    sendFrame(current, new Int16Array(0), true);
  }
  endCaptureTurn();
  vad.reset();
  ui.start.textContent = 'Start microphone';
  ui.start.setAttribute('aria-pressed', 'false');
  document.body.dataset.mic = 'off';
  showLevel(-Infinity);
  updateMode();
}

function updateMode() {
  const ptt = ui.modePtt.checked;
  ui.ptt.disabled = !(ptt && capture.running);
  ui.vadState.hidden = ptt || serverTurns();
  if (serverTurns() !== serverTold) {
    // Close an utterance of the page's own first.
    if (current) {
      sendFrame(current, new Int16Array(0), true);
      endCaptureTurn();
      vad.reset();
    }
    syncTurnDetection();
  }
  if (!ptt) pttUp();
  else if (current) {
    sendFrame(current, new Int16Array(0), true);
    endCaptureTurn();
    vad.reset();
  }
}

// --- settings ---------------------------------------------------------

function levelPct(db) {
  // The meter spans -80 to 0 dBFS.
  return Math.max(0, Math.min(100, ((db + 80) / 80) * 100));
}

function showLevel(db) {
  ui.levelFill.style.width = `${levelPct(db)}%`;
  ui.level.setAttribute('aria-valuenow', String(Number.isFinite(db) ? Math.round(db) : -80));
}

function updateVad() {
  const opts = {
    thresholdDb: Number(ui.threshold.value),
    hangoverMs: Number(ui.hangover.value),
    startMs: Number(ui.minSpeech.value),
  };
  vad.set(opts);
  ui.thresholdOut.textContent = `${opts.thresholdDb} dBFS`;
  ui.hangoverOut.textContent = `${opts.hangoverMs} ms`;
  ui.minSpeechOut.textContent = `${opts.startMs} ms`;
  ui.levelThreshold.style.left = `${levelPct(opts.thresholdDb)}%`;
}

function updateBudget() {
  const ms = Number(ui.budget.value);
  ui.budgetOut.textContent = `${(ms / 1000).toFixed(2)} s`;
  ui.budgetNote.textContent = ms > maxBudgetMs
    ? `The server caps every budget at ${maxBudgetMs} ms after the end of speech.`
    : '';
}

// --- messages ---------------------------------------------------------

function showBanner(kind, text) {
  ui.banner.dataset.kind = kind;
  ui.bannerText.textContent = text;
  ui.banner.hidden = false;
}

function hideBanner(kind) {
  if (kind && ui.banner.dataset.kind !== kind) return;
  ui.banner.hidden = true;
  ui.banner.dataset.kind = '';
}

function announce(text) {
  ui.announce.textContent = text;
}

// --- wiring -----------------------------------------------------------

function init() {
  ui.threshold.value = String(VAD_DEFAULTS.thresholdDb);
  ui.hangover.value = String(VAD_DEFAULTS.hangoverMs);
  ui.minSpeech.value = String(VAD_DEFAULTS.startMs);
  updateVad();
  updateBudget();
  ui.speak.disabled = true; // until the server says it can speak

  ui.start.addEventListener('click', toggleMic);
  ui.modeVad.addEventListener('change', updateMode);
  ui.modePtt.addEventListener('change', updateMode);
  ui.modeServer.addEventListener('change', updateMode);
  for (const r of [ui.threshold, ui.hangover, ui.minSpeech]) r.addEventListener('input', updateVad);
  ui.budget.addEventListener('input', updateBudget);
  ui.bargeIn.addEventListener('change', () => {
    syncSupersede();
    if (serverTurns()) syncTurnDetection();
  });
  ui.budget.addEventListener('change', () => {
    if (serverTurns()) syncTurnDetection();
  });
  ui.speak.addEventListener('change', syncSpeech);
  ui.bannerClose.addEventListener('click', () => hideBanner());

  // Push-to-talk: hold with the pointer, or with Space/Enter when focused.
  ui.ptt.addEventListener('pointerdown', (e) => {
    ui.ptt.setPointerCapture?.(e.pointerId);
    pttDown();
  });
  ui.ptt.addEventListener('pointerup', pttUp);
  ui.ptt.addEventListener('pointercancel', pttUp);
  ui.ptt.addEventListener('keydown', (e) => {
    if ((e.key === ' ' || e.key === 'Enter') && !e.repeat) {
      e.preventDefault();
      pttDown();
    }
  });
  ui.ptt.addEventListener('keyup', (e) => {
    if (e.key === ' ' || e.key === 'Enter') {
      e.preventDefault();
      pttUp();
    }
  });
  ui.ptt.addEventListener('blur', pttUp);
  ui.ptt.addEventListener('click', (e) => e.preventDefault());

  // Escape stops the answer being spoken and cancels the newest turn in
  // flight, from anywhere on the page.
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') {
      stopPlayback();
      const t = latestInFlight();
      if (t) cancelTurn(t);
    }
  });

  updateEmpty();
  updateMode();
  client.start();
}

init();
