// Archive policies: legal holds (create, list, release with a reason),
// retention rules (default days and first-match rules, with a warning for
// 0 days, and "Run retention now") and the evidence report of a period
// (JSON and PDF, the verifier key, how to check it offline).
import { html, useState } from '../lib.js';
import { api, apiDownload, qs } from '../api.js';
import { Loaded, useApi, Time, Badge, Field, ErrorNote, Empty, Dialog, Link, CopyButton, saveFile } from '../ui.js';
import { ArchiveShell } from './archive.js';
import { dayBound } from './archive_search.js';
import { span } from './retention.js';

const splitList = (s) => s.split(/[\s,;]+/).map((x) => x.trim()).filter(Boolean);
const dateOnly = (at) => (at ? String(at).slice(0, 10) : '');

function NewHold({ t, onDone }) {
  const empty = { name: '', matter: '', custodians: '', since: '', until: '', query: '' };
  const [form, setForm] = useState(empty);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { tenantId: t.tenantId, name: form.name.trim() };
    if (form.matter.trim()) body.matter = form.matter.trim();
    const c = splitList(form.custodians);
    if (c.length) body.custodians = c;
    if (form.since) body.from = dayBound(form.since);
    if (form.until) body.to = dayBound(form.until, true);
    if (form.query.trim()) body.query = form.query.trim();
    try { const h = await api('POST', '/archive/holds', body, { tenant: t.hdr }); setForm(empty); onDone(h); } catch (err) { setError(err); }
    setBusy(false);
  };
  const f = (error && error.fields) || {};
  const text = (k, label, hint, a = {}) => html`<${Field} label=${label} error=${f[k]} hint=${hint}>${(x) => html`<input ...${x} type=${a.type || 'text'} required=${!!a.required}
    spellcheck="false" placeholder=${a.placeholder} value=${form[k]} onInput=${set(k)} />`}<//>`;
  return html`<form class="panel" onSubmit=${submit} aria-labelledby="new-hold"><h2 id="new-hold">New legal hold</h2>
    <div class="grid2">
      ${text('name', 'Hold name', 'How the hold is listed, e.g. “Smith v. Acme”.', { required: true })}
      ${text('matter', 'Matter (optional)', 'A case or matter reference.')}
    </div>
    ${text('custodians', 'Custodians (optional)', 'Addresses, separated by commas or spaces: messages from, to, copied or blind-copied to any of them are held.', { placeholder: 'dana@acme.example, legal@acme.example' })}
    <div class="grid2">
      ${text('since', 'From (optional)', 'Messages dated on or after this day.', { type: 'date' })}
      ${text('until', 'To (optional)', 'Messages dated on or before this day.', { type: 'date' })}
    </div>
    ${text('query', 'Search words (optional)', 'Only messages that also match this search.')}
    <p class="small muted">A hold keeps every message it covers, whatever the retention rules say, until it is released. Without custodians, period or words it holds the whole archive of this tenant. The hold is a record in the chain.</p>
    <${ErrorNote} error=${error} />
    <div class="actions"><button class="primary" type="submit" disabled=${busy}>${busy ? 'Creating…' : 'Create hold'}</button></div>
  </form>`;
}

function ReleaseHold({ t, hold, onClose }) {
  const [reason, setReason] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    try { await api('POST', '/archive/holds/' + encodeURIComponent(hold.id) + '/release', { reason: reason.trim() }, { tenant: t.hdr }); onClose(true); } catch (err) { setError(err); setBusy(false); }
  };
  return html`<${Dialog} title=${`Release ${hold.name}?`} onClose=${() => onClose(false)}><form onSubmit=${submit}>
    <p>Messages only this hold covers fall under the retention rules again: any already past their retention are purged at the next retention run.</p>
    <${Field} label="Reason" error=${error && error.fields.reason} hint="Required. Recorded in the chain and the audit log, e.g. “Case settled, counsel’s letter of 3 March”.">${(a) => html`<textarea ...${a} required rows="3" value=${reason} onInput=${(e) => setReason(e.target.value)}></textarea>`}<//>
    <${ErrorNote} error=${error} />
    <div class="actions"><button type="button" onClick=${() => onClose(false)}>Cancel</button>
      <button class="danger solid" type="submit" disabled=${busy || !reason.trim()}>${busy ? 'Releasing…' : 'Release hold'}</button></div>
  </form><//>`;
}

function HoldScope({ h }) {
  const parts = [];
  if (h.custodians && h.custodians.length) parts.push(html`<div><span class="muted">Custodians:</span> ${h.custodians.join(', ')}</div>`);
  if (h.from || h.to) parts.push(html`<div><span class="muted">Period:</span> ${dateOnly(h.from) || '…'} – ${dateOnly(h.to) || '…'}</div>`);
  if (h.query) parts.push(html`<div><span class="muted">Words:</span> ${h.query}</div>`);
  return parts.length ? html`<div class="small wrap">${parts}</div>` : html`<span class="small">The whole archive</span>`;
}

function Holds({ t }) {
  const [tick, setTick] = useState(0);
  const holds = useApi('/archive/holds', [tick], { all: true, tenant: t.hdr });
  const [release, setRelease] = useState(null);
  const [note, setNote] = useState(null);
  return html`<${NewHold} t=${t} onDone=${(h) => { setNote(`Hold “${h.name}” created.`); setTick(tick + 1); }} />
    ${note && html`<div class="alert ok" role="status" data-testid="hold-note">${note}</div>`}
    <${Loaded} state=${holds} what="Legal holds" rows=${3}>${(d) => {
      const active = d.items.filter((h) => !h.releasedAt);
      const released = d.items.filter((h) => h.releasedAt);
      return html`<div class="panel flush"><h2>Active holds</h2>
        ${active.length === 0 ? html`<${Empty} title="No active holds">Retention applies to every message.<//>` : html`<div class="table-wrap"><table class="archive-holds"><thead><tr><th>Hold</th><th>Covers</th><th>Created</th><th></th></tr></thead><tbody>
          ${active.map((h) => html`<tr key=${h.id} data-hold=${h.id}><td><span class="name">${h.name}</span> <${Badge} tone="yellow">Active<//>${h.matter && html`<div class="small muted">${h.matter}</div>`}</td>
            <td><${HoldScope} h=${h} /></td><td><${Time} at=${h.createdAt} />${h.createdBy && html`<div class="small muted">${h.createdBy}</div>`}</td>
            <td><button class="danger" aria-label=${'Release ' + h.name} onClick=${() => setRelease(h)}>Release</button></td></tr>`)}
        </tbody></table></div>`}</div>
        ${released.length > 0 && html`<div class="panel flush"><h2>Released holds</h2><div class="table-wrap"><table class="archive-holds released"><thead><tr><th>Hold</th><th>Covered</th><th>Released</th><th>Reason</th></tr></thead><tbody>
          ${released.map((h) => html`<tr key=${h.id}><td><span class="name">${h.name}</span> <${Badge}>Released<//>${h.matter && html`<div class="small muted">${h.matter}</div>`}</td>
            <td><${HoldScope} h=${h} /></td><td><${Time} at=${h.releasedAt} />${h.releasedBy && html`<div class="small muted">${h.releasedBy}</div>`}</td><td class="wrap">${h.releaseReason}</td></tr>`)}
        </tbody></table></div></div>`}`;
    }}<//>
    ${release && html`<${ReleaseHold} t=${t} hold=${release} onClose=${(done) => { if (done) setNote(`Hold “${release.name}” released.`); setRelease(null); if (done) setTick(tick + 1); }} />`}`;
}

export function ArchiveHoldsPage({ ctx }) {
  return html`<${ArchiveShell} ctx=${ctx} current="holds">${(t) => html`<${Holds} t=${t} />`}<//>`;
}

// ---- Retention ----

function toForm(r) {
  return {
    defaultDays: String(r.defaultDays ?? 2557),
    rules: (r.rules || []).map((x) => {
      const m = x.match || {};
      return { channel: m.channel || '', sender: m.from || '', recipient: m.to || '', subjectContains: m.subjectContains || '', days: String(x.days) };
    }),
  };
}

/** The retention of the form, or the errors of the fields that are not whole numbers. */
function parseForm(form) {
  const errors = {};
  const days = (v, key) => { const s = String(v).trim(); if (!/^\d{1,6}$/.test(s)) { errors[key] = 'Enter a whole number of days (0: expire at the next retention run).'; return 0; } return Number(s); };
  const out = { defaultDays: days(form.defaultDays, 'defaultDays'), rules: [] };
  form.rules.forEach((r, i) => {
    const match = {};
    for (const [k, v] of Object.entries({ channel: r.channel, from: r.sender, to: r.recipient, subjectContains: r.subjectContains })) if (v.trim()) match[k] = v.trim();
    out.rules.push({ match, days: days(r.days, 'rules' + i) });
  });
  return { retention: out, errors };
}

export const zeroWarning = 'expires at the next retention run';

function Retention({ t }) {
  const loaded = useApi('/archive/retention', [], { tenant: t.hdr });
  const channels = useApi('/archive/channels', [], { tenant: t.hdr });
  return html`<${Loaded} state=${loaded} what="Archive retention" rows=${4}>${(r) => html`<${RetentionForm} t=${t} initial=${r}
    channels=${(channels.data && channels.data.items) || []} onSaved=${loaded.reload} />`}<//>`;
}

function RetentionForm({ t, initial, channels, onSaved }) {
  const [form, setForm] = useState(toForm(initial));
  const [error, setError] = useState(null);
  const [note, setNote] = useState(null);
  const [busy, setBusy] = useState(false);
  const [job, setJob] = useState(null);
  const { retention, errors } = parseForm(form);
  const setRule = (i, k) => (e) => setForm({ ...form, rules: form.rules.map((r, j) => (j === i ? { ...r, [k]: e.target.value } : r)) });
  const move = (i, d) => { const rules = [...form.rules]; [rules[i], rules[i + d]] = [rules[i + d], rules[i]]; setForm({ ...form, rules }); };
  const save = async (e) => {
    e.preventDefault();
    if (Object.keys(errors).length) return;
    setBusy(true); setError(null); setNote(null);
    try { const saved = await api('PUT', '/archive/retention', retention, { tenant: t.hdr }); setForm(toForm(saved || retention)); setNote('Retention saved. It applies from the next retention run.'); onSaved(); } catch (err) { setError(err); }
    setBusy(false);
  };
  const run = async () => {
    setError(null); setJob(null);
    try { setJob(await api('POST', '/retention/run', { tenantId: t.tenantId })); } catch (err) { setError(err); }
  };
  const zeroDefault = retention.defaultDays === 0 && !errors.defaultDays;
  const zeroRules = retention.rules.map((r, i) => r.days === 0 && !errors['rules' + i]);
  const chName = (id) => (channels.find((c) => c.id === id) || {}).displayName || id;
  return html`<form class="panel" onSubmit=${save} aria-labelledby="arch-ret"><h2 id="arch-ret">Retention</h2>
    <p class="muted">How long ${t.name}’s archived messages are kept. The first rule that matches a message decides; other messages keep the default. A nightly retention run purges expired messages that no active legal hold covers: their content is deleted and a tombstone record is added to the chain.</p>
    <${Field} label="Default: keep messages for (days)" error=${errors.defaultDays} hint=${`Now: ${span(retention.defaultDays)}. The legal default is 2557 days (7 years).`}>${(a) => html`<input ...${a} type="text" inputmode="numeric" class="days" value=${form.defaultDays}
      onInput=${(e) => setForm({ ...form, defaultDays: e.target.value })} />`}<//>
    ${zeroDefault && html`<div class="alert warn" role="alert" data-testid="zero-warning"><strong>0 days:</strong> every message no rule and no hold covers ${zeroWarning}.</div>`}
    <h3>Rules</h3>
    ${form.rules.length === 0 && html`<p class="small muted">No rules: every message keeps the default.</p>`}
    ${form.rules.map((r, i) => html`<fieldset class="rule" key=${i}><legend>Rule ${i + 1}</legend>
      <div class="rule-grid">
        <div class="field"><label for=${'rule-ch-' + i}>Channel</label><select id=${'rule-ch-' + i} value=${r.channel} onChange=${setRule(i, 'channel')}>
          <option value="">Any channel</option>${channels.map((c) => html`<option key=${c.id} value=${c.id}>${c.displayName}</option>`)}
          ${r.channel && !channels.some((c) => c.id === r.channel) && html`<option value=${r.channel}>${chName(r.channel)}</option>`}</select></div>
        <div class="field"><label for=${'rule-from-' + i}>From</label><input id=${'rule-from-' + i} type="text" spellcheck="false" placeholder="name@x.com or @x.com" value=${r.sender} onInput=${setRule(i, 'sender')} /></div>
        <div class="field"><label for=${'rule-to-' + i}>To</label><input id=${'rule-to-' + i} type="text" spellcheck="false" placeholder="name@x.com or @x.com" value=${r.recipient} onInput=${setRule(i, 'recipient')} /></div>
        <div class="field"><label for=${'rule-subj-' + i}>Subject contains</label><input id=${'rule-subj-' + i} type="text" value=${r.subjectContains} onInput=${setRule(i, 'subjectContains')} /></div>
        <div class=${'field' + (errors['rules' + i] ? ' invalid' : '')}><label for=${'rule-days-' + i}>Keep (days)</label><input id=${'rule-days-' + i} type="text" inputmode="numeric" class="days" value=${r.days} onInput=${setRule(i, 'days')} />
          ${errors['rules' + i] && html`<div class="error">${errors['rules' + i]}</div>`}</div>
      </div>
      ${zeroRules[i] && html`<div class="alert warn small" role="alert" data-testid="zero-warning">0 days: every message this rule matches ${zeroWarning} (unless a hold covers it).</div>`}
      <div class="actions left">${i > 0 && html`<button type="button" onClick=${() => move(i, -1)}>Move up</button>`}${i < form.rules.length - 1 && html`<button type="button" onClick=${() => move(i, 1)}>Move down</button>`}
        <button type="button" class="danger" onClick=${() => setForm({ ...form, rules: form.rules.filter((_, j) => j !== i) })}>Remove rule</button></div>
    </fieldset>`)}
    <div class="actions left"><button type="button" onClick=${() => setForm({ ...form, rules: [...form.rules, { channel: '', sender: '', recipient: '', subjectContains: '', days: '365' }] })}>Add rule</button></div>
    <${ErrorNote} error=${error} />
    ${note && html`<div class="alert ok" role="status" data-testid="retention-saved">${note}</div>`}
    ${job && html`<div class="alert ok" role="status" data-testid="retention-job">Retention for ${t.name} is ${job.state === 'running' ? 'running' : 'queued'}. <${Link} href=${'/ui/jobs/' + encodeURIComponent(job.id)}>Follow the job<//></div>`}
    <div class="actions"><button type="button" onClick=${run}>Run retention now</button>
      <button class="primary" type="submit" disabled=${busy || Object.keys(errors).length > 0}>${busy ? 'Saving…' : 'Save retention'}</button></div>
    <p class="small muted">“Run retention now” runs the tenant’s whole retention job at once (archive and backup snapshots), instead of waiting for the night.</p>
  </form>`;
}

export function ArchiveRetentionPage({ ctx }) {
  return html`<${ArchiveShell} ctx=${ctx} current="retention">${(t) => html`<${Retention} t=${t} />`}<//>`;
}

// ---- Evidence ----

const isoDay = (d) => `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;

function Evidence({ t }) {
  const today = new Date();
  const [period, setPeriod] = useState({ from: isoDay(new Date(today.getFullYear(), today.getMonth(), 1)), to: isoDay(today) });
  const chain = useApi('/archive/chain', [], { tenant: t.hdr });
  const [busy, setBusy] = useState('');
  const [error, setError] = useState(null);
  const [report, setReport] = useState(null);
  const path = (format) => '/archive/evidence' + qs({ from: dayBound(period.from), to: dayBound(period.to, true), format });
  const name = (ext) => `evidence-${t.tenantId}-${period.from}-${period.to}.${ext}`;
  const download = async (format) => {
    setBusy(format); setError(null);
    try {
      const { blob, filename } = await apiDownload('GET', path(format === 'pdf' ? 'pdf' : ''), { tenant: t.hdr, accept: format === 'pdf' ? 'application/pdf' : 'application/json', filename: name(format) });
      saveFile(blob, filename);
      if (format === 'json') { try { setReport(JSON.parse(await blob.text())); } catch { /* shown as downloaded only */ } }
    } catch (e) { setError(e); }
    setBusy('');
  };
  const c = chain.data || {};
  const fname = 'evidence.json';
  return html`<div class="panel"><h2>Evidence report</h2>
      <p class="muted">A signed account of everything the chain recorded in a period: the checkpoint, a consistency proof from the previous one, every record’s hash, purges, holds and releases, and the last verification. An auditor checks it without the appliance.</p>
      <div class="filters evidence-period">
        <div class="field"><label for="ev-start">From</label><input id="ev-start" type="date" required value=${period.from} onInput=${(e) => setPeriod({ ...period, from: e.target.value })} /></div>
        <div class="field"><label for="ev-end">To</label><input id="ev-end" type="date" required value=${period.to} onInput=${(e) => setPeriod({ ...period, to: e.target.value })} /></div>
        <div class="field"><button class="primary" disabled=${!!busy || !period.from || !period.to} onClick=${() => download('json')}>${busy === 'json' ? 'Preparing…' : 'Download JSON'}</button></div>
        <div class="field"><button disabled=${!!busy || !period.from || !period.to} onClick=${() => download('pdf')}>${busy === 'pdf' ? 'Preparing…' : 'Download PDF'}</button></div>
      </div>
      <${ErrorNote} error=${error} />
      ${report && report.counts && html`<div class="alert ok" role="status" data-testid="evidence-summary">Report of ${dateOnly(report.from) || period.from} – ${dateOnly(report.to) || period.to} downloaded:
        records ${report.firstIndex ?? '—'} to ${report.lastIndex ?? '—'}; ${report.counts.messages} messages, ${report.counts.tombstones} purges, ${report.counts.holds} holds, ${report.counts.releases} releases.
        ${report.verification && html` Last verification: ${report.verification.state || 'none'}${report.verification.checkedAt ? html` (<${Time} at=${report.verification.checkedAt} />)` : ''}.`}</div>`}
    </div>
    <div class="panel"><h2>Verify offline</h2>
      <ol class="steps">
        <li>Download the JSON report above, and for message contents, export the messages of the same period as a zip from <${Link} href="/ui/archive/search">Search<//> (the zip holds the .eml files and this report).</li>
        <li>On any machine with the Backstop binary (no server, no network):<div class="journal-cmd"><pre class="code" data-testid="verify-command">backstop archive verify-evidence ${fname} --messages DIR</pre><${CopyButton} text=${`backstop archive verify-evidence ${fname} --messages DIR`} label="Copy command" /></div>
          It checks the checkpoint’s signature against the verifier key, the consistency proof, every record’s inclusion, and with <span class="mono">--messages</span> the SHA-256 of every .eml file in DIR.</li>
        <li>Compare the verifier key in the report with the one below (also printed by <span class="mono">backstop admin archive-key</span>), obtained separately.</li>
      </ol>
      <h3>Verifier key</h3>
      <${Loaded} state=${chain} what="The archive chain" rows=${1}>${() => c.verifierKey ? html`<div class="journal-cmd"><pre class="code wrap" data-testid="verifier-key">${c.verifierKey}</pre><${CopyButton} text=${c.verifierKey} label="Copy key" /></div>`
        : html`<p class="muted">No key yet: the first checkpoint creates it.</p>`}<//>
    </div>`;
}

export function ArchiveEvidencePage({ ctx }) {
  return html`<${ArchiveShell} ctx=${ctx} current="evidence">${(t) => html`<${Evidence} t=${t} />`}<//>`;
}
