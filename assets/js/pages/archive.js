// The archive (CONTRACT §14), per tenant: the overview (intake per capture
// channel, the chain's state, "Verify chain now") and channel setup here;
// search and the message view in archive_search.js; legal holds, retention
// and the evidence report in archive_policy.js. Every page shares the tabs
// and the tenant picker below. Message text is only ever rendered as text.
import { html, useState } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, Field, ErrorNote, Empty, Dialog, Confirm, Link, CopyButton, bytes, navigate } from '../ui.js';

const TENANT_KEY = 'backstop.archive.tenant';

/**
 * The tenant the archive pages show: a tenant administrator's own; for a
 * provider administrator the menu's tenant, else the one picked on these
 * pages (remembered for the session), else the first. hdr is what to send
 * as X-Service-Tenant (undefined for a tenant administrator, whose session
 * already names the tenant).
 */
export function useArchiveTenant(ctx) {
  const own = ctx.session.user.tenantId || '';
  const [picked, setPicked] = useState(sessionStorage.getItem(TENANT_KEY) || '');
  const known = (id) => ctx.tenants.some((t) => t.id === id);
  const tenantId = own || ctx.tenant || (known(picked) ? picked : '') || (ctx.tenants[0] && ctx.tenants[0].id) || '';
  const pick = (id) => { sessionStorage.setItem(TENANT_KEY, id); setPicked(id); };
  const name = (ctx.tenants.find((t) => t.id === tenantId) || {}).name || tenantId;
  return { tenantId, hdr: own ? undefined : tenantId, name, pick, canPick: !own && !ctx.tenant && ctx.tenants.length > 1 };
}

const tabs = [
  ['overview', '/ui/archive', 'Overview'],
  ['search', '/ui/archive/search', 'Search'],
  ['holds', '/ui/archive/holds', 'Legal holds'],
  ['retention', '/ui/archive/retention', 'Retention'],
  ['evidence', '/ui/archive/evidence', 'Evidence'],
];

/** The heading, tabs and tenant picker of every archive page; children render once a tenant is known. */
export function ArchiveShell({ ctx, current, title, crumb, actions, children }) {
  const t = useArchiveTenant(ctx);
  return html`<${PageHead} title=${title || 'Archive'} crumb=${crumb}>${actions && t.tenantId && actions(t)}<//>
    <div class="archive-bar">
      <nav class="tabs" aria-label="Archive views">${tabs.map(([id, href, label]) => html`<${Link} key=${id} href=${href}
        class=${'tab' + (current === id ? ' current' : '')} aria-current=${current === id ? 'page' : undefined}>${label}<//>`)}</nav>
      ${t.canPick && html`<div class="archive-tenant"><label for="archive-tenant">Tenant</label>
        <select id="archive-tenant" value=${t.tenantId} onChange=${(e) => t.pick(e.target.value)}>
          ${ctx.tenants.map((tn) => html`<option key=${tn.id} value=${tn.id}>${tn.name}</option>`)}</select></div>`}
    </div>
    ${!t.tenantId ? html`<div class="panel"><${Empty} title="No tenants yet">Create a tenant first: each tenant has its own archive, chain and rules.<//></div>`
      : html`<div key=${t.tenantId}>${children(t)}</div>`}`;
}

export const channelKinds = { smtp_journal: 'SMTP journaling', imap: 'IMAP capture', m365: 'Microsoft 365 capture' };
const channelTones = { ok: 'green', idle: '', failing: 'red' };
const channelWords = { ok: 'Receiving', idle: 'Idle', failing: 'Failing' };
const chainTones = { ok: 'green', broken: 'red', empty: '' };
const chainWords = { ok: 'Intact', broken: 'Broken', empty: 'Empty' };

export function ChannelState({ value }) {
  return html`<${Badge} tone=${channelTones[value] || ''}>${channelWords[value] || value}<//>`;
}

export function ChainState({ value }) {
  return html`<span data-testid="chain-state"><${Badge} tone=${chainTones[value] || 'yellow'}>${chainWords[value] || value}<//></span>`;
}

/**
 * How to point Exchange Online's journaling at a channel: the address, big
 * and copyable, and the two ways to create the journal rule.
 */
export function JournalSetup({ channel }) {
  const cmd = `New-JournalRule -Name "Backstop archive" -JournalEmailAddress ${channel.address} -Scope Global -Enabled $true`;
  return html`<div class="journal-setup" data-testid="journal-setup">
    <p>Journal address of <strong>${channel.displayName}</strong>:</p>
    <div class="journal-address"><span class="mono" data-testid="journal-address">${channel.address}</span><${CopyButton} text=${channel.address} label="Copy address" /></div>
    <h3>Create the journal rule in Exchange Online</h3>
    <p class="small">In Exchange Online PowerShell (<span class="mono">Connect-ExchangeOnline</span> first):</p>
    <div class="journal-cmd"><pre class="code">${cmd}</pre><${CopyButton} text=${cmd} label="Copy command" /></div>
    <p class="small">Or in the Microsoft Purview portal: <strong>Data lifecycle management › Exchange (legacy) › Journal rules</strong>, add a rule that sends journal reports to the address above for <em>all messages</em> (scope Global).</p>
    <div class="alert warn small"><strong>Before the first rule:</strong> Exchange Online asks for an address for <em>undeliverable journal reports</em> (Purview: Journal rules › settings; PowerShell: <span class="mono">Set-TransportConfig -JournalingReportNdrTo</span>).
      That must be a mailbox <strong>not</strong> in Exchange Online, and not this journal address.</div>
    <p class="small muted">Mail reaches the appliance on its SMTP port; the MX of the address’s domain must point at it. Only channel addresses are accepted; every message is stored whole, journal reports included, and answered only once it is durable.</p>
  </div>`;
}

function AddChannel({ t, onClose }) {
  const [form, setForm] = useState({ kind: 'smtp_journal', displayName: '', sourceId: '' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const sources = useApi('/sources', [], { all: true });
  const candidates = ((sources.data && sources.data.items) || []).filter((s) => s.tenantId === t.tenantId && s.kind === form.kind);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { tenantId: t.tenantId, kind: form.kind, displayName: form.displayName.trim() };
    if (form.kind !== 'smtp_journal') body.sourceId = form.sourceId;
    try { onClose(await api('POST', '/archive/channels', body, { tenant: t.hdr })); } catch (err) { setError(err); setBusy(false); }
  };
  const f = (error && error.fields) || {};
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value });
  return html`<${Dialog} title="Add capture channel" onClose=${() => onClose(null)}><form onSubmit=${submit}>
    <fieldset class="field"><legend>How mail reaches the archive</legend>
      ${Object.entries(channelKinds).map(([k, label]) => html`<label class="check" key=${k}><input type="radio" name="kind" value=${k} checked=${form.kind === k}
        onChange=${() => setForm({ ...form, kind: k, sourceId: '' })} /> ${label}</label>`)}
      <div class="hint">${form.kind === 'smtp_journal' ? 'Exchange Online (or another server) sends a copy of every message to the channel’s own address: nothing is missed, even mail deleted at once.'
        : 'The appliance polls the source’s mailboxes (at most every 5 minutes) and archives every message that arrives.'}</div>
    </fieldset>
    <${Field} label="Display name" error=${f.displayName} hint="e.g. “Acme journal”.">${(a) => html`<input ...${a} type="text" required maxlength="200" value=${form.displayName} onInput=${set('displayName')} />`}<//>
    ${form.kind !== 'smtp_journal' && html`<${Field} label="Source" error=${f.sourceId} hint=${form.kind === 'imap' ? 'An IMAP account of this tenant (Email accounts).' : 'A Microsoft 365 tenant of this tenant (Microsoft 365).'}>${(a) => html`<select ...${a} required value=${form.sourceId} onChange=${set('sourceId')}>
        <option value="" disabled>${candidates.length ? 'Choose a source' : 'No such source in this tenant'}</option>
        ${candidates.map((s) => html`<option key=${s.id} value=${s.id}>${s.displayName}</option>`)}</select>`}<//>`}
    <${ErrorNote} error=${error} />
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button>
      <button class="primary" type="submit" disabled=${busy || (form.kind !== 'smtp_journal' && !form.sourceId)}>${busy ? 'Adding…' : 'Add channel'}</button></div>
  </form><//>`;
}

function DeleteChannel({ t, channel, onClose }) {
  return html`<${Confirm} title=${`Delete ${channel.displayName}?`} confirmLabel="Delete channel" onClose=${onClose}
    act=${() => api('DELETE', '/archive/channels/' + encodeURIComponent(channel.id), undefined, { tenant: t.hdr })}>
    <p>The archive stops capturing through <strong>${channel.displayName}</strong> (${channelKinds[channel.kind] || channel.kind})${channel.address ? html`; mail to <span class="mono">${channel.address}</span> is refused from now on` : ''}.</p>
    <div class="alert info"><strong>The archived messages stay.</strong> Everything captured so far is kept, searchable and in the chain until retention expires it.</div>
    ${channel.kind === 'smtp_journal' && html`<p class="small muted">Remove the journal rule in Exchange Online too, or its reports bounce to the undeliverable-reports mailbox.</p>`}
  <//>`;
}

function Channels({ t, channels, reload }) {
  const [dialog, setDialog] = useState(null);
  const [added, setAdded] = useState(null);
  const add = html`<button class="primary" onClick=${() => setDialog({ add: true })}>Add channel</button>`;
  return html`<div class="panel flush"><div class="page-head panel-head"><h2>Capture channels</h2><span class="spacer"></span>${channels.length > 0 && add}</div>
    ${added && html`<div class="alert ok" role="status" data-testid="channel-added">Channel “${added.displayName}” added.${added.kind === 'smtp_journal' ? ' Point the journal rule at its address:' : ' Its first poll runs within 5 minutes.'}
      ${added.kind === 'smtp_journal' && added.address && html`<${JournalSetup} channel=${added} />`}</div>`}
    ${channels.length === 0 ? html`<${Empty} title="No capture channels yet" action=${add}>Add an SMTP journaling channel for Exchange Online, or capture an existing IMAP or Microsoft 365 source.<//>` : html`
      <div class="table-wrap"><table class="archive-channels"><thead><tr><th>Channel</th><th>State</th><th class="num">Last 24 h</th><th class="num">Refused 24 h</th><th class="num">Total</th><th>Last message</th><th></th></tr></thead><tbody>
        ${channels.map((c) => html`<tr key=${c.id} data-channel=${c.id}>
          <td><span class="name">${c.displayName}</span><div class="small muted">${channelKinds[c.kind] || c.kind}</div>
            ${c.address && html`<div class="small mono channel-address">${c.address}</div>`}</td>
          <td data-label="State"><${ChannelState} value=${c.state} />${c.lastError && html`<div class="small last-error">${c.lastError}</div>`}</td>
          <td class="num" data-label="Last 24 h" data-testid="messages24h">${c.messages24h}</td>
          <td class="num" data-label="Refused 24 h">${c.rejected24h ? html`<${Badge} tone="yellow">${c.rejected24h}<//>` : '0'}</td>
          <td class="num" data-label="Total" data-testid="messages-total">${c.messagesTotal}</td>
          <td data-label="Last message"><${Ago} at=${c.lastMessageAt} /></td>
          <td class="nowrap">${c.kind === 'smtp_journal' && c.address && html`<button class="link" aria-label=${'Journal setup of ' + c.displayName} onClick=${() => setDialog({ setup: c })}>Setup</button> `}
            <button class="link danger" aria-label=${'Delete ' + c.displayName} onClick=${() => setDialog({ del: c })}>Delete</button></td>
        </tr>`)}
      </tbody></table></div>`}
    ${dialog && dialog.add && html`<${AddChannel} t=${t} onClose=${(c) => { setDialog(null); if (c) { setAdded(c); reload(); } }} />`}
    ${dialog && dialog.del && html`<${DeleteChannel} t=${t} channel=${dialog.del} onClose=${(done) => { setDialog(null); if (done) { setAdded(null); reload(); } }} />`}
    ${dialog && dialog.setup && html`<${Dialog} title="Exchange Online journaling" onClose=${() => setDialog(null)}><${JournalSetup} channel=${dialog.setup} /><//>`}
  </div>`;
}

function Overview({ t }) {
  const status = useApi('/archive/status', [], { tenant: t.hdr });
  const chain = useApi('/archive/chain', [], { tenant: t.hdr });
  const channels = useApi('/archive/channels', [], { tenant: t.hdr });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const verify = async () => {
    setBusy(true); setError(null);
    try {
      const j = await api('POST', '/archive/chain/verify', { tenantId: t.tenantId }, { tenant: t.hdr });
      navigate('/ui/jobs/' + encodeURIComponent(j.id));
    } catch (e) { setError(e); setBusy(false); }
  };
  const reload = () => { status.reload(); chain.reload(); channels.reload(); };
  return html`<${Loaded} state=${status} what="The archive" rows=${3}>${(s) => {
    const c = chain.data || {};
    const ch = s.chain || {};
    return html`<div class="cards archive-cards">
        <div class="card"><div class="label">Messages</div><div class="value" data-testid="archive-messages">${s.messages}</div><div class="sub">${bytes(s.bytes)}</div></div>
        <div class="card"><div class="label">Chain</div><div class="value"><${ChainState} value=${ch.state || c.state} /></div><div class="sub"><span data-testid="chain-size">${ch.size ?? c.size ?? 0}</span> records</div></div>
        <div class="card"><div class="label">Last checkpoint</div><div class="value small"><${Ago} at=${ch.checkpointAt || c.checkpointAt} empty="none yet" /></div></div>
        <div class="card"><div class="label">Last verification</div><div class="value small" data-testid="last-verified"><${Ago} at=${c.lastVerifiedAt} /></div></div>
      </div>
      <div class="panel"><div class="page-head panel-head"><h2>Chain</h2><span class="spacer"></span>
          <button onClick=${reload}>Refresh</button><button class="primary" onClick=${verify} disabled=${busy}>${busy ? 'Starting…' : 'Verify chain now'}</button></div>
        <${ErrorNote} error=${error || chain.error} />
        ${(ch.state || c.state) === 'broken' && html`<div class="alert error" role="alert"><strong>The chain does not verify.</strong> A stored message or record no longer matches what was signed. Open the last archive verify job for the record concerned, and keep the appliance’s data directory as it is for an investigation.</div>`}
        <dl class="facts">
          <dt>Tree size</dt><dd>${ch.size ?? c.size ?? 0}</dd>
          <dt>Root hash</dt><dd class="mono wrap">${c.rootHash || '—'}</dd>
          <dt>Checkpoint</dt><dd><${Time} at=${ch.checkpointAt || c.checkpointAt} seconds empty="none yet" /></dd>
          <dt>Verified</dt><dd><${Time} at=${c.lastVerifiedAt} seconds empty="never" /></dd>
          ${c.origin && html`<dt>Origin</dt><dd class="mono wrap">${c.origin}</dd>`}
        </dl>
        <p class="small muted">Every captured message, purge, hold and release is a record of this tenant’s transparency log; the appliance signs a checkpoint of it within a minute of each change. Verifying re-hashes every stored message against its record and checks every checkpoint. Offline checks: the <${Link} href="/ui/archive/evidence">evidence report<//>.</p>
      </div>
      <${Loaded} state=${channels} what="Capture channels" rows=${2}>${(d) => html`<${Channels} t=${t} channels=${d.items} reload=${reload} />`}<//>`;
  }}<//>`;
}

export function ArchivePage({ ctx }) {
  return html`<${ArchiveShell} ctx=${ctx} current="overview">${(t) => html`
    <p class="muted">The archive keeps every message of ${t.name} exactly as captured, in an append-only, signed chain: for compliance and eDiscovery, apart from backups.</p>
    <${Overview} t=${t} />`}<//>`;
}
