// The call: the microphone streams to /listen, where a voice session on the server hears the
// audio, decides when the person finished, runs the turn and sends its reply audio back on
// the same socket (see listen_route.py and call/call.py). This script only shows the
// session's state and plays what it sends: it starts no turn and reads nothing off the page.
// It tells the session how much of each reply it played ({played, ms, interrupted}), when the
// audio ran out and when a barge-in stopped it: what the person heard is what is kept.
// Ending the call, or closing the tab, releases the microphone.
(() => {
  const WORKLET = `
    class Pcm16k extends AudioWorkletProcessor {
      constructor() { super(); this.step = sampleRate / 16000; this.pos = 0; this.out = []; this.sum = 0; }
      process(inputs) {
        const input = inputs[0] && inputs[0][0];
        if (!input) return true;
        // resample to 16 kHz by linear interpolation (the browser's rate is 44.1 or 48 kHz)
        while (this.pos < input.length - 1) {
          const i = Math.floor(this.pos), f = this.pos - i;
          const v = input[i] * (1 - f) + input[i + 1] * f;
          this.sum += v * v;
          this.out.push(Math.max(-32768, Math.min(32767, Math.round(v * 32767))));
          this.pos += this.step;
        }
        this.pos -= input.length;
        if (this.out.length >= 1600) {  // 100 ms a message
          const level = Math.sqrt(this.sum / this.out.length);
          this.port.postMessage({ pcm: new Int16Array(this.out).buffer, level });
          this.out = []; this.sum = 0;
        }
        return true;
      }
    }
    registerProcessor('pcm16k', Pcm16k);`;

  const LABELS = {
    off: 'Start a call', connecting: 'Connecting…', listening: 'Listening',
    hearing: 'Hearing you', thinking: 'Thinking', speaking: 'Speaking',
  };
  let live = null;  // {ctx, stream, ws, node, playAt, sources, utt, heard}

  const $ = (sel) => document.querySelector(sel);

  function show(text) {
    const box = $('#handsfree-live');
    if (box) box.textContent = text;
  }

  function setState(state) {
    const root = $('#handsfree');
    if (!root) return;
    root.dataset.state = state;
    const label = root.querySelector('.call-state');
    if (label) label.textContent = LABELS[state] || state;
    const button = root.querySelector('button.call-button');
    if (button) {
      // words only: a font without emoji (many phones' system UI fonts) shows them all
      button.textContent = state === 'off' ? 'Start call' : 'End call';
      button.setAttribute('aria-pressed', state === 'off' ? 'false' : 'true');
    }
  }

  function level(v) {
    const bar = $('#handsfree .call-level > span');
    if (bar) bar.style.width = `${Math.min(100, Math.round(v * 400))}%`;
  }

  function refreshChat() {
    // the turn is stored on the server; the conversation view reloads it from there
    $('#call-refresh')?.click();
  }

  function play(buffer) {
    // a binary frame: the sample rate (uint32 LE), then int16 PCM; queued gap-free
    const rate = new DataView(buffer, 0, 4).getUint32(0, true);
    const pcm = new Int16Array(buffer, 4);
    const audio = live.ctx.createBuffer(1, pcm.length, rate);
    const ch = audio.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
    const src = live.ctx.createBufferSource();
    src.buffer = audio;
    src.connect(live.ctx.destination);
    const at = Math.max(live.ctx.currentTime + 0.02, live.playAt);
    src.start(at);
    live.playAt = at + audio.duration;
    const entry = { at, dur: audio.duration, utt: live.utt };
    live.sources.set(src, entry);
    src.onended = () => {
      if (!live || !live.sources.has(src)) return;  // stopped by silence(), which reported it
      live.sources.delete(src);
      live.heard[entry.utt] = (live.heard[entry.utt] || 0) + entry.dur * 1000;
      const more = [...live.sources.values()].some((e) => e.utt === entry.utt);
      if (!more) report(entry.utt, false);  // all it was sent has played
    };
  }

  function report(utt, interrupted) {
    if (!live || utt === null || live.ws.readyState !== 1) return;
    live.ws.send(JSON.stringify({ played: utt, ms: Math.round(live.heard[utt] || 0), interrupted }));
  }

  function silence() {
    if (!live) return;
    const now = live.ctx.currentTime, cut = new Set();
    live.sources.forEach((e, s) => {
      // what of this sentence had played when it was stopped (none, if it was still queued)
      live.heard[e.utt] = (live.heard[e.utt] || 0) + Math.min(e.dur, Math.max(0, now - e.at)) * 1000;
      cut.add(e.utt);
      try { s.stop(); } catch (err) { /* already ended */ }
    });
    live.sources.clear();
    live.playAt = 0;
    cut.forEach((utt) => report(utt, true));
  }

  function onMessage(e) {
    if (typeof e.data !== 'string') { play(e.data); return; }
    const m = JSON.parse(e.data);
    if (m.kind === 'state') setState(m.state);
    else if (m.kind === 'speech') { silence(); show('🎤 …'); }
    else if (m.kind === 'partial') show(`🎤 ${m.text} …`);
    else if (m.kind === 'turn') { live.muted = false; show(`🎤 ${m.text}`); }
    else if (m.kind === 'reply') { live.utt = m.utterance; show(`🔊 ${m.text}`); }
    else if (m.kind === 'barge') silence();
    else if (m.kind === 'done') refreshChat();
    // noise and echo pass quietly; a speech server's failure is said
    else if (m.kind === 'ignored') show(/failed/.test(m.reason || '') ? `⚠️ ${m.reason}` : '');
    else if (m.kind === 'error') show(`⚠️ ${m.text}`);
    else if (m.kind === 'idle') show(`⏳ ${m.text}`);  // a long quiet: the call ends soon
  }

  async function start() {
    if (live) return;
    setState('connecting');
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
    });
    const ctx = new AudioContext();
    const url = URL.createObjectURL(new Blob([WORKLET], { type: 'application/javascript' }));
    await ctx.audioWorklet.addModule(url);
    const node = new AudioWorkletNode(ctx, 'pcm16k');
    ctx.createMediaStreamSource(stream).connect(node);
    const where = new URL('listen', window.location.href);
    where.protocol = where.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(where);
    ws.binaryType = 'arraybuffer';
    node.port.onmessage = (e) => {
      level(live && live.muted ? 0 : e.data.level);
      // while push-to-talk records, the call hears silence: that recording is the turn (said
      // to the call by the server), and the call must not take the same words as another
      if (ws.readyState === 1) ws.send(live && live.muted ? new ArrayBuffer(e.data.pcm.byteLength) : e.data.pcm);
    };
    ws.onmessage = onMessage;
    ws.onopen = () => setState('listening');  // the session speaks only when it has news
    ws.onclose = () => { if (live && live.ws === ws) stop(); };
    live = { ctx, stream, ws, node, playAt: 0, sources: new Map(), utt: null, heard: {}, muted: false };
    show('Listening…');
  }

  function stop() {
    if (!live) return;
    const { ctx, stream, ws, node } = live;
    silence();
    live = null;
    node.port.onmessage = null;
    stream.getTracks().forEach((t) => t.stop());  // the browser's microphone light goes off
    ctx.close();
    if (ws.readyState <= 1) ws.close();
    show('');
    level(0);
    setState('off');
  }

  // returns whether the call is on: the control shows that, so it never stays on after failing
  async function toggle(on) {
    const mic = window.assistantMicrophone;
    if (on && mic && !mic.usable()) {  // not a secure context: say why, and what to do
      setState('off');
      show(`⚠️ the call cannot start: ${mic.explain(null, true)}`);
      return false;
    }
    try { if (on) await start(); else stop(); }
    catch (e) {
      stop();
      setState('off');
      show(`⚠️ the call could not start: ${mic ? mic.explain(e, true) : (e.message || e)}`);
      return false;
    }
    return on;
  }

  // the page's Stop also stops the call's reply: silenced here at once (and reported as
  // played so far); the reply itself is stopped by the session, from the Stop's own event
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#handsfree button.call-button')) toggle(!live);
    else if (e.target.closest && e.target.closest('#mic button.record-button') && live) {
      live.muted = true;  // until the recording stops, or its turn reaches the call
      clearTimeout(live.unmute);
      live.unmute = setTimeout(() => { if (live) live.muted = false; }, 130000);  // past the longest recording
    }
    else if (e.target.closest && e.target.closest('#mic button.stop-button') && live) live.muted = false;
    else if (e.target.closest && e.target.closest('#stop-button') && live) silence();
  }, true);

  window.assistantHandsFree = { toggle, active: () => live !== null };
  window.addEventListener('pagehide', stop);
})();
