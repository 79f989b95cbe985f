import { ANSWER_STREAM } from './answer-chunk';

/**
 * The assistant's page for one instance: plain HTML and a small inline script, no framework.
 * It opens an `EventSource` on the instance's `answer` stream (GenDurableStreamsModule, mounted
 * at `streamsPath`, docs/streams.md) and
 * - lists every chunk it receives with its offset (`#chunks`, one `li[data-offset]` each: what
 *   the browser test counts) and shows the answer (`#answer`), cleared at each `start` marker;
 * - shows an Approve button when an `approval` chunk arrives, which POSTs to the signed URL;
 * - shows the final state (`#final`) once the stream ends.
 * The browser's `EventSource` reconnects by itself with `Last-Event-ID` when its connection
 * drops (a node killed mid-answer); should it give up (readyState CLOSED) while the instance
 * still runs, the script opens a new one from the offset after the last it received.
 * `instanceId` must already be validated (it is written into the script as JSON).
 */
export function assistantPage(instanceId: string, streamsPath: string): string {
  const config = JSON.stringify({
    id: instanceId,
    stream: `/${streamsPath}/${encodeURIComponent(instanceId)}/${ANSWER_STREAM}`,
    status: `/assistant/${encodeURIComponent(instanceId)}/status`,
  }).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Assistant ${instanceId}</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 48rem; margin: 2rem auto; padding: 0 1rem; }
  #answer { font-size: 1.1rem; line-height: 1.5; min-height: 3rem; }
  #chunks { font-family: monospace; font-size: 0.8rem; color: #555; max-height: 16rem; overflow: auto; }
  #chunks li[data-type=start] { color: #a40; font-weight: bold; }
  #approval[hidden], #final[hidden] { display: none; }
</style>
</head>
<body>
<h1>Assistant <code>${instanceId}</code></h1>
<p id="connection">connecting…</p>
<p id="answer"></p>
<div id="approval" hidden>
  <p>The answer waits for your approval.</p>
  <button id="approve" type="button">Approve</button>
  <a id="approval-url" href="#">signed approval URL</a> (POST a JSON body to it)
  <p id="approval-result"></p>
</div>
<pre id="final" hidden></pre>
<details open>
  <summary>Stream chunks (offset: chunk), <span id="runs">0</span> run(s)</summary>
  <ol id="chunks" start="0"></ol>
</details>
<script>
(() => {
  const config = ${config};
  const $ = (id) => document.getElementById(id);
  let next = 0;        // the offset after the last chunk received
  let ended = false;   // the stream's 'end' event came, or the instance is known to have ended
  let approvalUrl;

  function render(offset, chunk) {
    const li = document.createElement('li');
    li.dataset.offset = String(offset);
    li.dataset.type = chunk.type;
    li.textContent = offset + ': ' + JSON.stringify(chunk);
    $('chunks').append(li);
    next = offset + 1;
    if (chunk.type === 'start') {
      // A run of the answering step begins (again, after a crash): show only its answer.
      $('answer').textContent = '';
      $('runs').textContent = String(document.querySelectorAll('#chunks li[data-type=start]').length);
    } else if (chunk.type === 'token') {
      $('answer').textContent += chunk.token;
    } else if (chunk.type === 'approval') {
      approvalUrl = chunk.url;
      $('approval-url').href = chunk.url;
      $('approval').hidden = false;
    } else if (chunk.type === 'finished') {
      $('approval').hidden = true;
    }
  }

  async function showFinal() {
    const response = await fetch(config.status);
    const body = await response.json();
    $('final').textContent = JSON.stringify(body, null, 2);
    $('final').dataset.status = body.status;
    $('final').hidden = false;
    return body;
  }

  function open() {
    // How many EventSources the page opened (the first, and one per give-up): the browser's own
    // reconnections, with Last-Event-ID, do not count.
    $('connection').dataset.opened = String(Number($('connection').dataset.opened ?? 0) + 1);
    const source = new EventSource(next === 0 ? config.stream : config.stream + '?from=' + next);
    source.onopen = () => { $('connection').textContent = 'streaming'; };
    source.onmessage = (event) => render(Number(event.lastEventId), JSON.parse(event.data));
    source.addEventListener('end', () => {
      ended = true;
      source.close();
      $('connection').textContent = 'stream ended';
      void showFinal();
    });
    source.onerror = () => {
      if (ended) return;
      if (source.readyState === EventSource.CONNECTING) {
        $('connection').textContent = 'reconnecting…';
        return; // the EventSource retries by itself, sending Last-Event-ID
      }
      // Closed for good: a 204 (nothing left and the instance ended), or the browser gave up.
      $('connection').textContent = 'disconnected';
      setTimeout(async () => {
        try {
          const body = await showFinal();
          if (['done', 'failed', 'cancelled'].includes(body.status)) {
            ended = true;
            $('connection').textContent = 'stream ended';
            return;
          }
        } catch {}
        open();
      }, 1000);
    };
  }

  $('approve').addEventListener('click', async () => {
    // The sample serves the page and the callbacks route, so the URL's path is POSTed on this
    // page's origin (the signed token is the credential, docs/callbacks.md).
    const url = new URL(approvalUrl);
    const response = await fetch(url.pathname, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ approvedBy: 'the assistant page' }),
    });
    $('approval-result').textContent = response.status + ' ' + (await response.text());
  });

  open();
})();
</script>
</body>
</html>
`;
}
