// Jobs: filters, detail with the failure's cause and fix steps, and live
// progress from the job's server-sent-events stream.
import { html, useState, useEffect } from '../lib.js';
import { api, qs } from '../api.js';
import { PageHead, Loaded, useApi, Time, Badge, StateBadge, ErrorNote, Empty, Link, word, words, duration, bytes, Progress, navigate } from '../ui.js';

const states = ['queued', 'running', 'succeeded', 'partial', 'failed', 'interrupted', 'cancelled'];
const queues = ['endpoint_backup', 'endpoint_restore', 'mailbox_backup', 'drive_backup', 'imap_backup', 'restore', 'verify', 'archive_verify', 'retention'];
const finished = (s) => !['queued', 'running'].includes(s);

/** The page of a job's target, when the interface has one. */
const targetHref = (t) => (t.type === 'endpoint' ? '/ui/endpoints/' + encodeURIComponent(t.id)
  : t.type === 'protected_object' ? '/ui/objects/' + encodeURIComponent(t.id)
  : t.type === 'source' ? '/ui/m365/' + encodeURIComponent(t.id)
  : t.type === 'archive' ? '/ui/archive' : '');

export function JobsPage() {
  const params = new URLSearchParams(location.search);
  const [filters, setFilters] = useState({ state: params.get('state') || '', queue: params.get('queue') || '', since: params.get('since') || '' });
  const [more, setMore] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [moreError, setMoreError] = useState(null);
  const query = { state: filters.state, queue: filters.queue, since: filters.since ? new Date(filters.since).toISOString() : '', limit: 50 };
  const list = useApi('/jobs' + qs(query));
  useEffect(() => { setMore([]); setCursor(list.data ? list.data.nextCursor : null); }, [list.data]);
  const set = (k) => (e) => {
    const next = { ...filters, [k]: e.target.value };
    setFilters(next);
    navigate('/ui/jobs' + qs(next), true);
  };
  const loadMore = async () => {
    try {
      const r = await api('GET', '/jobs' + qs({ ...query, cursor }));
      setMore([...more, ...r.items]); setCursor(r.nextCursor);
    } catch (e) { setMoreError(e); }
  };
  const filtered = filters.state || filters.queue || filters.since;
  return html`<${PageHead} title="Jobs"><button onClick=${list.reload}>Refresh</button><//>
    <div class="panel flush">
      <div class="filters" role="search">
        <div class="field"><label for="job-state">State</label><select id="job-state" value=${filters.state} onChange=${set('state')}><option value="">Any state</option>${states.map((s) => html`<option value=${s}>${words[s]}</option>`)}</select></div>
        <div class="field"><label for="job-queue">Kind</label><select id="job-queue" value=${filters.queue} onChange=${set('queue')}><option value="">Any kind</option>${queues.map((s) => html`<option value=${s}>${words[s]}</option>`)}</select></div>
        <div class="field"><label for="job-since">Since</label><input id="job-since" type="datetime-local" value=${filters.since} onChange=${set('since')} /></div>
      </div>
      <${Loaded} state=${list} what="Jobs" rows=${8}>${(d) => {
        const items = [...d.items, ...more];
        if (items.length === 0) return html`<${Empty} title=${filtered ? 'No job matches these filters' : 'No jobs yet'}>${filtered ? 'Clear or change the filters above.' : 'Backups, restores and verify runs appear here as soon as they are queued.'}<//>`;
        return html`<div class="table-wrap"><table><thead><tr><th>Job</th><th>Target</th><th>State</th><th>Progress</th><th>Queued</th><th class="hide-narrow">Duration</th></tr></thead><tbody>
          ${items.map((j) => html`<tr key=${j.id}>
            <td><${Link} class="name" href=${'/ui/jobs/' + encodeURIComponent(j.id)}>${word(j.queue)}<//><div class="small muted">${word(j.trigger)}</div></td>
            <td>${j.target.displayName || j.target.id}</td>
            <td><${StateBadge} value=${j.state} />${j.failure && html`<div class="small muted">${j.failure.code}</div>`}</td>
            <td style=${{ minWidth: '120px' }}>${j.state === 'running' ? html`<${Progress} percent=${j.progress.percent} /><div class="small muted">${j.progress.percent}% · ${j.progress.phase}</div>` : j.itemsFailed ? html`<span class="small">${j.itemsFailed} items failed</span>` : html`<span class="muted">—</span>`}</td>
            <td><${Time} at=${j.queuedAt} /></td><td class="hide-narrow">${duration(j.durationMs)}</td>
          </tr>`)}
        </tbody></table></div>
        <${ErrorNote} error=${moreError} />
        ${cursor && html`<div class="pager"><span class="spacer"></span><button onClick=${loadMore}>Show more</button></div>`}`;
      }}<//>
    </div>`;
}

/** Follows the job's event stream; falls back to polling when the stream is unavailable. */
function useLiveJob(id) {
  const [job, setJob] = useState(null);
  const [error, setError] = useState(null);
  const [live, setLive] = useState('connecting');
  useEffect(() => {
    let poll = null;
    let closed = false;
    let received = 0; // stream events so far
    const load = () => {
      const sent = received;
      return api('GET', '/jobs/' + encodeURIComponent(id)).then((j) => {
        // The stream carries every change in order, so a read it overtook
        // (an event arrived while the read was in flight) may be older than
        // what is shown, and is dropped; the stream brings anything newer.
        if (received !== sent && !finished(j.state)) return;
        // A read sent before the stream's end may answer after it (a job of
        // under a second): a finished job never goes back to running.
        setJob((cur) => (cur && finished(cur.state) && !finished(j.state) ? cur : j));
        if (finished(j.state)) { clearInterval(poll); closed = true; setLive('done'); }
      }).catch((e) => { setError(e); clearInterval(poll); });
    };
    load();
    const es = new EventSource('/api/v1/jobs/' + encodeURIComponent(id) + '/events');
    let lastEvent = Date.now();
    const seen = () => { lastEvent = Date.now(); received++; };
    ['snapshot', 'progress', 'state', 'end'].forEach((t) => es.addEventListener(t, seen));
    // Safety net: a running job whose stream stays silent for 5 s is re-read,
    // so progress recorded by a path that does not feed the stream still shows.
    const stall = setInterval(() => {
      if (!closed && Date.now() - lastEvent > 5000) { lastEvent = Date.now(); load(); }
    }, 1000);
    const merge = (patch) => setJob((j) => (j ? { ...j, ...patch } : j));
    es.addEventListener('open', () => setLive('live'));
    es.addEventListener('snapshot', (e) => { setJob((j) => ({ ...(j || {}), ...JSON.parse(e.data) })); setLive('live'); });
    es.addEventListener('progress', (e) => merge(JSON.parse(e.data)));
    es.addEventListener('state', (e) => merge(JSON.parse(e.data)));
    es.addEventListener('end', (e) => { setJob((j) => ({ ...(j || {}), ...JSON.parse(e.data) })); closed = true; es.close(); setLive('done'); load(); });
    es.addEventListener('error', () => {
      if (closed || es.readyState !== EventSource.CLOSED) return; // the browser reconnects with Last-Event-ID
      setLive('polling');
      poll = setInterval(load, 3000);
    });
    return () => { closed = true; es.close(); clearInterval(poll); clearInterval(stall); };
  }, [id]);
  return { job, error, live };
}

function FailurePanel({ f, message }) {
  return html`<div class="panel"><h2>Why it failed</h2>
    <p><strong>${message || f.code}</strong></p>
    <dl class="facts"><dt>Cause</dt><dd class="mono">${f.code}</dd><dt>Category</dt><dd>${f.category}</dd>
      <dt>Step</dt><dd>${f.step || '—'}</dd><dt>When</dt><dd><${Time} at=${f.occurredAt} seconds /></dd>
      <dt>Retry</dt><dd>${f.retry.state === 'scheduled' ? html`Automatic retry ${f.retry.attempt + 1} of ${f.retry.maxAttempts} at <${Time} at=${f.retry.nextAt} />` : f.retry.state === 'exhausted' ? 'Automatic retries used up' : f.transient ? 'Waiting may help' : 'No automatic retry'}</dd></dl>
    ${f.fixSteps && f.fixSteps.length > 0 && html`<h3>How to fix it</h3><ol class="steps">${f.fixSteps.map((s, i) => html`<li key=${i}>${s}</li>`)}</ol>`}
    ${f.docsUrl && html`<p>${f.docsUrl.startsWith('/ui/')
      ? html`<${Link} href=${f.docsUrl}>Read more about ${f.code}<//>`
      : html`<a href=${f.docsUrl} target="_blank" rel="noreferrer noopener">Read more about ${f.code}</a>`}</p>`}
    ${f.details && html`<details><summary class="small muted">Technical details for a support case</summary><pre class="code">${f.details}</pre></details>`}
  </div>`;
}

export function JobPage({ params }) {
  const { job: j, error, live } = useLiveJob(params.id);
  const crumb = html`<${Link} href="/ui/jobs">Jobs<//>`;
  if (error && error.unavailable) return html`<${PageHead} title="Job" crumb=${crumb} /><${Loaded} state=${{ error }} what="Jobs" />`;
  if (error) return html`<${PageHead} title="Job" crumb=${crumb} /><div class="panel"><${ErrorNote} error=${error} /></div>`;
  if (!j || !j.progress) return html`<${PageHead} title="Job" crumb=${crumb} /><${Loaded} state=${{ data: null }} what="Jobs" />`;
  const p = j.progress;
  return html`<${PageHead} title=${`${word(j.queue)} · ${j.target.displayName || j.target.id}`} crumb=${crumb}>
      <span class="small muted" aria-live="polite">${live === 'live' ? 'Live' : live === 'polling' ? 'Updating every 3 s' : ''}</span><//>
    <div class="panel"><div class="page-head" style=${{ marginBottom: '8px' }}><${StateBadge} value=${j.state} /><span class="small muted">${p.phase}</span><span class="spacer"></span><strong data-testid="job-percent">${p.percent}%</strong></div>
      <${Progress} percent=${p.percent} tone=${j.state === 'failed' ? 'red' : j.state === 'partial' ? 'yellow' : ''} />
      <p class="small muted" style=${{ marginTop: '8px' }}>${p.itemsTotal ? `${p.itemsDone} of ${p.itemsTotal} items` : `${p.itemsDone} items`} · ${p.bytesTotal ? `${bytes(p.bytesDone)} of ${bytes(p.bytesTotal)}` : bytes(p.bytesDone)}</p>
    </div>
    ${j.failure && html`<${FailurePanel} f=${j.failure} message=${j.errorMessage} />`}
    ${!j.failure && j.errorMessage && html`<div class="alert error">${j.errorMessage}</div>`}
    <div class="panel"><h2>Details</h2><dl class="facts">
      <dt>Kind</dt><dd>${word(j.queue)}</dd><dt>Trigger</dt><dd>${word(j.trigger)}</dd>
      <dt>Target</dt><dd>${targetHref(j.target) ? html`<${Link} href=${targetHref(j.target)}>${j.target.displayName || j.target.id}<//>` : j.target.displayName || j.target.id}</dd>
      <dt>Queued</dt><dd><${Time} at=${j.queuedAt} seconds /></dd><dt>Started</dt><dd><${Time} at=${j.startedAt} seconds empty="not yet" /></dd>
      <dt>Finished</dt><dd><${Time} at=${j.finishedAt} seconds empty="not yet" /></dd><dt>Duration</dt><dd>${duration(j.durationMs)}</dd>
      <dt>Snapshot</dt><dd class="mono">${j.snapshotId || '—'}</dd><dt>Id</dt><dd class="mono">${j.id}</dd>
    </dl></div>
    ${j.failureGroups && j.failureGroups.length > 0 && html`<div class="panel flush"><h2>Failed items by cause</h2><div class="table-wrap"><table><thead><tr><th>Cause</th><th class="num">Items</th><th>Example</th></tr></thead><tbody>
      ${j.failureGroups.map((g) => html`<tr key=${g.code}><td class="mono">${g.code}</td><td class="num">${g.count}</td><td>${g.sample}</td></tr>`)}</tbody></table></div></div>`}
    ${j.items && j.items.length > 0 && html`<div class="panel flush"><h2>Failed items</h2><div class="table-wrap"><table><thead><tr><th>Item</th><th>Cause</th><th>When</th></tr></thead><tbody>
      ${j.items.slice(0, 200).map((it) => html`<tr key=${it.ref}><td>${it.name}<div class="small muted mono">${it.ref}</div></td><td class="mono">${it.failure ? it.failure.code : '—'}</td><td><${Time} at=${it.at} /></td></tr>`)}</tbody></table></div></div>`}`;
}
