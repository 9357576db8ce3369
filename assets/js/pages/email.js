// Email accounts (IMAP): the accounts the appliance pulls mail from, each
// one protected object, with adding (the appliance checks the login before
// it stores anything), editing and deleting; an account's page with its
// snapshots, a browser of one snapshot's folders and messages, download of
// one message as .eml and the restore dialog. Backups, verify runs and
// restores are jobs: the buttons lead to the job page and its live progress.
import { html, useState, useEffect, useRef } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, Field, ErrorNote, Empty, Dialog, Confirm, Link, word, tones, navigate } from '../ui.js';
import { LastSnapshot, RecentRuns, Snapshots, SnapshotBrowser, RestoreDialog } from './objects.js';

export const attentionTone = (a) => (['repository_damaged', 'restore_test_failed', 'source_unreachable', 'last_backup_failed'].includes(a) ? 'red' : 'yellow');

export const attentionHelp = {
  repository_damaged: 'A check of the stored data found damage. Run a verify and contact support before deleting anything.',
  restore_test_failed: 'The last verify did not match the backed-up data. Open the latest verify run for the cause.',
  source_unreachable: 'The last backup could not connect or sign in to the mail server. Check the server, the user name and the password (Edit).',
  last_backup_failed: 'The latest backup failed. Open the run below for the cause and the steps to fix it.',
  backup_overdue: 'No backup has succeeded within the schedule. Check that the mail server answers.',
};

export const sourceStates = { ok: ['Connected', 'green'], failing: ['Failing', 'red'], disabled: ['Disabled', ''] };

export function SourceState({ src }) {
  if (!src) return html`<${Badge}>Account deleted<//>`;
  const [label, tone] = sourceStates[src.state] || [src.state, ''];
  return html`<${Badge} tone=${tone}>${label}<//>`;
}

const securityWords = { none: 'No encryption', starttls: 'STARTTLS', tls: 'TLS' };
const defaultPort = { none: 143, starttls: 143, tls: 993 };

/** What happened to the last submit of a form that checks the login first. */
export function CheckOutcome({ busy, error, refused, checking, reasons = {} }) {
  const ref = useRef(null);
  useEffect(() => { if ((busy || error) && ref.current) ref.current.scrollIntoView({ block: 'nearest' }); }, [busy, error]);
  const failed = error && /^source_/.test(error.code || '');
  return html`<div ref=${ref} class="outcome">
    ${busy && html`<div class="alert info" role="status">${checking || 'Checking the login… The appliance signs in to the mail server before it saves anything; a server that does not answer can take up to 30 seconds.'}</div>`}
    ${!busy && failed ? html`<div class="alert error" role="alert" data-testid="check-failed" data-code=${error.code}><strong>${refused}</strong>
        <div class="check-detail">${reasons[error.code] || checkWords[error.code] || 'The check failed'}: <span data-testid="check-detail">${error.message}</span></div></div>`
      : !busy && html`<${ErrorNote} error=${error} />`}
  </div>`;
}

const checkWords = {
  source_auth_failed: 'The server refused the sign-in',
  source_tls_failed: 'The secure connection failed',
  source_unreachable: 'The server could not be reached',
  source_check_failed: 'The check could not be completed',
};

function FingerprintField({ value, onInput, error, security }) {
  return html`<${Field} label="Trust this certificate fingerprint (optional)" error=${error}
    hint=${html`Only for a server with a self-signed certificate, e.g. a lab or small-office server. Paste the SHA-256 fingerprint of its certificate
      (64 hexadecimal digits, colons allowed; <span class="mono">openssl x509 -noout -fingerprint -sha256</span> shows it). The appliance then trusts
      exactly that certificate instead of checking who issued it. Leave empty for a server with a normal certificate.
      ${security === 'none' && html` <strong>Needs STARTTLS or TLS.</strong>`}`}>${(a) => html`<input ...${a} type="text" class="mono" autocomplete="off" spellcheck="false"
      placeholder="e.g. 3a:5f:…:c2" value=${value} onInput=${onInput} />`}<//>`;
}

function AddAccount({ ctx, onClose }) {
  const own = ctx.session.user.tenantId;
  const [form, setForm] = useState({ tenantId: own || ctx.tenant || '', displayName: '', host: '', port: '993', security: 'tls', username: '', password: '', trustFingerprint: '' });
  const [portTouched, setPortTouched] = useState(false);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value });
  const setSecurity = (e) => {
    const security = e.target.value;
    setForm({ ...form, security, port: portTouched ? form.port : String(defaultPort[security]) });
  };
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { kind: 'imap', tenantId: form.tenantId, host: form.host.trim(), port: Number(form.port), security: form.security, username: form.username.trim(), password: form.password };
    if (form.displayName.trim()) body.displayName = form.displayName.trim();
    if (form.trustFingerprint.trim()) body.trustFingerprint = form.trustFingerprint.trim();
    try { onClose(await api('POST', '/sources', body)); } catch (err) { setError(err); setBusy(false); }
  };
  // A refused check names its field (body.password, body.security,
  // body.host): the box above the buttons says why; the other fields'
  // validation messages go next to them.
  const f = error && !/^source_/.test(error.code || '') ? error.fields : {};
  const text = (k, label, a = {}) => html`<${Field} label=${label} error=${f[k]} hint=${a.hint}>${(x) => html`<input ...${x} type=${a.type || 'text'}
    required=${!!a.required} autocomplete=${a.autocomplete || 'off'} spellcheck="false" placeholder=${a.placeholder} inputmode=${a.inputmode} value=${form[k]} onInput=${a.onInput || set(k)} />`}<//>`;
  return html`<${Dialog} title="Add IMAP account" onClose=${() => onClose(null)}><form onSubmit=${submit}>
    ${!own && html`<${Field} label="Tenant" error=${f.tenantId}>${(a) => html`<select ...${a} required value=${form.tenantId} onChange=${set('tenantId')}>
      <option value="" disabled>Choose a tenant</option>${ctx.tenants.map((t) => html`<option key=${t.id} value=${t.id}>${t.name}</option>`)}</select>`}<//>`}
    ${text('displayName', 'Display name (optional)', { hint: 'How the account is listed, e.g. “Front desk”. Default: the user name.' })}
    ${text('host', 'IMAP server', { required: true, placeholder: 'imap.example.com', hint: 'Host name or IP address of the mail server.' })}
    <div class="grid-port">
      <${Field} label="Security" error=${f.security}>${(a) => html`<select ...${a} value=${form.security} onChange=${setSecurity}>
        <option value="tls">TLS (usually port 993)</option><option value="starttls">STARTTLS (usually port 143)</option><option value="none">None: password sent unencrypted</option></select>`}<//>
      ${text('port', 'Port', { required: true, inputmode: 'numeric', onInput: (e) => { setPortTouched(true); set('port')(e); } })}
    </div>
    ${form.security === 'none' && html`<div class="alert warn small">Without encryption the password and the mail cross the network readable by anyone on the way. Use it only on a trusted network.</div>`}
    ${text('username', 'User name', { required: true, autocomplete: 'off', placeholder: 'frontdesk@example.com' })}
    ${text('password', 'Password', { required: true, type: 'password', autocomplete: 'new-password', hint: 'Stored encrypted and never shown again. For Gmail and similar providers, use an app password.' })}
    <${FingerprintField} value=${form.trustFingerprint} onInput=${set('trustFingerprint')} error=${f.trustFingerprint} security=${form.security} />
    <${CheckOutcome} busy=${busy} error=${error} refused="The login check failed. Nothing was saved." />
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button>
      <button class="primary" type="submit" disabled=${busy || !form.tenantId}>${busy ? 'Checking the login…' : 'Check login and add account'}</button></div>
  </form><//>`;
}

function EditAccount({ src, onClose }) {
  const [form, setForm] = useState({ displayName: src.displayName, password: '', disabled: src.state === 'disabled', trustFingerprint: src.trustFingerprint || '' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const checks = form.password !== '' || form.trustFingerprint.trim() !== (src.trustFingerprint || '');
  const submit = async (e) => {
    e.preventDefault();
    const body = {};
    if (form.displayName.trim() !== src.displayName) body.displayName = form.displayName.trim();
    if (form.password) body.password = form.password;
    if (form.trustFingerprint.trim() !== (src.trustFingerprint || '')) body.trustFingerprint = form.trustFingerprint.trim();
    if (form.disabled !== (src.state === 'disabled')) body.disabled = form.disabled;
    if (Object.keys(body).length === 0) { onClose(null); return; }
    setBusy(true); setError(null);
    try { onClose(await api('PATCH', '/sources/' + encodeURIComponent(src.id), body)); } catch (err) { setError(err); setBusy(false); }
  };
  const f = error && !/^source_/.test(error.code || '') ? error.fields : {};
  return html`<${Dialog} title=${'Edit ' + src.displayName} onClose=${() => onClose(null)}><form onSubmit=${submit}>
    <${Field} label="Display name" error=${f.displayName}>${(a) => html`<input ...${a} type="text" required maxlength="200" value=${form.displayName} onInput=${(e) => setForm({ ...form, displayName: e.target.value })} />`}<//>
    <${Field} label="New password" error=${f.password} hint="Leave empty to keep the stored password. A new one is checked by signing in before it replaces the old one.">${(a) => html`<input ...${a}
      type="password" autocomplete="new-password" value=${form.password} onInput=${(e) => setForm({ ...form, password: e.target.value })} />`}<//>
    <${FingerprintField} value=${form.trustFingerprint} onInput=${(e) => setForm({ ...form, trustFingerprint: e.target.value })} error=${f.trustFingerprint} security=${src.security} />
    <div class="field"><label class="check"><input type="checkbox" checked=${form.disabled} onChange=${(e) => setForm({ ...form, disabled: e.target.checked })} /> Disable backups of this account</label>
      <div class="hint">A disabled account is not backed up on schedule; its snapshots stay browsable and restorable.</div></div>
    <p class="small muted">Server: <span class="mono">${src.host}:${src.port}</span> (${securityWords[src.security]}), user <span class="mono">${src.username}</span>.</p>
    <${CheckOutcome} busy=${busy && checks} error=${error} refused="The new settings did not pass the login check. The old ones stay in use." />
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button>
      <button class="primary" type="submit" disabled=${busy}>${busy ? (checks ? 'Checking the login…' : 'Saving…') : 'Save changes'}</button></div>
  </form><//>`;
}

function DeleteAccount({ src, obj, onClose }) {
  return html`<${Confirm} title=${`Delete ${src.displayName}?`} confirmLabel="Delete account" onClose=${onClose}
    act=${() => api('DELETE', '/sources/' + encodeURIComponent(src.id))}>
    <p>The appliance forgets the server, user name and password of <strong>${src.displayName}</strong> (<span class="mono">${src.username}</span>) and backs it up no more.</p>
    <div class="alert info"><strong>The snapshots are kept.</strong> ${obj && obj.lastSnapshot ? 'Every snapshot taken so far' : 'Any snapshot taken so far'} stays listed here, browsable and restorable into another account, until retention removes it.</div>
    <p class="small muted">Nothing is deleted on the mail server.</p>
  <//>`;
}


/** Sources and their protected objects, joined: one row per IMAP protected object. */
function useAccounts(tick) {
  const objs = useApi('/protected-objects?kind=imap', [tick], { all: true });
  const srcs = useApi('/sources', [tick], { all: true });
  const error = objs.error || srcs.error;
  if (error) return { error, reload: objs.reload };
  if (!objs.data || !srcs.data) return { data: null };
  const byId = new Map(srcs.data.items.map((s) => [s.id, s]));
  // The name is the source's while it exists: renaming the account renames
  // the source, and the object keeps the name it was created with.
  return { data: { items: objs.data.items.map((o) => {
    const src = o.sourceId ? byId.get(o.sourceId) || null : null;
    return { obj: o, src, name: src ? src.displayName : o.displayName };
  }) } };
}

export function EmailAccountsPage({ ctx }) {
  const params = new URLSearchParams(location.search);
  const [tick, setTick] = useState(0);
  const accounts = useAccounts(tick);
  const [dialog, setDialog] = useState(params.get('add') === '1' ? { kind: 'add' } : null);
  const [note, setNote] = useState(null);
  const reload = () => setTick(tick + 1);
  const tenantName = (id) => (ctx.tenants.find((x) => x.id === id) || {}).name || id;
  const close = (result) => {
    const kind = dialog && dialog.kind;
    const name = dialog && dialog.src ? dialog.src.displayName : '';
    setDialog(null);
    if (params.get('add')) navigate('/ui/email', true);
    if (!result) return;
    if (kind === 'add') setNote({ tone: 'ok', testid: 'account-added', text: html`Account “${result.displayName}” added: the login check passed. Its first backup runs on the daily schedule, or <${Link} href=${'/ui/email/' + encodeURIComponent(result.protectedObjectIds[0] || '')}>open it<//> and back it up now.` });
    else if (kind === 'edit') setNote({ tone: 'ok', testid: 'account-saved', text: `Account “${result.displayName}” saved.` });
    else if (kind === 'delete') setNote({ tone: 'info', testid: 'account-deleted', text: `Account “${name}” deleted. Its snapshots are kept until retention removes them.` });
    reload();
  };
  const add = html`<button class="primary" onClick=${() => { setNote(null); setDialog({ kind: 'add' }); }}>Add IMAP account</button>`;
  const showTenant = ctx.provider && !ctx.tenant;
  return html`<${PageHead} title="Email accounts"><button onClick=${reload}>Refresh</button>${add}<//>
    <p class="muted">IMAP mailboxes the appliance backs up every day: every folder, the exact messages with their flags and dates, encrypted and deduplicated in storage.</p>
    ${note && html`<div class=${'alert ' + note.tone} role="status" data-testid=${note.testid}>${note.text}</div>`}
    <${Loaded} state=${accounts} what="Email accounts" rows=${4}>${(d) => html`<div class="panel flush">
      ${d.items.length === 0 ? html`<${Empty} title="No email accounts yet" action=${add}>Add an IMAP account: the appliance checks that it can sign in before it saves anything.<//>` : html`
      <div class="table-wrap"><table class="accounts"><thead><tr><th>Account</th>${showTenant && html`<th>Tenant</th>`}<th>Readiness</th><th>Attention</th><th>Last backup</th><th>Last success</th><th>Last snapshot</th><th><span class="sr-only">Actions</span></th></tr></thead><tbody>
        ${d.items.map(({ obj: o, src, name }) => html`<tr key=${o.id} data-object=${o.id}>
          <td class="account"><${Link} class="name" href=${'/ui/email/' + encodeURIComponent(o.id)}>${name}<//>
            <div class="small muted mono">${o.address}${src && html` · ${src.host}`}</div>
            ${(!src || src.state !== 'ok') && html`<div><${SourceState} src=${src} /></div>`}</td>
          ${showTenant && html`<td class="small" data-label="Tenant">${tenantName(o.tenantId)}</td>`}
          <td class="readiness" data-label="Readiness"><${Badge} tone=${tones[o.readiness.state] || ''}>${word(o.readiness.state)}<//></td>
          <td class="attention" data-label="Attention">${o.attention ? html`<${Badge} tone=${attentionTone(o.attention)}>${word(o.attention)}<//>` : html`<span class="muted">—</span>`}</td>
          <td data-label="Last backup"><${Ago} at=${o.lastBackupAt} /></td>
          <td data-label="Last success"><${Ago} at=${o.lastSuccessAt} /></td>
          <td class="last-snapshot" data-label="Last snapshot"><${LastSnapshot} s=${o.lastSnapshot} /></td>
          <td class="num row-actions">${src && html`<button class="small" aria-label=${'Edit ' + name} onClick=${() => { setNote(null); setDialog({ kind: 'edit', src }); }}>Edit</button>
            <button class="small danger" aria-label=${'Delete ' + name} onClick=${() => { setNote(null); setDialog({ kind: 'delete', src, obj: o }); }}>Delete</button>`}</td>
        </tr>`)}
      </tbody></table></div>
      <div class="pager"><span>${d.items.length} account${d.items.length === 1 ? '' : 's'}</span></div>`}
    </div>`}<//>
    ${dialog && dialog.kind === 'add' && html`<${AddAccount} ctx=${ctx} onClose=${close} />`}
    ${dialog && dialog.kind === 'edit' && html`<${EditAccount} src=${dialog.src} onClose=${close} />`}
    ${dialog && dialog.kind === 'delete' && html`<${DeleteAccount} src=${dialog.src} obj=${dialog.obj} onClose=${(done) => close(done ? dialog.src : null)} />`}`;
}


export function EmailAccountPage({ ctx, params }) {
  const [tick, setTick] = useState(0);
  const objState = useApi('/protected-objects/' + encodeURIComponent(params.id), [tick]);
  const srcs = useApi('/sources', [tick], { all: true });
  const [started, setStarted] = useState(null);
  const [startError, setStartError] = useState(null);
  const [busy, setBusy] = useState('');
  const [snap, setSnap] = useState(null);
  const [restore, setRestore] = useState(null);
  const [dialog, setDialog] = useState(null);
  const crumb = html`<${Link} href="/ui/email">Email accounts<//>`;
  if (objState.error && objState.error.status === 404 && !objState.error.unavailable) return html`<${PageHead} title="Account not found" crumb=${crumb} /><div class="panel"><p>This account does not exist or belongs to another tenant.</p></div>`;
  const start = async (kind) => {
    setBusy(kind); setStartError(null); setStarted(null);
    try {
      // A provider administrator acting for every tenant names this one.
      const j = await api('POST', kind === 'backup' ? '/backups' : '/verifies', { targetType: 'protected_object', targetId: params.id }, { tenant: objState.data.tenantId });
      setStarted({ kind, job: j });
      setTick(tick + 1);
    } catch (e) { setStartError(e); }
    setBusy('');
  };
  return html`<${Loaded} state=${objState} what="Protected objects">${(o) => {
    const src = o.sourceId && srcs.data ? srcs.data.items.find((s) => s.id === o.sourceId) : null;
    const name = src ? src.displayName : o.displayName;
    const tenant = (ctx.tenants.find((x) => x.id === o.tenantId) || {}).name || o.tenantId;
    return html`
    <${PageHead} title=${name} crumb=${crumb}>
      <button onClick=${() => start('backup')} disabled=${!!busy || !o.sourceId}>${busy === 'backup' ? 'Starting…' : 'Back up now'}</button>
      <button onClick=${() => start('verify')} disabled=${!!busy || !o.lastSnapshot}>${busy === 'verify' ? 'Starting…' : 'Verify now'}</button>
      ${src && html`<button onClick=${() => setDialog('edit')}>Edit</button><button class="danger" onClick=${() => setDialog('delete')}>Delete</button>`}
    <//>
    ${started && html`<div class="alert ok" role="status" data-testid="job-started">${started.kind === 'backup' ? 'Backup' : 'Verify run'} ${started.job.state === 'running' ? 'running' : 'queued'}. <${Link} href=${'/ui/jobs/' + encodeURIComponent(started.job.id)}>Follow its progress<//></div>`}
    <${ErrorNote} error=${startError} />
    ${!o.sourceId && html`<div class="alert info">This account was deleted: it is no longer backed up. Its snapshots below stay browsable and can be restored into another account until retention removes them.</div>`}
    ${src && src.state === 'disabled' && html`<div class="alert info">Backups of this account are disabled. Edit it to enable them again.</div>`}
    ${o.attention && html`<div class="alert warn"><strong>${word(o.attention)}.</strong> ${attentionHelp[o.attention] || ''}${src && src.lastError && html`<div class="check-detail small">${src.lastError}</div>`}</div>`}
    <div class="grid2">
      <div class="panel"><h2>Account</h2><dl class="facts">
        <dt>User name</dt><dd class="mono">${o.address}</dd>
        ${src && html`<dt>Server</dt><dd><span class="mono">${src.host}:${src.port}</span> · ${securityWords[src.security]}${src.trustFingerprint && html`<div class="small muted">Trusts the certificate <span class="mono">${src.trustFingerprint}</span></div>`}</dd>`}
        <dt>Connection</dt><dd><${SourceState} src=${o.sourceId ? src : null} />${src && src.lastError && src.state !== 'ok' && html`<div class="small last-error">${src.lastError}</div>`}</dd>
        ${ctx.provider && html`<dt>Tenant</dt><dd>${tenant}</dd>`}
        <dt>Schedule</dt><dd>${!o.sourceId || !o.protected ? html`<span class="muted">Not backed up</span>` : src && src.schedule ? html`<span class="mono">${src.schedule}</span> (UTC)` : 'Daily, early morning (UTC)'}</dd>
        <dt>Added</dt><dd><${Time} at=${o.createdAt} /></dd><dt>Id</dt><dd class="mono">${o.id}</dd>
      </dl></div>
      <div class="panel"><h2>Backups</h2><dl class="facts">
        <dt>Readiness</dt><dd><${Badge} tone=${tones[o.readiness.state] || ''}>${word(o.readiness.state)}<//>${o.readiness.overdue && html` <${Badge} tone="yellow">Overdue<//>`}</dd>
        <dt>Last verify</dt><dd><${Time} at=${o.readiness.checkedAt} empty="not yet" /></dd>
        <dt>Last backup</dt><dd><${Time} at=${o.lastBackupAt} empty="none yet" /></dd>
        <dt>Last success</dt><dd><${Time} at=${o.lastSuccessAt} empty="none yet" /></dd>
        <dt>Last snapshot</dt><dd><${LastSnapshot} s=${o.lastSnapshot} /></dd>
      </dl></div>
    </div>
    <div class="panel flush"><h2>Snapshots</h2><${Snapshots} id=${o.id} tick=${tick} selected=${snap} onSelect=${setSnap} /></div>
    ${snap && html`<${SnapshotBrowser} key=${snap.id} obj=${o} snap=${snap} onRestore=${(picked) => setRestore(picked)} />`}
    <div class="panel"><h2>Recent runs</h2><${RecentRuns} id=${o.id} tick=${tick} /></div>
    ${restore && snap && html`<${RestoreDialog} obj=${o} snap=${snap} picked=${restore} onClose=${() => setRestore(null)} />`}
    ${dialog === 'edit' && src && html`<${EditAccount} src=${src} onClose=${(r) => { setDialog(null); if (r) setTick(tick + 1); }} />`}
    ${dialog === 'delete' && src && html`<${DeleteAccount} src=${src} obj=${o} onClose=${(done) => { setDialog(null); if (done) setTick(tick + 1); }} />`}`;
  }}<//>`;
}
