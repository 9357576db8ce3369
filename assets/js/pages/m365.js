// Microsoft 365: the customer tenants the appliance backs up through
// Microsoft Graph (sources of kind m365). Adding one checks the app
// registration with Microsoft's sign-in service before anything is stored
// and shows the admin-consent link the customer's administrator opens; a
// tenant's page syncs its directory on demand, lists the mailboxes and
// OneDrives it protects, and edits or deletes the source.
import { html, useState } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, Field, ErrorNote, Empty, Dialog, Confirm, Link, CopyButton, word, tones, navigate } from '../ui.js';
import { CheckOutcome, SourceState } from './email.js';
import { LastSnapshot, RecentRuns, kindOf } from './objects.js';

/** The application permissions the app registration needs, all with admin consent (CONTRACT §13). */
export const m365Permissions = [
  ['User.Read.All', 'list the users and their licences'],
  ['Organization.Read.All', 'read the licence names (subscribed SKUs)'],
  ['MailboxSettings.Read', 'tell users, shared mailboxes and rooms apart'],
  ['Mail.ReadWrite', 'back up mailboxes and restore messages'],
  ['Files.ReadWrite.All', 'back up OneDrives and restore files'],
];

const defaultLogin = 'https://login.microsoftonline.com';
const defaultGraph = 'https://graph.microsoft.com/v1.0';

/** The admin-consent address for the customer's tenant, or '' until both ids are known. */
export function consentUrl(loginUrl, azureTenantId, clientId) {
  if (!azureTenantId || !clientId) return '';
  return `${(loginUrl || defaultLogin).replace(/\/+$/, '')}/${encodeURIComponent(azureTenantId)}/adminconsent?client_id=${encodeURIComponent(clientId)}`;
}

const m365Checking = 'Checking with Microsoft… The appliance asks Microsoft’s sign-in service for a token with these ids and this secret before it saves anything.';
const m365Reasons = { source_auth_failed: 'Microsoft refused the app’s sign-in', source_unreachable: 'Microsoft’s sign-in service could not be reached' };

/** The consent link and the permissions the customer's administrator grants. */
function Consent({ url, testid = 'consent' }) {
  return html`<div class="alert info small consent" data-testid=${testid}>
    <strong>Admin consent.</strong> A global administrator of the customer’s tenant opens this link once and accepts the
    application permissions below (application permissions, not delegated; each needs admin consent):
    <ul class="plain perms">${m365Permissions.map(([p, why]) => html`<li key=${p}><span class="mono">${p}</span> <span class="muted">· ${why}</span></li>`)}</ul>
    ${url ? html`<div class="consent-link"><a href=${url} target="_blank" rel="noreferrer noopener" data-testid="consent-link" class="mono">${url}</a> <${CopyButton} text=${url} label="Copy link" /></div>`
      : html`<div class="muted">The link appears here as soon as the Azure tenant id and the client id are filled in.</div>`}
  </div>`;
}

function AddTenant({ ctx, onClose }) {
  const own = ctx.session.user.tenantId;
  const [form, setForm] = useState({ tenantId: own || ctx.tenant || '', displayName: '', azureTenantId: '', clientId: '', clientSecret: '', autoProtect: true, graphUrl: '', loginUrl: '' });
  const [advanced, setAdvanced] = useState(false);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { kind: 'm365', tenantId: form.tenantId, azureTenantId: form.azureTenantId.trim(), clientId: form.clientId.trim(), clientSecret: form.clientSecret, autoProtect: form.autoProtect };
    for (const k of ['displayName', 'graphUrl', 'loginUrl']) if (form[k].trim()) body[k] = form[k].trim();
    try { onClose(await api('POST', '/sources', body)); } catch (err) { setError(err); setBusy(false); }
  };
  const f = error && !/^source_/.test(error.code || '') ? error.fields : {};
  const text = (k, label, a = {}) => html`<${Field} label=${label} error=${f[k]} hint=${a.hint}>${(x) => html`<input ...${x} type=${a.type || 'text'}
    required=${!!a.required} autocomplete=${a.autocomplete || 'off'} spellcheck="false" class=${a.mono ? 'mono' : undefined} placeholder=${a.placeholder} value=${form[k]} onInput=${set(k)} />`}<//>`;
  const consent = consentUrl(form.loginUrl.trim(), form.azureTenantId.trim(), form.clientId.trim());
  // A refused Graph or login URL is named in the box above the buttons;
  // the section stays open so the field can be corrected.
  const showAdvanced = advanced || !!(f.graphUrl || f.loginUrl || (error && error.fields && (error.fields.graphUrl || error.fields.loginUrl)));
  return html`<${Dialog} title="Add Microsoft 365 tenant" onClose=${() => onClose(null)}><form onSubmit=${submit}>
    ${!own && html`<${Field} label="Tenant" error=${f.tenantId} hint="The customer whose Microsoft 365 this is.">${(a) => html`<select ...${a} required value=${form.tenantId} onChange=${set('tenantId')}>
      <option value="" disabled>Choose a tenant</option>${ctx.tenants.map((t) => html`<option key=${t.id} value=${t.id}>${t.name}</option>`)}</select>`}<//>`}
    ${text('displayName', 'Display name (optional)', { hint: 'How the Microsoft 365 tenant is listed, e.g. “Acme Dental (M365)”. Default: the organisation’s name.' })}
    ${text('azureTenantId', 'Azure tenant id', { required: true, mono: true, placeholder: '00000000-0000-0000-0000-000000000000', hint: 'The customer’s directory (tenant) id, or its primary domain (contoso.onmicrosoft.com).' })}
    ${text('clientId', 'Client id', { required: true, mono: true, placeholder: '00000000-0000-0000-0000-000000000000', hint: 'The application (client) id of the app registration Backstop signs in as.' })}
    ${text('clientSecret', 'Client secret', { required: true, type: 'password', autocomplete: 'new-password', hint: 'The secret’s value (not its id). Stored encrypted and never shown again.' })}
    <div class="field"><label class="check"><input type="checkbox" checked=${form.autoProtect} onChange=${(e) => setForm({ ...form, autoProtect: e.target.checked })} /> Protect every user automatically</label>
      <div class="hint">On: every user, shared mailbox and room found by the directory sync is backed up, including ones added later. Off: choose who is protected in the Directory.</div></div>
    <div class="field"><button type="button" class="link" aria-expanded=${showAdvanced ? 'true' : 'false'} aria-controls="m365-advanced" onClick=${() => setAdvanced(!showAdvanced)}>${showAdvanced ? 'Hide advanced settings' : 'Advanced settings'}</button></div>
    ${showAdvanced && html`<div id="m365-advanced" class="advanced">
      <p class="small muted">Only for a national cloud (Microsoft 365 operated by 21Vianet, US Government) or a test service. Leave empty for the worldwide service.</p>
      ${text('graphUrl', 'Graph URL', { mono: true, placeholder: defaultGraph })}
      ${text('loginUrl', 'Login URL', { mono: true, placeholder: defaultLogin })}
    </div>`}
    <${Consent} url=${consent} />
    <${CheckOutcome} busy=${busy} error=${error} refused="Microsoft did not accept these settings. Nothing was saved." checking=${m365Checking} reasons=${m365Reasons} />
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button>
      <button class="primary" type="submit" disabled=${busy || !form.tenantId}>${busy ? 'Checking with Microsoft…' : 'Check and add tenant'}</button></div>
  </form><//>`;
}

function EditTenant({ src, onClose }) {
  const [form, setForm] = useState({ displayName: src.displayName, clientSecret: '', autoProtect: src.autoProtect !== false, schedule: src.schedule || '', disabled: src.state === 'disabled' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const checks = form.clientSecret !== '';
  const submit = async (e) => {
    e.preventDefault();
    const body = {};
    if (form.displayName.trim() !== src.displayName) body.displayName = form.displayName.trim();
    if (form.clientSecret) body.clientSecret = form.clientSecret;
    if (form.autoProtect !== (src.autoProtect !== false)) body.autoProtect = form.autoProtect;
    if (form.schedule.trim() !== (src.schedule || '')) body.schedule = form.schedule.trim();
    if (form.disabled !== (src.state === 'disabled')) body.disabled = form.disabled;
    if (Object.keys(body).length === 0) { onClose(null); return; }
    setBusy(true); setError(null);
    try { onClose(await api('PATCH', '/sources/' + encodeURIComponent(src.id), body)); } catch (err) { setError(err); setBusy(false); }
  };
  const f = error && !/^source_/.test(error.code || '') ? error.fields : {};
  return html`<${Dialog} title=${'Edit ' + src.displayName} onClose=${() => onClose(null)}><form onSubmit=${submit}>
    <${Field} label="Display name" error=${f.displayName}>${(a) => html`<input ...${a} type="text" required maxlength="200" value=${form.displayName} onInput=${(e) => setForm({ ...form, displayName: e.target.value })} />`}<//>
    <${Field} label="New client secret" error=${f.clientSecret} hint="Leave empty to keep the stored secret. A new one is checked with Microsoft before it replaces the old one — do this before the old secret expires.">${(a) => html`<input ...${a}
      type="password" autocomplete="new-password" value=${form.clientSecret} onInput=${(e) => setForm({ ...form, clientSecret: e.target.value })} />`}<//>
    <div class="field"><label class="check"><input type="checkbox" checked=${form.autoProtect} onChange=${(e) => setForm({ ...form, autoProtect: e.target.checked })} /> Protect new users automatically</label>
      <div class="hint">Users the directory sync finds later are protected at the next sync. Turning this off protects no one less: change that per user in the Directory.</div></div>
    <${Field} label="Backup schedule (optional)" error=${f.schedule} hint="A cron expression in UTC, e.g. 0 2 * * * for 02:00 every day. Empty: daily, early morning.">${(a) => html`<input ...${a}
      type="text" class="mono" spellcheck="false" placeholder="0 2 * * *" value=${form.schedule} onInput=${(e) => setForm({ ...form, schedule: e.target.value })} />`}<//>
    <div class="field"><label class="check"><input type="checkbox" checked=${form.disabled} onChange=${(e) => setForm({ ...form, disabled: e.target.checked })} /> Disable backups and directory syncs of this tenant</label>
      <div class="hint">Its snapshots stay browsable and restorable into other mailboxes and OneDrives.</div></div>
    <p class="small muted">Azure tenant <span class="mono">${src.azureTenantId}</span>, client <span class="mono">${src.clientId}</span>.</p>
    <${CheckOutcome} busy=${busy && checks} error=${error} refused="Microsoft did not accept the new secret. The old one stays in use." checking=${m365Checking} reasons=${m365Reasons} />
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button>
      <button class="primary" type="submit" disabled=${busy}>${busy ? (checks ? 'Checking with Microsoft…' : 'Saving…') : 'Save changes'}</button></div>
  </form><//>`;
}

function DeleteTenant({ src, onClose }) {
  return html`<${Confirm} title=${`Delete ${src.displayName}?`} confirmLabel="Delete tenant" onClose=${onClose}
    act=${() => api('DELETE', '/sources/' + encodeURIComponent(src.id))}>
    <p>The appliance forgets the app registration and secret of <strong>${src.displayName}</strong> (Azure tenant <span class="mono">${src.azureTenantId}</span>) and backs up its mailboxes and OneDrives no more.</p>
    <div class="alert info"><strong>The snapshots are kept.</strong> Every mailbox and OneDrive snapshot taken so far stays browsable and downloadable until retention removes it.</div>
    <p class="small muted">Nothing is changed in Microsoft 365. Remove the app registration there too if it is no longer needed.</p>
  <//>`;
}

const countsOf = (summary, tenantId) => (summary && summary.tenants.find((t) => t.tenantId === tenantId)) || null;

/** The directory counts of a tenant in one line. */
function Counts({ c }) {
  if (!c) return html`<span class="muted">not synced yet</span>`;
  return html`<span class="counts">${c.users} user${c.users === 1 ? '' : 's'} · ${c.licensed} licensed · ${c.protected} protected${(c.sharedMailboxes || c.rooms) ? html`<span class="small muted"> · ${c.sharedMailboxes} shared · ${c.rooms} rooms</span>` : ''}</span>`;
}

export function M365TenantsPage({ ctx }) {
  const [tick, setTick] = useState(0);
  const srcs = useApi('/sources', [tick], { all: true });
  const summary = useApi('/directory/summary', [tick]);
  const [dialog, setDialog] = useState(new URLSearchParams(location.search).get('add') === '1');
  const [note, setNote] = useState(null);
  const tenantName = (id) => (ctx.tenants.find((x) => x.id === id) || {}).name || id;
  const close = (result) => {
    setDialog(false);
    if (!result) return;
    setNote(html`Tenant “${result.displayName}” added: Microsoft accepted the app’s sign-in. The directory sync has started; <${Link} href=${'/ui/m365/' + encodeURIComponent(result.id)}>open it<//> to follow it.`);
    setTick(tick + 1);
  };
  const add = html`<button class="primary" onClick=${() => { setNote(null); setDialog(true); }}>Add Microsoft 365 tenant</button>`;
  const showTenant = ctx.provider && !ctx.tenant;
  return html`<${PageHead} title="Microsoft 365"><button onClick=${() => setTick(tick + 1)}>Refresh</button>${add}<//>
    <p class="muted">Customer Microsoft 365 tenants backed up through Microsoft Graph: every protected user’s mailbox and OneDrive, daily, encrypted and deduplicated in storage.</p>
    ${note && html`<div class="alert ok" role="status" data-testid="tenant-added">${note}</div>`}
    <${Loaded} state=${srcs} what="Sources" rows=${3}>${(d) => {
      const items = d.items.filter((s) => s.kind === 'm365');
      return html`<div class="panel flush">${items.length === 0 ? html`<${Empty} title="No Microsoft 365 tenants yet" action=${add}>Register an app in the customer’s Microsoft Entra admin center, then add it here: the appliance checks the ids and the secret with Microsoft before it saves anything.<//>` : html`
        <div class="table-wrap"><table class="m365-tenants"><thead><tr><th>Microsoft 365 tenant</th>${showTenant && html`<th>Tenant</th>`}<th>State</th><th>Directory</th><th class="hide-narrow">Added</th></tr></thead><tbody>
          ${items.map((s) => html`<tr key=${s.id} data-source=${s.id}>
            <td><${Link} class="name" href=${'/ui/m365/' + encodeURIComponent(s.id)}>${s.displayName}<//><div class="small muted mono">${s.azureTenantId}</div></td>
            ${showTenant && html`<td class="small" data-label="Tenant">${tenantName(s.tenantId)}</td>`}
            <td data-label="State"><${SourceState} src=${s} />${s.lastError && s.state !== 'ok' && html`<div class="small last-error">${s.lastError}</div>`}</td>
            <td data-label="Directory"><${Counts} c=${countsOf(summary.data, s.tenantId)} /></td>
            <td class="hide-narrow"><${Time} at=${s.createdAt} /></td>
          </tr>`)}
        </tbody></table></div>
        <div class="pager"><span>${items.length} tenant${items.length === 1 ? '' : 's'}</span></div>`}</div>`;
    }}<//>
    ${dialog && html`<${AddTenant} ctx=${ctx} onClose=${close} />`}`;
}

/** The mailboxes and OneDrives of one source. */
function SourceObjects({ src, tick }) {
  const mail = useApi('/protected-objects?kind=mailbox', [tick], { all: true, tenant: src.tenantId });
  const drives = useApi('/protected-objects?kind=drive', [tick], { all: true, tenant: src.tenantId });
  const state = mail.error ? mail : drives.error ? drives : { data: mail.data && drives.data ? { items: [...mail.data.items, ...drives.data.items] } : null };
  return html`<${Loaded} state=${state} what="Protected objects" rows=${3}>${(d) => {
    const items = d.items.filter((o) => !o.sourceId || o.sourceId === src.id).filter((o) => o.tenantId === src.tenantId)
      .sort((a, b) => (a.displayName + a.kind).localeCompare(b.displayName + b.kind));
    if (items.length === 0) return html`<${Empty} title="Nothing protected yet">Protected users’ mailboxes and OneDrives appear here after the directory sync. Choose who is protected in the <${Link} href="/ui/directory">Directory<//>.<//>`;
    return html`<div class="table-wrap"><table class="objects"><thead><tr><th>Name</th><th>Kind</th><th>Readiness</th><th class="hide-narrow">Last backup</th><th>Last snapshot</th></tr></thead><tbody>
      ${items.map((o) => html`<tr key=${o.id} data-object=${o.id} data-kind=${o.kind}>
        <td><${Link} class="name" href=${'/ui/objects/' + encodeURIComponent(o.id)}>${o.displayName}<//><div class="small muted mono">${o.address}</div></td>
        <td>${o.kind === 'drive' ? 'OneDrive' : 'Mailbox'}${!o.protected && html` <${Badge}>Not protected<//>`}</td>
        <td><${Badge} tone=${tones[o.readiness && o.readiness.state] || ''}>${word(o.readiness && o.readiness.state)}<//></td>
        <td class="hide-narrow"><${Ago} at=${o.lastBackupAt} /></td>
        <td><${LastSnapshot} s=${o.lastSnapshot} noun=${kindOf(o).item} /></td>
      </tr>`)}
    </tbody></table></div>`;
  }}<//>`;
}

export function M365TenantPage({ ctx, params }) {
  const [tick, setTick] = useState(0);
  const srcs = useApi('/sources', [tick], { all: true });
  const summary = useApi('/directory/summary', [tick]);
  const [dialog, setDialog] = useState(null);
  const [started, setStarted] = useState(null);
  const [startError, setStartError] = useState(null);
  const [busy, setBusy] = useState(false);
  const crumb = html`<${Link} href="/ui/m365">Microsoft 365<//>`;
  return html`<${Loaded} state=${srcs} what="Sources">${(d) => {
    const src = d.items.find((s) => s.id === params.id && s.kind === 'm365');
    if (!src) return html`<${PageHead} title="Tenant not found" crumb=${crumb} /><div class="panel"><p>This Microsoft 365 tenant does not exist, was deleted, or belongs to another tenant.</p></div>`;
    const sync = async () => {
      setBusy(true); setStartError(null); setStarted(null);
      try { setStarted(await api('POST', '/sources/' + encodeURIComponent(src.id) + '/sync', undefined, { tenant: src.tenantId })); setTick(tick + 1); } catch (e) { setStartError(e); }
      setBusy(false);
    };
    const consent = src.consentUrl || consentUrl(src.loginUrl, src.azureTenantId, src.clientId);
    const c = countsOf(summary.data, src.tenantId);
    const tenant = (ctx.tenants.find((x) => x.id === src.tenantId) || {}).name || src.tenantId;
    return html`<${PageHead} title=${src.displayName} crumb=${crumb}>
        <button onClick=${sync} disabled=${busy || src.state === 'disabled'}>${busy ? 'Starting…' : 'Sync directory now'}</button>
        <button onClick=${() => setDialog('edit')}>Edit</button><button class="danger" onClick=${() => setDialog('delete')}>Delete</button>
      <//>
      ${started && html`<div class="alert ok" role="status" data-testid="job-started">Directory sync ${started.state === 'running' ? 'running' : 'queued'}. <${Link} href=${'/ui/jobs/' + encodeURIComponent(started.id)}>Follow its progress<//></div>`}
      <${ErrorNote} error=${startError} />
      ${src.state === 'disabled' && html`<div class="alert info">Backups and directory syncs of this tenant are disabled. Edit it to enable them again.</div>`}
      ${src.state === 'failing' && html`<div class="alert warn"><strong>The last contact with Microsoft failed.</strong> If the reason is missing consent, open the admin-consent link below; if the secret expired, Edit and enter a new one.${src.lastError && html`<div class="check-detail small" data-testid="last-error">${src.lastError}</div>`}</div>`}
      <div class="grid2">
        <div class="panel"><h2>App registration</h2><dl class="facts">
          <dt>Azure tenant id</dt><dd class="mono">${src.azureTenantId}</dd>
          <dt>Client id</dt><dd class="mono">${src.clientId}</dd>
          <dt>Connection</dt><dd><${SourceState} src=${src} /></dd>
          ${(src.graphUrl || src.loginUrl) && html`<dt>Graph URL</dt><dd class="mono">${src.graphUrl || defaultGraph}</dd><dt>Login URL</dt><dd class="mono">${src.loginUrl || defaultLogin}</dd>`}
          <dt>New users</dt><dd>${src.autoProtect === false ? 'Chosen in the Directory' : 'Protected automatically'}</dd>
          <dt>Schedule</dt><dd>${src.schedule ? html`<span class="mono">${src.schedule}</span> (UTC)` : 'Daily, early morning (UTC)'}</dd>
          ${ctx.provider && html`<dt>Tenant</dt><dd>${tenant}</dd>`}
          <dt>Added</dt><dd><${Time} at=${src.createdAt} /></dd><dt>Id</dt><dd class="mono">${src.id}</dd>
        </dl></div>
        <div class="panel"><h2>Directory</h2>
          ${c ? html`<dl class="facts" data-testid="tenant-counts">
            <dt>Users</dt><dd>${c.users}</dd><dt>Shared mailboxes</dt><dd>${c.sharedMailboxes}</dd><dt>Rooms</dt><dd>${c.rooms}</dd>
            <dt>Licensed</dt><dd>${c.licensed}</dd><dt>Protected</dt><dd>${c.protected} (${c.protectedMailboxes} mailboxes, ${c.protectedDrives} OneDrives)</dd>
          </dl>` : html`<p class="muted">No directory yet: the first sync runs when the tenant is added.</p>`}
          <p><${Link} href="/ui/directory">Open the directory<//> · <${Link} href="/ui/directory/billing">Billing summary<//></p>
        </div>
      </div>
      <${Consent} url=${consent} testid="tenant-consent" />
      <div class="panel flush"><h2>Mailboxes and OneDrives</h2><${SourceObjects} src=${src} tick=${tick} /></div>
      <div class="panel"><h2>Recent directory syncs</h2><${RecentRuns} id=${src.id} tick=${tick} /></div>
      ${dialog === 'edit' && html`<${EditTenant} src=${src} onClose=${(r) => { setDialog(null); if (r) setTick(tick + 1); }} />`}
      ${dialog === 'delete' && html`<${DeleteTenant} src=${src} onClose=${(done) => { setDialog(null); if (done) navigate('/ui/m365'); }} />`}`;
  }}<//>`;
}
