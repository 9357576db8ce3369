// Email accounts (IMAP): the accounts the appliance pulls mail from, each
// one protected object, with adding (the appliance checks the login before
// it stores anything), editing and deleting; an account's page with its
// snapshots, a browser of one snapshot's folders and messages, download of
// one message as .eml and the restore dialog. Backups, verify runs and
// restores are jobs: the buttons lead to the job page and its live progress.
import { html, useState, useEffect, useRef } from '../lib.js';
import { api, apiDownload, qs } from '../api.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, StateBadge, Field, ErrorNote, Empty, Dialog, Confirm, Link, word, tones, bytes, duration, saveFile, navigate } from '../ui.js';

const SNAPSHOTS_PAGE = 20;
const ITEMS_PAGE = 100;

const attentionTone = (a) => (['repository_damaged', 'restore_test_failed', 'source_unreachable', 'last_backup_failed'].includes(a) ? 'red' : 'yellow');

export const attentionHelp = {
  repository_damaged: 'A check of the stored data found damage. Run a verify and contact support before deleting anything.',
  restore_test_failed: 'The last verify did not match the backed-up data. Open the latest verify run for the cause.',
  source_unreachable: 'The last backup could not connect or sign in to the mail server. Check the server, the user name and the password (Edit).',
  last_backup_failed: 'The latest backup failed. Open the run below for the cause and the steps to fix it.',
  backup_overdue: 'No backup has succeeded within the schedule. Check that the mail server answers.',
};

const sourceStates = { ok: ['Connected', 'green'], failing: ['Failing', 'red'], disabled: ['Disabled', ''] };

function SourceState({ src }) {
  if (!src) return html`<${Badge}>Account deleted<//>`;
  const [label, tone] = sourceStates[src.state] || [src.state, ''];
  return html`<${Badge} tone=${tone}>${label}<//>`;
}

const securityWords = { none: 'No encryption', starttls: 'STARTTLS', tls: 'TLS' };
const defaultPort = { none: 143, starttls: 143, tls: 993 };

/** The folder a restore of a snapshot taken at `at` goes into by default (app/protect.RestoreFolder). */
export function restoreFolder(at) {
  const d = new Date(at);
  const p = (n) => String(n).padStart(2, '0');
  return `Restored ${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())} UTC`;
}

/** What happened to the last submit of a form that checks the login first. */
function CheckOutcome({ busy, error, refused }) {
  const ref = useRef(null);
  useEffect(() => { if ((busy || error) && ref.current) ref.current.scrollIntoView({ block: 'nearest' }); }, [busy, error]);
  const failed = error && /^source_/.test(error.code || '');
  return html`<div ref=${ref} class="outcome">
    ${busy && html`<div class="alert info" role="status">Checking the login… The appliance signs in to the mail server before it saves anything; a server that does not answer can take up to 30 seconds.</div>`}
    ${!busy && failed ? html`<div class="alert error" role="alert" data-testid="check-failed" data-code=${error.code}><strong>${refused}</strong>
        <div class="check-detail">${checkWords[error.code] || 'The check failed'}: <span data-testid="check-detail">${error.message}</span></div></div>`
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

function LastSnapshot({ s }) {
  if (!s) return html`<span class="muted">none yet</span>`;
  return html`<span class="snap-sum">${s.items.toLocaleString()} message${s.items === 1 ? '' : 's'} · ${bytes(s.bytes)}<span class="small muted"><${Ago} at=${s.at} /></span></span>`;
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

function RecentRuns({ id, tick }) {
  const runs = useApi('/jobs' + qs({ targetId: id, limit: 10 }), [tick]);
  if (runs.error) return html`<${ErrorNote} error=${runs.error} />`;
  if (!runs.data) return html`<p class="muted">Loading runs…</p>`;
  if (runs.data.items.length === 0) return html`<p class="muted">No runs yet. The first backup runs on the daily schedule, or now with “Back up now”.</p>`;
  return html`<div class="table-wrap"><table><thead><tr><th>Run</th><th>State</th><th>Started</th><th class="hide-narrow">Duration</th></tr></thead><tbody>
    ${runs.data.items.map((j) => html`<tr key=${j.id}><td><${Link} href=${'/ui/jobs/' + encodeURIComponent(j.id)}>${word(j.queue)}<//></td>
      <td><${StateBadge} value=${j.state} />${j.failure && html`<div class="small muted mono">${j.failure.code}</div>`}</td><td><${Time} at=${j.startedAt || j.queuedAt} /></td><td class="hide-narrow">${duration(j.durationMs)}</td></tr>`)}
  </tbody></table></div>`;
}

function Snapshots({ id, tick, selected, onSelect }) {
  const first = useApi('/protected-objects/' + encodeURIComponent(id) + '/snapshots' + qs({ limit: SNAPSHOTS_PAGE }), [tick]);
  const [more, setMore] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [moreError, setMoreError] = useState(null);
  useEffect(() => {
    setMore([]); setCursor(first.data ? first.data.nextCursor : null);
    if (first.data && first.data.items.length && !selected) onSelect(first.data.items[0]);
  }, [first.data]);
  const loadMore = async () => {
    setMoreError(null);
    try {
      const r = await api('GET', '/protected-objects/' + encodeURIComponent(id) + '/snapshots' + qs({ limit: SNAPSHOTS_PAGE, cursor }));
      setMore([...more, ...r.items]); setCursor(r.nextCursor);
    } catch (e) { setMoreError(e); }
  };
  return html`<${Loaded} state=${first} what="Snapshots" rows=${3}>${(d) => {
    const items = [...d.items, ...more];
    if (items.length === 0) return html`<${Empty} title="No snapshots yet">A snapshot is taken by each backup. Back up now to take the first.<//>`;
    return html`<div class="table-wrap"><table class="snapshots"><thead><tr><th>Taken</th><th class="num">Items</th><th class="num">Size</th><th class="num hide-narrow">Added</th><th class="num hide-narrow">Removed</th><th><span class="sr-only">Browse</span></th></tr></thead><tbody>
      ${items.map((s) => html`<tr key=${s.id} class=${selected && selected.id === s.id ? 'selected' : ''} data-snapshot=${s.id}>
        <td><${Time} at=${s.at} seconds /></td><td class="num">${s.items.toLocaleString()}</td><td class="num nowrap">${bytes(s.bytes)}</td>
        <td class="num hide-narrow">${s.addedItems.toLocaleString()}</td><td class="num hide-narrow">${s.removedItems.toLocaleString()}</td>
        <td class="num">${selected && selected.id === s.id ? html`<span class="small muted">Shown below</span>` : html`<button class="small" onClick=${() => onSelect(s)}>Browse</button>`}</td>
      </tr>`)}
    </tbody></table></div>
    <${ErrorNote} error=${moreError} />
    ${cursor && html`<div class="pager"><span class="spacer"></span><button onClick=${loadMore}>Show older snapshots</button></div>`}`;
  }}<//>`;
}

/** The parts of a folder path, for the breadcrumb. */
function crumbs(folder) {
  const parts = folder.split('/').filter(Boolean);
  return parts.map((name, i) => ({ name, path: parts.slice(0, i + 1).join('/') }));
}

function Flags({ flags }) {
  if (!flags || flags.length === 0) return html`<span class="muted">—</span>`;
  const seen = flags.includes('\\Seen');
  return html`<span class="flags">${!seen && html`<${Badge} tone="blue">Unread<//>`}${flags.filter((f) => f !== '\\Seen').map((f) => html`<${Badge} key=${f}>${f.replace(/^\\/, '')}<//>`)}</span>`;
}

/**
 * One snapshot's folders and messages: a breadcrumb over the folder path,
 * the folder's subfolders and messages (paged), a search over the whole
 * snapshot, and a selection of messages and folders kept across folders
 * for "Restore…".
 */
function SnapshotBrowser({ obj, snap, onRestore }) {
  const [folder, setFolder] = useState('/');
  const [q, setQ] = useState('');
  const [query, setQuery] = useState('');
  const [picked, setPicked] = useState(new Map()); // selector (item id or folder path) -> label
  const [more, setMore] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [moreError, setMoreError] = useState(null);
  const [downloadError, setDownloadError] = useState(null);
  const [downloading, setDownloading] = useState('');
  const base = '/protected-objects/' + encodeURIComponent(obj.id) + '/snapshots/' + encodeURIComponent(snap.id) + '/items';
  const params = query ? { q: query, limit: ITEMS_PAGE } : { folder, limit: ITEMS_PAGE };
  const list = useApi(base + qs(params));
  useEffect(() => { setMore([]); setCursor(list.data ? list.data.nextCursor : null); }, [list.data]);
  const loadMore = async () => {
    setMoreError(null);
    try {
      const r = await api('GET', base + qs({ ...params, cursor }));
      setMore([...more, ...r.items]); setCursor(r.nextCursor);
    } catch (e) { setMoreError(e); }
  };
  const open = (path) => { setQuery(''); setQ(''); setFolder(path || '/'); };
  const search = (e) => { e.preventDefault(); setQuery(q.trim()); };
  const key = (it) => (it.kind === 'folder' ? it.path : it.id);
  const toggle = (it) => {
    const next = new Map(picked);
    if (next.has(key(it))) next.delete(key(it)); else next.set(key(it), it.kind === 'folder' ? 'Folder ' + it.path : it.subject || it.name);
    setPicked(next);
  };
  const download = async (it) => {
    setDownloadError(null); setDownloading(it.id);
    try {
      const { blob, filename } = await apiDownload('GET', base + '/' + encodeURIComponent(it.id) + '/content');
      saveFile(blob, filename);
    } catch (e) { setDownloadError(e); }
    setDownloading('');
  };
  const path = crumbs(folder);
  return html`<section class="panel flush" aria-labelledby="browse-title" data-testid="snapshot-browser">
    <div class="browse-head"><h2 id="browse-title">Snapshot of <${Time} at=${snap.at} seconds /></h2><span class="spacer"></span>
      ${picked.size > 0 && html`<span class="small" data-testid="picked">${picked.size} selected</span><button class="small" onClick=${() => setPicked(new Map())}>Clear selection</button>`}
      <button class="primary" onClick=${() => onRestore(picked)}>Restore…</button></div>
    <form class="filters" role="search" onSubmit=${search}>
      <div class="field grow"><label for="item-q">Search subject or sender</label><input id="item-q" type="search" placeholder="Whole snapshot: subject, sender or name" value=${q} onInput=${(e) => setQ(e.target.value)} /></div>
      <button type="submit">Search</button>${query && html`<button type="button" onClick=${() => open(folder)}>Clear search</button>`}
    </form>
    <nav class="folder-path" aria-label="Folder">
      ${query ? html`<span>Messages matching “<strong>${query}</strong>” in every folder</span>` : html`
        ${path.length ? html`<button class="link" onClick=${() => open('/')}>All folders</button>` : html`<strong>All folders</strong>`}
        ${path.map((c, i) => html`<span key=${c.path}><span class="sep" aria-hidden="true">›</span>${i === path.length - 1 ? html`<strong aria-current="location">${c.name}</strong>` : html`<button class="link" onClick=${() => open(c.path)}>${c.name}</button>`}</span>`)}`}
    </nav>
    <${ErrorNote} error=${downloadError} />
    <${Loaded} state=${list.path === base + qs(params) ? list : { ...list, data: null }} what="Snapshot items" rows=${5}>${(d) => {
      const items = [...d.items, ...more];
      if (items.length === 0) return html`<${Empty} title=${query ? 'No message matches' : 'This folder is empty'}>${query ? 'Try another word from the subject or the sender’s name or address.' : 'It held no messages when the snapshot was taken.'}<//>`;
      return html`<div class="table-wrap"><table class="items"><thead><tr><th class="pick"><span class="sr-only">Select</span></th><th>Subject</th><th class="hide-narrow">From</th><th class="hide-narrow">Date</th><th class="num">Size</th><th class="hide-narrow">Flags</th><th><span class="sr-only">Download</span></th></tr></thead><tbody>
        ${items.map((it) => it.kind === 'folder' ? html`<tr key=${'f' + it.id} class="folder" data-folder=${it.path}>
            <td class="pick"><input type="checkbox" aria-label=${'Select folder ' + it.path} checked=${picked.has(key(it))} onChange=${() => toggle(it)} /></td>
            <td colspan="6"><button class="link folder-link" onClick=${() => open(it.path)}><span class="folder-icon" aria-hidden="true"></span>${it.name}</button>${query && html` <span class="small muted">${it.path}</span>`}</td></tr>`
          : html`<tr key=${it.id} data-item=${it.id}>
            <td class="pick"><input type="checkbox" aria-label=${'Select ' + (it.subject || it.name)} checked=${picked.has(key(it))} onChange=${() => toggle(it)} /></td>
            <td class="subject"><span class="name">${it.subject || html`<span class="muted">(no subject)</span>`}</span>
              <div class="small muted show-narrow sender-under">${it.from}</div>${query && html`<div class="small muted">${it.path}</div>`}</td>
            <td class="sender hide-narrow">${it.from || html`<span class="muted">—</span>`}</td>
            <td class="hide-narrow nowrap"><${Time} at=${it.date} empty="—" /></td>
            <td class="num nowrap">${bytes(it.size)}</td>
            <td class="hide-narrow"><${Flags} flags=${it.flags} /></td>
            <td class="num">${it.kind === 'message' || it.kind === 'file' ? html`<button class="small" aria-label=${'Download ' + (it.subject || it.name) + ' as .eml'} disabled=${downloading === it.id} onClick=${() => download(it)}>${downloading === it.id ? 'Downloading…' : '.eml'}</button>` : null}</td>
          </tr>`)}
      </tbody></table></div>
      <${ErrorNote} error=${moreError} />
      ${cursor && html`<div class="pager"><span class="spacer"></span><button onClick=${loadMore}>Show more</button></div>`}`;
    }}<//>
  </section>`;
}

function RestoreDialog({ obj, snap, picked, onClose }) {
  const [what, setWhat] = useState(picked.size ? 'picked' : 'all');
  const [dest, setDest] = useState(obj.id);
  const [folder, setFolder] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  // Other IMAP accounts of the same tenant that can take mail: a source
  // that is present and enabled.
  const targets = useApi('/protected-objects?kind=imap', [], { all: true, tenant: obj.tenantId });
  const srcs = useApi('/sources', [], { all: true, tenant: obj.tenantId });
  const usable = (targets.data && srcs.data) ? targets.data.items.filter((o) => o.tenantId === obj.tenantId && o.sourceId
    && srcs.data.items.some((s) => s.id === o.sourceId && s.state !== 'disabled')) : [];
  const original = usable.some((o) => o.id === obj.id);
  useEffect(() => { if (targets.data && srcs.data && !original && dest === obj.id && usable.length) setDest(usable[0].id); }, [targets.data, srcs.data]);
  const defaultFolder = restoreFolder(snap.at);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { snapshotId: snap.id };
    if (what === 'picked') body.items = [...picked.keys()];
    const d = {};
    if (dest !== obj.id) d.protectedObjectId = dest;
    if (folder.trim()) d.folder = folder.trim();
    if (Object.keys(d).length) body.destination = d;
    try {
      const j = await api('POST', '/restores', body, { tenant: obj.tenantId });
      onClose(true);
      navigate('/ui/jobs/' + encodeURIComponent(j.id));
    } catch (err) { setError(err); setBusy(false); }
  };
  const f = (error && error.fields) || {};
  const itemsError = Object.keys(f).find((k) => k.startsWith('items'));
  const destName = (usable.find((o) => o.id === dest) || obj).displayName;
  return html`<${Dialog} title="Restore messages" onClose=${() => onClose(false)}><form onSubmit=${submit}>
    <p>From the snapshot of <strong><${Time} at=${snap.at} seconds /></strong> of ${obj.displayName}.</p>
    <fieldset class="field"><legend class="label">What</legend>
      <label class="check"><input type="radio" name="what" value="all" checked=${what === 'all'} onChange=${() => setWhat('all')} /> Everything in the snapshot (every folder and message)</label>
      <label class="check"><input type="radio" name="what" value="picked" disabled=${picked.size === 0} checked=${what === 'picked'} onChange=${() => setWhat('picked')} /> The selected items (${picked.size})</label>
      ${what === 'picked' && html`<ul class="plain small picked-list">${[...picked.values()].slice(0, 8).map((l, i) => html`<li key=${i}>${l}</li>`)}${picked.size > 8 && html`<li>and ${picked.size - 8} more</li>`}</ul>`}
      ${picked.size === 0 && html`<div class="hint">To restore only some messages or folders, close this, tick them in the snapshot and choose Restore… again.</div>`}
      ${itemsError && html`<div class="error">${f[itemsError]}</div>`}
    </fieldset>
    <${Field} label="Into the account" error=${f['destination.protectedObjectId']}>${(a) => html`<select ...${a} value=${dest} onChange=${(e) => setDest(e.target.value)}>
      ${!original && html`<option value=${obj.id} disabled>${obj.displayName} (cannot take mail: its account is deleted or disabled)</option>`}
      ${usable.map((o) => html`<option key=${o.id} value=${o.id}>${o.displayName}${o.id === obj.id ? ' (the original account)' : ''} · ${o.address}</option>`)}</select>`}<//>
    <${Field} label="Folder (optional)" error=${f['destination.folder']} hint=${html`Default: a new folder <strong class="mono">${defaultFolder}</strong> in ${destName}. The snapshot’s folders are recreated inside it, with each message’s exact bytes, flags and date.`}>${(a) => html`<input ...${a}
      type="text" spellcheck="false" placeholder=${defaultFolder} value=${folder} onInput=${(e) => setFolder(e.target.value)} />`}<//>
    <div class="alert info small">A restore never overwrites or deletes anything, and never duplicates: a message already in the destination folder is skipped, so running the same restore again adds nothing.</div>
    ${error && !itemsError && !f['destination.protectedObjectId'] && !f['destination.folder'] && html`<${ErrorNote} error=${error} />`}
    <div class="actions"><button type="button" onClick=${() => onClose(false)}>Cancel</button>
      <button class="primary" type="submit" disabled=${busy || (!original && dest === obj.id)}>${busy ? 'Starting…' : 'Start restore'}</button></div>
  </form><//>`;
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
