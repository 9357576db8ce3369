// Servers and clients. /endpoints is not paged by the API, so the page
// filters in memory and renders one page of rows at a time: 10,000
// machines stay responsive.
import { html, useState, useMemo, useEffect } from '../lib.js';
import { api, qs } from '../api.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, StateBadge, Field, ErrorNote, Empty, Dialog, Confirm, Secret, Link, word, tones, navigate, duration, bytes } from '../ui.js';
import { attentionOrder } from './dashboard.js';
import { PolicyForm, describePolicy } from './retention.js';

const PAGE = 50;
const ROWS_MARK = 'backstop:endpoints-rows';
const NONE = [];

function AddMachine({ ctx, onClose }) {
  const own = ctx.session.user.tenantId;
  const [tenantId, setTenantId] = useState(own || ctx.tenant || '');
  const [profile, setProfile] = useState('server');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [token, setToken] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    try { setToken(await api('POST', '/enrollment-tokens', { tenantId, profile })); } catch (err) { setError(err); }
    setBusy(false);
  };
  if (token) {
    return html`<${Dialog} title="Add a machine" onClose=${onClose} footer=${html`<button class="primary" onClick=${onClose}>Done</button>`}>
      <p>Run this one line as root on the ${token.profile}. It installs the agent, checks its checksum and enrolls the machine.</p>
      <${Secret} value=${token.installCommand} label="Install command" />
      <div class="alert warn small">The token in this command works once and expires <${Time} at=${token.expiresAt} />. It is not shown again; create another for each machine.</div>
      <p class="small muted">The machine appears in the list as soon as the agent reports in.</p>
    <//>`;
  }
  const f = (error && error.fields) || {};
  return html`<${Dialog} title="Add a machine" onClose=${onClose}>
    <form onSubmit=${submit}>
      <${ErrorNote} error=${error} />
      ${!own && html`<${Field} label="Tenant" error=${f.tenantId}>${(a) => html`<select ...${a} required value=${tenantId} onChange=${(e) => setTenantId(e.target.value)}>
        <option value="" disabled>Choose a tenant</option>${ctx.tenants.map((t) => html`<option key=${t.id} value=${t.id}>${t.name}</option>`)}</select>`}<//>`}
      <${Field} label="Kind of machine" error=${f.profile} hint="Servers are expected to be online all the time (silent after 15 minutes); clients may sleep for days.">${(a) => html`<select ...${a} value=${profile} onChange=${(e) => setProfile(e.target.value)}>
        <option value="server">Server</option><option value="client">Client (laptop, desktop)</option></select>`}<//>
      <div class="actions"><button type="button" onClick=${onClose}>Cancel</button><button class="primary" type="submit" disabled=${busy || !tenantId}>${busy ? 'Creating…' : 'Show install command'}</button></div>
    </form>
  <//>`;
}

function Connection({ e }) {
  const tone = e.connection === 'online' ? 'green' : e.connection === 'offline' ? 'yellow' : '';
  return html`<span title=${e.lastSeenAt ? 'Last seen ' + new Date(e.lastSeenAt).toLocaleString() : 'Never connected'}><span class=${'dot ' + tone}></span>${word(e.connection)}</span>`;
}

export function EndpointsPage({ ctx }) {
  const params = new URLSearchParams(location.search);
  const list = useApi('/endpoints');
  const [q, setQ] = useState('');
  const [profile, setProfile] = useState('');
  const [attentionOnly, setAttentionOnly] = useState(params.get('attention') === '1');
  const [showRevoked, setShowRevoked] = useState(false);
  const [page, setPage] = useState(0);
  const [adding, setAdding] = useState(params.get('add') === '1');
  const items = list.data ? list.data.items : NONE;
  // Lower-cased search text, built once per answer rather than for 10,000
  // machines on every key typed into the search field.
  const haystack = useMemo(() => items.map((e) => (e.hostname + '\n' + (e.displayName || '')).toLowerCase()), [items]);
  const filtered = useMemo(() => {
    const needle = q.trim().toLowerCase();
    const out = items.filter((e, i) => (showRevoked || e.status !== 'revoked') && (!profile || e.profile === profile) && (!attentionOnly || e.attention)
      && (!needle || haystack[i].includes(needle)));
    if (attentionOnly) out.sort((a, b) => attentionOrder.indexOf(a.attention) - attentionOrder.indexOf(b.attention));
    return out;
  }, [items, haystack, q, profile, attentionOnly, showRevoked]);
  // A user-timing mark when the first rows are on screen, so the browser
  // tests can split the wait into server, transfer and page time.
  useEffect(() => { if (filtered.length && !performance.getEntriesByName(ROWS_MARK).length) performance.mark(ROWS_MARK); }, [filtered]);
  const pages = Math.max(1, Math.ceil(filtered.length / PAGE));
  const rows = filtered.slice(page * PAGE, page * PAGE + PAGE);
  const add = html`<button class="primary" onClick=${() => setAdding(true)}>Add machine</button>`;
  return html`<${PageHead} title="Servers & clients">${add}<//>
    <${Loaded} state=${list} what="Servers and clients" rows=${8}>${(d) => html`<div class="panel flush">
      ${d.total === 0 ? html`<${Empty} title="No machines yet" action=${add}>Add a server or client: you get a one-line install command that enrolls it with this appliance.<//>` : html`
      <div class="filters" role="search">
        <div class="field grow"><label for="ep-q">Search</label><input id="ep-q" type="search" placeholder="Host or display name" value=${q} onInput=${(e) => { setQ(e.target.value); setPage(0); }} /></div>
        <div class="field"><label for="ep-profile">Kind</label><select id="ep-profile" value=${profile} onChange=${(e) => { setProfile(e.target.value); setPage(0); }}><option value="">All</option><option value="server">Servers</option><option value="client">Clients</option></select></div>
        <label><input type="checkbox" checked=${attentionOnly} onChange=${(e) => { setAttentionOnly(e.target.checked); setPage(0); }} /> Needs attention</label>
        <label><input type="checkbox" checked=${showRevoked} onChange=${(e) => { setShowRevoked(e.target.checked); setPage(0); }} /> Show revoked</label>
      </div>
      ${filtered.length === 0 ? html`<${Empty} title="No machine matches">Change the search or the filters above.<//>` : html`
      <div class="table-wrap"><table><thead><tr><th>Machine</th><th>Kind</th><th>Connection</th><th>Readiness</th><th>Attention</th><th class="hide-narrow">Last success</th></tr></thead><tbody>
        ${rows.map((e) => html`<tr key=${e.id} class=${e.status === 'revoked' ? 'revoked' : ''}>
          <td><${Link} class="name" href=${'/ui/endpoints/' + encodeURIComponent(e.id)}>${e.displayName || e.hostname}<//>${e.displayName && e.displayName !== e.hostname && html`<div class="small muted">${e.hostname}</div>`}</td>
          <td>${e.profile === 'server' ? 'Server' : 'Client'} <span class="small muted">${e.os}</span></td>
          <td>${e.status === 'revoked' ? html`<${Badge}>Revoked<//>` : html`<${Connection} e=${e} />`}</td>
          <td><${Badge} tone=${tones[e.readiness.state] || ''}>${word(e.readiness.state)}<//></td>
          <td>${e.attention ? html`<${Badge} tone=${attentionOrder.indexOf(e.attention) < 3 ? 'red' : 'yellow'}>${word(e.attention)}<//>` : html`<span class="muted">—</span>`}</td>
          <td class="hide-narrow"><${Ago} at=${e.lastSuccessAt} /></td>
        </tr>`)}
      </tbody></table></div>`}
      <div class="pager" aria-live="polite">
        <span>${filtered.length === d.total ? '' : `${filtered.length} of `}${d.total} ${d.total === 1 ? 'machine' : 'machines'}</span><span class="spacer"></span>
        ${pages > 1 && html`<button class="small" disabled=${page === 0} onClick=${() => setPage(page - 1)}>Previous</button>
          <span>Page ${page + 1} of ${pages}</span>
          <button class="small" disabled=${page >= pages - 1} onClick=${() => setPage(page + 1)}>Next</button>`}
      </div>`}
    </div>`}<//>
    ${adding && html`<${AddMachine} ctx=${ctx} onClose=${() => { setAdding(false); if (params.get('add')) navigate('/ui/endpoints', true); }} />`}`;
}

function RecentRuns({ id }) {
  // Every job on this machine: backups, restores and verify runs, newest first.
  const runs = useApi('/jobs' + qs({ targetId: id, limit: 20 }));
  if (runs.error && runs.error.unavailable) return html`<p class="muted">Run history is not available on this appliance yet.</p>`;
  if (runs.error) return html`<${ErrorNote} error=${runs.error} />`;
  if (!runs.data) return html`<p class="muted">Loading runs…</p>`;
  const items = runs.data.items;
  if (items.length === 0) return html`<p class="muted">No runs yet. The first scheduled backup runs after the agent enrolls.</p>`;
  return html`<div class="table-wrap"><table><thead><tr><th>Run</th><th>State</th><th>Started</th><th>Duration</th></tr></thead><tbody>
    ${items.map((j) => html`<tr key=${j.id}><td><${Link} href=${'/ui/jobs/' + encodeURIComponent(j.id)}>${word(j.queue)}<//></td><td><${StateBadge} value=${j.state} /></td><td><${Time} at=${j.startedAt || j.queuedAt} /></td><td>${duration(j.durationMs)}</td></tr>`)}
  </tbody></table></div>`;
}

/**
 * The retention policy that applies to this machine's repository: its
 * tenant's, or its own. An own policy can be edited or dropped again.
 */
function EndpointRetention({ id }) {
  const path = '/endpoints/' + encodeURIComponent(id) + '/retention';
  const [tick, setTick] = useState(0);
  const r = useApi(path, [tick]);
  const [editing, setEditing] = useState(false);
  const [error, setError] = useState(null);
  if (r.error && r.error.unavailable) return html`<p class="muted">Retention is not available on this appliance yet.</p>`;
  if (r.error) return html`<${ErrorNote} error=${r.error} />`;
  if (!r.data) return html`<p class="muted">Loading the policy…</p>`;
  const d = r.data;
  const save = async (policy) => { const x = await api('PUT', path, { policy }); setEditing(false); setTick(tick + 1); return x.policy; };
  const inherit = async () => {
    setError(null);
    try { await api('PUT', path, { policy: null }); setEditing(false); setTick(tick + 1); } catch (e) { setError(e); }
  };
  return html`<div data-testid="endpoint-retention">
    <p>${d.inherited ? html`<${Badge}>Tenant’s policy<//>` : html`<${Badge} tone="blue">Own policy<//>`} ${describePolicy(d.policy)}</p>
    <${LastPrune} p=${d.lastPrune} />
    <${ErrorNote} error=${error} />
    ${editing ? html`<${PolicyForm} idPrefix=${'ep-ret-'} initial=${d.policy} save=${save} saveLabel="Save this machine’s policy">
        <button type="button" onClick=${() => setEditing(false)}>Cancel</button><//>`
      : html`<div class="actions" style=${{ justifyContent: 'flex-start', marginTop: 0 }}>
        <button onClick=${() => setEditing(true)}>${d.inherited ? 'Give this machine its own policy' : 'Edit this machine’s policy'}</button>
        ${!d.inherited && html`<button onClick=${inherit}>Use the tenant’s policy</button>`}
        <${Link} class="button" href="/ui/storage">Tenant’s policy<//></div>`}
  </div>`;
}

/** What the latest retention run did to the repository: sizes before and after. */
function LastPrune({ p }) {
  if (!p) return html`<p class="small muted" data-testid="last-prune">Not applied yet: the nightly retention job prunes the repository once it holds backups.</p>`;
  return html`<p class="small" data-testid="last-prune">
    ${p.failed ? html`<${Badge} tone="red">Last run failed<//> ` : ''}Last applied <${Time} at=${p.at} />:
    ${p.failed ? '' : html`repository ${bytes(p.bytesBefore)} → ${bytes(p.bytesAfter)}, ${p.snapshotsRemoved} ${p.snapshotsRemoved === 1 ? 'backup' : 'backups'} removed, ${p.snapshotsKept} kept. `}
    <${Link} href=${'/ui/jobs/' + encodeURIComponent(p.jobId)}>Open the job<//></p>`;
}

/**
 * Agent self-updates (CONTRACT §9): the agent follows the appliance's build
 * unless pinned to a version, e.g. while a new release is tried on a few
 * machines first.
 */
function PinAgent({ e, onClose }) {
  const [version, setVersion] = useState(e.pinnedAgentVersion || e.agentVersion || '');
  const [error, setError] = useState(null);
  const send = async (pinnedAgentVersion) => {
    setError(null);
    try { await api('PATCH', '/endpoints/' + encodeURIComponent(e.id), { pinnedAgentVersion }); onClose(true); } catch (err) { setError(err); }
  };
  const submit = (ev) => { ev.preventDefault(); send(version.trim()); };
  return html`<${Dialog} title="Agent updates" onClose=${() => onClose(false)}><form onSubmit=${submit}>
    <p>${e.pinnedAgentVersion ? html`This machine’s agent is pinned to <strong class="mono">${e.pinnedAgentVersion}</strong>: it installs only that version.`
      : 'This machine’s agent updates itself to the appliance’s build.'}</p>
    <${ErrorNote} error=${error} />
    <${Field} label="Pin to version" error=${error && error.fields && error.fields.pinnedAgentVersion} hint=${'Running now: ' + (e.agentVersion || 'unknown')}>${(a) => html`<input ...${a} type="text" maxlength="64" placeholder="1.4.2" value=${version} onInput=${(ev) => setVersion(ev.target.value)} />`}<//>
    <div class="actions"><button type="button" onClick=${() => onClose(false)}>Cancel</button>
      ${e.pinnedAgentVersion && html`<button type="button" onClick=${() => send(null)}>Follow the appliance</button>`}
      <button class="primary" type="submit">Pin</button></div>
  </form><//>`;
}

function Rename({ e, onClose }) {
  const [name, setName] = useState(e.displayName || e.hostname);
  const [error, setError] = useState(null);
  const submit = async (ev) => {
    ev.preventDefault();
    try { await api('PATCH', '/endpoints/' + encodeURIComponent(e.id), { displayName: name }); onClose(true); } catch (err) { setError(err); }
  };
  return html`<${Dialog} title="Rename machine" onClose=${() => onClose(false)}><form onSubmit=${submit}>
    <${ErrorNote} error=${error && error.unavailable ? { message: 'Renaming machines is not available on this appliance yet.' } : error} />
    <${Field} label="Display name" error=${error && error.fields.displayName} hint=${'Host name: ' + e.hostname}>${(a) => html`<input ...${a} type="text" maxlength="200" value=${name} onInput=${(ev) => setName(ev.target.value)} />`}<//>
    <div class="actions"><button type="button" onClick=${() => onClose(false)}>Cancel</button><button class="primary" type="submit">Save</button></div>
  </form><//>`;
}

export function EndpointPage({ params }) {
  const ep = useApi('/endpoints/' + encodeURIComponent(params.id));
  const [dialog, setDialog] = useState('');
  const close = (changed) => { setDialog(''); if (changed) ep.reload(); };
  const crumb = html`<${Link} href="/ui/endpoints">Servers & clients<//>`;
  if (ep.error && ep.error.status === 404 && !ep.error.unavailable) return html`<${PageHead} title="Machine not found" crumb=${crumb} /><div class="panel"><p>This machine does not exist or belongs to another tenant.</p></div>`;
  return html`<${Loaded} state=${ep} what="Machines">${(e) => html`
    <${PageHead} title=${e.displayName || e.hostname} crumb=${crumb}>
      ${e.status !== 'revoked' && html`<button onClick=${() => setDialog('rename')}>Rename</button><button onClick=${() => setDialog('pin')}>Agent updates</button><button class="danger" onClick=${() => setDialog('revoke')}>Revoke</button>`}
    <//>
    ${e.status === 'revoked' && html`<div class="alert info">This machine is revoked: its agent can no longer connect. Its backups are kept.</div>`}
    ${e.attention && html`<div class="alert warn"><strong>${word(e.attention)}.</strong> ${attentionHelp[e.attention]}</div>`}
    <div class="grid2">
      <div class="panel"><h2>Machine</h2><dl class="facts">
        <dt>Host name</dt><dd>${e.hostname}</dd><dt>Kind</dt><dd>${e.profile === 'server' ? 'Server' : 'Client'} · ${e.os || '—'} ${e.arch}</dd>
        <dt>Agent</dt><dd class="mono">${e.agentVersion || '—'}${e.pinnedAgentVersion && ` · pinned to ${e.pinnedAgentVersion}`}</dd><dt>Connection</dt><dd><${Connection} e=${e} /> · <${Ago} at=${e.lastSeenAt} /></dd>
        <dt>Added</dt><dd><${Time} at=${e.createdAt} /></dd><dt>Id</dt><dd class="mono">${e.id}</dd>
      </dl></div>
      <div class="panel"><h2>Backups</h2><dl class="facts">
        <dt>Readiness</dt><dd><${Badge} tone=${tones[e.readiness.state] || ''}>${word(e.readiness.state)}<//>${e.readiness.overdue && html` <${Badge} tone="yellow">Overdue<//>`}</dd>
        <dt>Restore test</dt><dd><${Time} at=${e.readiness.checkedAt} empty="not yet" /></dd>
        <dt>Last run</dt><dd><${Time} at=${e.lastBackupAt} empty="none yet" /></dd>
        <dt>Last success</dt><dd><${Time} at=${e.lastSuccessAt} empty="none yet" /></dd>
      </dl></div>
    </div>
    <div class="panel"><h2>Recent runs</h2><${RecentRuns} id=${e.id} /></div>
    <div class="panel"><h2>Retention</h2><${EndpointRetention} id=${e.id} /></div>
    ${dialog === 'rename' && html`<${Rename} e=${e} onClose=${close} />`}
    ${dialog === 'pin' && html`<${PinAgent} e=${e} onClose=${close} />`}
    ${dialog === 'revoke' && html`<${Confirm} title="Revoke this machine?" confirmLabel="Revoke machine" onClose=${close}
      act=${() => api('POST', '/endpoints/' + encodeURIComponent(e.id) + '/revoke').catch((err) => { if (err.unavailable) throw new Error('Revoking machines is not available on this appliance yet.'); throw err; })}>
      <p>The agent on ${e.hostname} is locked out at its next contact and no further backups run. Existing backups are kept and stay restorable. This cannot be undone; enroll the machine again to resume.</p><//>`}
  `}<//>`;
}

const attentionHelp = {
  repository_damaged: 'The repository check found damage. Run a verify and contact support before deleting anything.',
  restore_test_failed: 'The last restore test did not match the backed-up data. Open the latest verify run for the cause.',
  last_backup_failed: 'The latest backup failed. Open the run below for the cause and the steps to fix it.',
  backup_overdue: 'No backup has succeeded within the schedule. Check that the agent runs and can reach the appliance.',
  silent: 'The agent has not reported in for longer than expected. Check that the machine is on and the agent service runs.',
  never_seen: 'The machine was enrolled but its agent has never reported in. Check the agent service on the machine.',
};
