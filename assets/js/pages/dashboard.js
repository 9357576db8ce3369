// Dashboard: one read of /status (local state only, so it is quick), then
// the machines that need a look, most serious cause first.
import { html } from '../lib.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, Link, Empty, bytes, word, Progress } from '../ui.js';
import { StorageStateBadge, storageStates } from './storage.js';

// Most serious first, as in the contract's list of attention causes.
export const attentionOrder = ['repository_damaged', 'restore_test_failed', 'last_backup_failed', 'backup_overdue', 'silent', 'never_seen'];
// The same for protected objects (CONTRACT §12), which add source_unreachable.
const objectAttentionOrder = ['repository_damaged', 'restore_test_failed', 'source_unreachable', 'last_backup_failed', 'backup_overdue'];

function Card({ label, value, sub, tone }) {
  return html`<div class="card"><div class="label">${label}</div><div class=${'value ' + (tone || '')}>${value}</div><div class="sub">${sub}</div></div>`;
}

function VersionPanel({ v }) {
  let hint;
  if (v.updateCheck === 'disabled') hint = html`<span class="muted">The update check is off. <${Link} href="/ui/settings">Turn it on<//> to hear about new releases.</span>`;
  else if (v.updateCheck === 'pending') hint = html`<span class="muted">The first update check runs within a minute.</span>`;
  else if (v.updateCheck === 'failed') hint = html`<span class="muted">The last update check failed (${v.checkError || 'unknown reason'}).</span>`;
  else if (v.updateAvailable) hint = html`<${Badge} tone="blue">Update available<//> ${v.latestTag || v.latest} ${v.releaseUrl && html`· <a href=${v.releaseUrl} rel="noreferrer noopener" target="_blank">Release notes</a>`}`;
  else hint = html`<span class="muted">Up to date.</span>`;
  return html`<div class="panel"><h2>Version</h2><dl class="facts">
    <dt>Running</dt><dd class="mono">${v.running}</dd>
    <dt>Channel</dt><dd>${v.channel}</dd>
    <dt>Update</dt><dd>${hint}</dd>
    <dt>Last check</dt><dd><${Time} at=${v.checkedAt} empty="never" /></dd>
  </dl></div>`;
}

// The storage card reads GET /storage, the answer the Storage page shows,
// for the same tenant as the rest of the dashboard; until it arrives (or if
// it fails) the status's storage object, the same computation, stands in.
function StoragePanel({ summary }) {
  const st = useApi('/storage');
  const s = st.data;
  const state = s ? s.state : summary.state;
  const count = s ? s.targets.length : summary.targets;
  const reported = s ? s.targets.some((t) => t.capacityBytes !== null) : summary.usedBytes + summary.freeBytes > 0;
  const used = s ? s.usedBytes : summary.usedBytes;
  const free = s ? s.freeBytes : summary.freeBytes;
  const pct = used + free ? (used / (used + free)) * 100 : 0;
  return html`<div class="panel" data-testid="storage-card"><h2>Storage</h2>
    <p><${StorageStateBadge} state=${state} /> ${count} target${count === 1 ? '' : 's'}</p>
    ${reported && html`<${Progress} percent=${pct} tone=${pct > 90 ? 'red' : pct > 75 ? 'yellow' : ''} />`}
    <p class="small muted" style=${{ marginTop: '6px' }}>${s ? `${bytes(s.storedBytes)} stored · ` : ''}${reported ? `${bytes(free)} free` : 'free space not reported'}</p>
    <${Link} href="/ui/storage">Open storage<//>
  </div>`;
}

function Attention({ status }) {
  const eps = useApi(status.endpoints.needingAttention > 0 ? '/endpoints?needsAttention=true' : null);
  const items = [];
  if (status.storage.state !== 'ok') items.push({ key: 'storage', tone: 'red', label: 'Storage ' + (storageStates[status.storage.state] || [status.storage.state])[0].toLowerCase(), text: html`Backups cannot be written safely until storage recovers. <${Link} href="/ui/storage">See the targets<//>` });
  if (status.jobs.failed24h > 0) items.push({ key: 'jobs', tone: 'red', label: `${status.jobs.failed24h} failed job${status.jobs.failed24h === 1 ? '' : 's'}`, text: html`In the last 24 hours. <${Link} href="/ui/jobs?state=failed">See the causes<//>` });
  const objs = useApi(status.protectedObjects.needingAttention > 0 ? '/protected-objects?kind=imap' : null, [], { all: true });
  if (objs.data) {
    const list = objs.data.items.filter((o) => o.attention).sort((a, b) => objectAttentionOrder.indexOf(a.attention) - objectAttentionOrder.indexOf(b.attention));
    for (const o of list.slice(0, 6)) {
      items.push({ key: o.id, tone: objectAttentionOrder.indexOf(o.attention) < 4 ? 'red' : 'yellow', label: word(o.attention),
        text: html`<${Link} href=${'/ui/email/' + encodeURIComponent(o.id)}>${o.displayName}<//> <span class="muted small">· email account · last success <${Ago} at=${o.lastSuccessAt} /></span>` });
    }
    if (list.length > 6) items.push({ key: 'more-objects', tone: '', label: `${list.length - 6} more`, text: html`<${Link} href="/ui/email">All email accounts<//>` });
  }
  if (eps.data) {
    const list = eps.data.items.filter((e) => e.attention && e.status === 'active')
      .sort((a, b) => attentionOrder.indexOf(a.attention) - attentionOrder.indexOf(b.attention));
    for (const e of list.slice(0, 6)) {
      items.push({ key: e.id, tone: attentionOrder.indexOf(e.attention) < 3 ? 'red' : 'yellow', label: word(e.attention),
        text: html`<${Link} href=${'/ui/endpoints/' + encodeURIComponent(e.id)}>${e.displayName || e.hostname}<//> <span class="muted small">· last success <${Ago} at=${e.lastSuccessAt} /></span>` });
    }
    if (list.length > 6) items.push({ key: 'more', tone: '', label: `${list.length - 6} more`, text: html`<${Link} href="/ui/endpoints?attention=1">All machines that need a look<//>` });
  }
  return html`<div class="panel"><h2>Needs attention first</h2>
    ${items.length === 0 && !eps.loading && !objs.loading ? html`<p class="muted">Nothing needs attention. Backups, storage and restore tests look fine.</p>` : html`<ul class="attention">
      ${items.map((i) => html`<li key=${i.key}><${Badge} tone=${i.tone}>${i.label}<//><span class="what">${i.text}</span></li>`)}
    </ul>`}
  </div>`;
}

export function DashboardPage() {
  const st = useApi('/status');
  return html`<${PageHead} title="Dashboard">${st.data && html`<span class="small muted">Updated <${Time} at=${st.data.generatedAt} seconds /></span>`}<button onClick=${st.reload}>Refresh</button><//>
  <${Loaded} state=${st} what="Status" rows=${6}>${(s) => html`
    <div class="cards">
      <${Card} label="Servers & clients" value=${s.endpoints.total} sub=${`${s.endpoints.servers} servers · ${s.endpoints.clients} clients`} />
      <${Card} label="Need a look" value=${s.endpoints.needingAttention + s.protectedObjects.needingAttention} sub="machines and protected objects" />
      <${Card} label="Jobs running" value=${s.jobs.running} sub=${`${s.jobs.queued} queued`} />
      <${Card} label="Last 24 hours" value=${s.jobs.succeeded24h} sub=${`succeeded · ${s.jobs.failed24h} failed`} />
      <${Card} label="Protected objects" value=${s.protectedObjects.total} sub=${html`<${Link} href="/ui/m365">${s.protectedObjects.mailboxes} mailboxes · ${s.protectedObjects.drives} drives<//> · <${Link} href="/ui/email">${s.protectedObjects.imap} IMAP<//>`} />
      <${Card} label="Last successful backup" value=${html`<span style=${{ fontSize: '15px' }}><${Ago} at=${s.endpoints.lastSuccessAt} /></span>`} sub=${s.verify ? html`Last verify: ${word(s.verify.state)}` : 'No verify run yet'} />
    </div>
    <${Attention} status=${s} />
    <div class="grid2"><${StoragePanel} summary=${s.storage} /><${VersionPanel} v=${s.version} /></div>
    ${s.endpoints.total === 0 && html`<div class="panel"><${Empty} title="No machines are backed up yet"
      action=${html`<${Link} class="button primary" href="/ui/endpoints?add=1">Add a machine<//>`}>Add a server or client: Backstop shows a one-line install command for it.<//></div>`}
  `}<//>`;
}
