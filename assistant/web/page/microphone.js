// Whether this page can use the microphone, and if not, why and what to do, said on the page.
// Browsers give the microphone (getUserMedia, audio worklets) only to a secure context:
// https:// or the machine itself (localhost, 127.0.0.0/8). A phone opening the app at
// http://192.168.x.y:7860 gets neither; without this, Record says "No microphone found" and
// hands-free fails with a script error. Typed chat and uploading a recording work regardless.
(() => {
  const NOTICE = '#mic-notice';

  function usable() {
    return window.isSecureContext && !!(navigator.mediaDevices && navigator.mediaDevices.getUserMedia);
  }

  function httpsUrl() {
    const u = new URL(window.location.href);
    u.protocol = 'https:';
    return `${u.protocol}//${u.host}/`;
  }

  // why the microphone cannot work here, and what to do about it (`short`: beside a control,
  // under the page's full notice)
  function insecureReason(short) {
    const here = `http://localhost:${window.location.port || 80}/`;
    if (short) return `the microphone needs HTTPS: start with --tls, or open it on this machine (${here})`;
    return `The microphone needs HTTPS: start the app with --tls (assistant serve --tls) and open `
      + `${httpsUrl()}, or open it on this machine (${here}). `
      + 'Typing works, and so does uploading a recording.';
  }

  // a one-line reason for a getUserMedia failure
  function explain(error, short) {
    if (!usable()) return insecureReason(short);
    const name = error && error.name;
    if (name === 'NotAllowedError' || name === 'SecurityError') {
      return 'The browser refused the microphone: allow it for this site (the icon beside the '
        + 'address), then try again. Typing works meanwhile.';
    }
    if (name === 'NotFoundError' || name === 'OverconstrainedError') {
      return 'No microphone found: connect one, then try again. Typing works meanwhile.';
    }
    if (name === 'NotReadableError') {
      return 'The microphone is busy (another app or tab is using it). Typing works meanwhile.';
    }
    return `The microphone could not start (${(error && error.message) || error}).`;
  }

  function say(text) {
    const box = document.querySelector(NOTICE);
    if (!box) return;
    box.textContent = text ? `🔒 ${text}` : '';
    box.classList.toggle('mic-notice-on', !!text);
  }

  // Record (Gradio's recorder) would try the microphone and fail with a generic message or
  // "No microphone found": it says the reason instead
  function markRecorder() {
    document.querySelectorAll('#mic .record-button').forEach((b) => {
      if (b.title !== insecureReason()) b.title = insecureReason();
      b.setAttribute('aria-disabled', 'true');
      b.classList.add('mic-unusable');
    });
    document.querySelectorAll('#mic select.mic-select option').forEach((o) => {
      if (o.textContent !== 'Microphone needs HTTPS') o.textContent = 'Microphone needs HTTPS';
    });
  }

  let checked = false;

  async function check() {
    if (checked) return;
    checked = true;
    if (!usable()) {
      say(insecureReason());
      markRecorder();
      // the recorder is re-rendered when its source changes (upload, then microphone again)
      new MutationObserver(markRecorder).observe(document.querySelector('#mic') || document.body, {
        childList: true, subtree: true,
      });
      document.addEventListener('click', (e) => {
        if (e.target.closest && e.target.closest('#mic .record-button')) {
          e.preventDefault();
          e.stopImmediatePropagation();
          say(insecureReason());
          document.querySelector(NOTICE)?.scrollIntoView({ block: 'nearest' });
        }
      }, true);
      return;
    }
    // a secure page whose microphone the person (or a policy) refuses: whoever asks for it
    // (Record, hands-free), the reason is said here too, and cleared once it is granted
    const media = navigator.mediaDevices;
    const ask = media.getUserMedia.bind(media);
    media.getUserMedia = async (constraints) => {
      try {
        const stream = await ask(constraints);
        say('');
        return stream;
      } catch (e) {
        say(explain(e));
        throw e;
      }
    };
    try {
      const status = await navigator.permissions.query({ name: 'microphone' });
      const show = () => say(status.state === 'denied' ? explain({ name: 'NotAllowedError' }) : '');
      show();
      status.onchange = show;
    } catch (e) {
      // browsers without the Permissions API for the microphone: failures are said when they happen
    }
  }

  window.assistantMicrophone = { usable, explain, say, check };
})();
