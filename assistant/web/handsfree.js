// Hands-free: the microphone stays open and streams to /listen (see listen_route.py).
// The server detects each utterance; this script shows its transcript as it grows, stops the
// reply when the person speaks over it (barge-in), and starts the turn when the server says
// the utterance ended. Turning hands-free off, or closing the tab, releases the microphone.
(() => {
  const WORKLET = `
    class Pcm16k extends AudioWorkletProcessor {
      constructor() { super(); this.step = sampleRate / 16000; this.pos = 0; this.out = []; }
      process(inputs) {
        const input = inputs[0] && inputs[0][0];
        if (!input) return true;
        // resample to 16 kHz by linear interpolation (the browser's rate is 44.1 or 48 kHz)
        while (this.pos < input.length - 1) {
          const i = Math.floor(this.pos), f = this.pos - i;
          const v = input[i] * (1 - f) + input[i + 1] * f;
          this.out.push(Math.max(-32768, Math.min(32767, Math.round(v * 32767))));
          this.pos += this.step;
        }
        this.pos -= input.length;
        if (this.out.length >= 1600) {  // 100 ms a message
          this.port.postMessage(new Int16Array(this.out).buffer);
          this.out = [];
        }
        return true;
      }
    }
    registerProcessor('pcm16k', Pcm16k);`;

  let live = null;  // {ctx, stream, ws, node}

  function show(text) {
    const box = document.querySelector('#handsfree-live');
    if (box) box.textContent = text;
  }

  function replyAudios() {
    return Array.from(document.querySelectorAll('#reply-audio audio, audio'));
  }

  function bargeIn() {
    replyAudios().forEach((a) => a.pause());
    document.querySelector('#stop-button')?.click();  // cancels generation and speech
  }

  function startTurn(key) {
    const box = document.querySelector('#handsfree-key textarea, #handsfree-key input');
    if (!box) return;
    box.value = key;
    box.dispatchEvent(new Event('input', { bubbles: true }));
  }

  function lastReplyText() {
    const bots = document.querySelectorAll('#chatbot [data-testid=bot]');
    return bots.length ? bots[bots.length - 1].innerText : '';
  }

  function watchPlayback(ws) {
    // the echo guard: the server hears what is being played, and ignores it
    const said = (playing) => {
      if (ws.readyState === 1) ws.send(JSON.stringify({ playing, text: playing ? lastReplyText() : null }));
    };
    const on = (e) => { if (e.target.tagName === 'AUDIO') said(true); };
    const off = (e) => { if (e.target.tagName === 'AUDIO') said(replyAudios().some((a) => !a.paused)); };
    document.addEventListener('playing', on, true);
    document.addEventListener('pause', off, true);
    document.addEventListener('ended', off, true);
    return () => {
      document.removeEventListener('playing', on, true);
      document.removeEventListener('pause', off, true);
      document.removeEventListener('ended', off, true);
    };
  }

  async function start() {
    if (live) return;
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
    node.port.onmessage = (e) => { if (ws.readyState === 1) ws.send(e.data); };
    const unwatch = watchPlayback(ws);
    ws.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.kind === 'speech') { bargeIn(); show('🎤 …'); }
      else if (m.kind === 'partial') show(`🎤 ${m.text} …`);
      else if (m.kind === 'final') { show(''); startTurn(m.key); }
      else if (m.kind === 'ignored') show('');
      else if (m.kind === 'error') show(`⚠️ ${m.text}`);
    };
    ws.onclose = () => { if (live && live.ws === ws) stop(); };
    live = { ctx, stream, ws, node, unwatch };
    show('Listening…');
  }

  function stop() {
    if (!live) return;
    const { ctx, stream, ws, node, unwatch } = live;
    live = null;
    unwatch();
    node.port.onmessage = null;
    stream.getTracks().forEach((t) => t.stop());  // the browser's microphone light goes off
    ctx.close();
    if (ws.readyState <= 1) ws.close();
    show('');
  }

  window.assistantHandsFree = {
    // returns whether hands-free is on: the switch shows that, so it never stays on after failing
    toggle: async (on) => {
      const mic = window.assistantMicrophone;
      if (on && !mic.usable()) { show(`⚠️ hands-free is off: ${mic.explain(null, true)}`); return false; }  // not a secure context
      try { if (on) await start(); else stop(); }
      catch (e) { stop(); show(`⚠️ hands-free could not start: ${mic.explain(e, true)}`); return false; }
      return on;
    },
    active: () => live !== null,
  };
  window.addEventListener('pagehide', stop);
})();
