// Archive search (full text over subject, addresses and body; filters by
// channel, custodian and period), paging, export of the result set as a
// zip, and one message: its record, its headers and its body as plain
// text in a <pre>. The body is fetched as text and never parsed as HTML,
// so nothing in an archived message can run or load anything.
import { html, useState, useEffect } from '../lib.js';
import { api, apiDownload, qs } from '../api.js';
import { Loaded, useApi, Time, Badge, ErrorNote, Empty, Link, bytes, saveFile, navigate } from '../ui.js';
import { ArchiveShell } from './archive.js';

const PAGE = 50;

/** A date input's value (YYYY-MM-DD, local) as the RFC 3339 instant its day starts, or the next day's start with end. */
export function dayBound(value, end) {
  if (!value) return '';
  const [y, m, d] = value.split('-').map(Number);
  return new Date(y, m - 1, d + (end ? 1 : 0)).toISOString();
}

/** Message flags: journal report, held, purged. */
export function MessageBadges({ m }) {
  return html`<span class="flags">${m.journal && html`<${Badge} tone="blue">Journal report<//>`}
    ${m.held && html`<span data-testid="held"><${Badge} tone="yellow">Held<//></span>`}
    ${m.purged && html`<span data-testid="purged"><${Badge} tone="red">Purged<//></span>`}</span>`;
}

const list = (v) => (Array.isArray(v) ? v.join(', ') : v || '');

function useChannels(t) {
  const [channels, setChannels] = useState([]);
  useEffect(() => { api('GET', '/archive/channels', undefined, { tenant: t.hdr }).then((r) => setChannels(r.items)).catch(() => {}); }, [t.tenantId]);
  return channels;
}

function Search({ t }) {
  const params = new URLSearchParams(location.search);
  const initial = { q: params.get('q') || '', custodian: params.get('custodian') || '', channel: params.get('channel') || '', since: params.get('since') || '', until: params.get('until') || '' };
  const [form, setForm] = useState(initial);
  const [filters, setFilters] = useState(initial);
  const [cursors, setCursors] = useState(['']); // the cursor of each page seen; the last is the current page's
  const channels = useChannels(t);
  const query = { q: filters.q, custodian: filters.custodian, channel: filters.channel, from: dayBound(filters.since), to: dayBound(filters.until, true) };
  const cursor = cursors[cursors.length - 1];
  const result = useApi('/archive/messages' + qs({ ...query, cursor, limit: PAGE }), [], { tenant: t.hdr });
  const [exporting, setExporting] = useState(false);
  const [exportError, setExportError] = useState(null);
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value });
  const submit = (e) => {
    e.preventDefault();
    const next = { ...form, q: form.q.trim(), custodian: form.custodian.trim() };
    setFilters(next); setCursors(['']);
    navigate('/ui/archive/search' + qs(next), true);
  };
  const exportZip = async () => {
    setExporting(true); setExportError(null);
    try {
      const body = { tenantId: t.tenantId };
      for (const [k, v] of Object.entries(query)) if (v) body[k] = v;
      const { blob, filename } = await apiDownload('POST', '/archive/exports', { body, tenant: t.hdr, accept: 'application/zip', filename: 'archive-export.zip' });
      saveFile(blob, filename);
    } catch (e) { setExportError(e); }
    setExporting(false);
  };
  const filtered = Object.values(filters).some(Boolean);
  const chName = (id) => (channels.find((c) => c.id === id) || {}).displayName || id;
  return html`<div class="panel flush">
    <form class="filters archive-filters" role="search" onSubmit=${submit}>
      <div class="field grow"><label for="arch-q">Search</label><input id="arch-q" type="search" placeholder="Words in subject, addresses or text" value=${form.q} onInput=${set('q')} /></div>
      <div class="field"><label for="arch-custodian">Custodian</label><input id="arch-custodian" type="text" spellcheck="false" placeholder="name@example.com" value=${form.custodian} onInput=${set('custodian')} /></div>
      <div class="field"><label for="arch-channel">Channel</label><select id="arch-channel" value=${form.channel} onChange=${set('channel')}><option value="">Any channel</option>
        ${channels.map((c) => html`<option key=${c.id} value=${c.id}>${c.displayName}</option>`)}</select></div>
      <div class="field"><label for="arch-since">From</label><input id="arch-since" type="date" value=${form.since} onInput=${set('since')} /></div>
      <div class="field"><label for="arch-until">To</label><input id="arch-until" type="date" value=${form.until} onInput=${set('until')} /></div>
      <div class="field"><button class="primary" type="submit">Search</button></div>
    </form>
    <p class="small muted pad">A custodian is anyone a message was from, to, copied or blind-copied to, including the recipients an Exchange journal report names (distribution lists expanded).</p>
    <${Loaded} state=${result} what="Archive search" rows=${6}>${(d) => html`
      ${d.items.length === 0 ? html`<${Empty} title=${filtered ? 'No message matches' : 'The archive is empty'}>${filtered ? 'Change the words or the filters above.' : 'Messages appear here as soon as a capture channel receives them.'}<//>` : html`
      <div class="table-wrap"><table class="archive-results"><thead><tr><th>Date</th><th>From</th><th>Subject</th><th class="hide-narrow">To</th><th class="hide-narrow">Channel</th><th class="num hide-narrow">Size</th></tr></thead><tbody>
        ${d.items.map((m) => html`<tr key=${m.id} data-message=${m.id} class=${m.purged ? 'purged' : ''}>
          <td class="nowrap"><${Time} at=${m.date || m.capturedAt} /></td>
          <td class="wrap">${m.from}</td>
          <td class="wrap"><${Link} class="name" href=${'/ui/archive/messages/' + encodeURIComponent(m.id)}>${m.subject || '(no subject)'}<//> <${MessageBadges} m=${m} /></td>
          <td class="wrap small hide-narrow">${list(m.to)}</td>
          <td class="small hide-narrow">${chName(m.channelId)}</td>
          <td class="num hide-narrow">${bytes(m.size)}</td>
        </tr>`)}
      </tbody></table></div>`}
      <div class="pager"><span class="small muted" data-testid="result-count">${d.items.length} message${d.items.length === 1 ? '' : 's'} on this page${cursors.length > 1 ? ` (page ${cursors.length})` : ''}</span><span class="spacer"></span>
        ${cursors.length > 1 && html`<button onClick=${() => setCursors(cursors.slice(0, -1))}>Previous page</button>`}
        ${d.nextCursor && html`<button onClick=${() => setCursors([...cursors, d.nextCursor])}>Next page</button>`}
        ${d.items.length > 0 && html`<button onClick=${exportZip} disabled=${exporting}>${exporting ? 'Exporting…' : 'Export results (zip)'}</button>`}
      </div>
      <${ErrorNote} error=${exportError} />`}<//>
  </div>`;
}

export function ArchiveSearchPage({ ctx }) {
  return html`<${ArchiveShell} ctx=${ctx} current="search">${(t) => html`<${Search} t=${t} />`}<//>`;
}

/** The header block and the rest of a message's text (CRLF or LF line ends). */
export function splitMessage(text) {
  const m = /\r?\n\r?\n/.exec(text);
  if (!m) return { head: text, body: '' };
  return { head: text.slice(0, m.index), body: text.slice(m.index + m[0].length) };
}

function Content({ t, m }) {
  const [content, setContent] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (m.purged) return;
    apiDownload('GET', '/archive/messages/' + encodeURIComponent(m.id) + '/content', { tenant: t.hdr, accept: 'message/rfc822' })
      .then(async ({ blob }) => setContent({ blob, text: await blob.text() })).catch(setError);
  }, [m.id]);
  if (m.purged) return html`<div class="panel"><div class="alert info" data-testid="purged-note">Retention purged this message’s content. Its record and the tombstone record of the purge stay in the chain, so the evidence report still accounts for it.</div></div>`;
  if (error) return html`<div class="panel"><${ErrorNote} error=${error} /></div>`;
  if (!content) return html`<${Loaded} state=${{ data: null }} what="Message" rows=${4} />`;
  const { head, body } = splitMessage(content.text);
  const name = (m.subject || m.id).replace(/[\\/:*?"<>|\r\n]+/g, ' ').trim().slice(0, 80) + '.eml';
  return html`<div class="panel"><div class="page-head panel-head"><h2>Headers</h2><span class="spacer"></span>
      <button aria-label=${'Download ' + (m.subject || m.id) + ' as .eml'} onClick=${() => saveFile(content.blob, name)}>Download .eml</button></div>
      <pre class="code message-headers" data-testid="message-headers">${head}</pre></div>
    <div class="panel"><h2>Text</h2>
      <p class="small muted">The message as stored, shown as plain text: nothing in it is rendered, run or loaded.${m.journal ? ' This is an Exchange journal report: its envelope part names every recipient, the original message follows as an attachment.' : ''}</p>
      <pre class="code message-body" data-testid="message-body">${body}</pre></div>`;
}

export function ArchiveMessagePage({ ctx, params }) {
  const crumb = html`<${Link} href="/ui/archive/search">Archive search<//>`;
  return html`<${ArchiveShell} ctx=${ctx} current="search" title="Archived message" crumb=${crumb}>${(t) => html`<${MessageView} t=${t} id=${params.id} />`}<//>`;
}

function MessageView({ t, id }) {
  const msg = useApi('/archive/messages/' + encodeURIComponent(id), [], { tenant: t.hdr });
  return html`<${Loaded} state=${msg} what="Archived messages" rows=${5}>${(m) => html`
    <div class="panel"><h2 class="wrap" data-testid="message-subject">${m.subject || '(no subject)'} <${MessageBadges} m=${m} /></h2><dl class="facts">
      <dt>From</dt><dd class="wrap">${m.from}</dd><dt>To</dt><dd class="wrap">${list(m.to)}</dd>
      <dt>Date</dt><dd><${Time} at=${m.date} seconds /></dd><dt>Captured</dt><dd><${Time} at=${m.capturedAt} seconds /></dd>
      <dt>Size</dt><dd>${bytes(m.size)}</dd><dt>SHA-256</dt><dd class="mono wrap">${m.sha256}</dd>
      <dt>Chain record</dt><dd class="mono">#${m.recordIndex}</dd>
      ${m.messageId && html`<dt>Message-ID</dt><dd class="mono wrap">${m.messageId}</dd>`}
      <dt>Id</dt><dd class="mono">${m.id}</dd>
    </dl></div>
    <${Content} t=${t} m=${m} />`}<//>`;
}
