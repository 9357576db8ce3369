// Storage: the targets the blob store writes to, with the state of their
// last check; adding and changing targets and the one download of the
// appliance key (provider administrators); the tenant's retention policy.
// Retention sits here rather than on a page of its own because it decides
// how much of the storage shown above a tenant's backups take.
import { html, useState, useEffect, useRef } from '../lib.js';
import { api, apiDownload } from '../api.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, Field, ErrorNote, Empty, Dialog, Link, Progress, bytes, saveFile } from '../ui.js';
import { PolicyForm, defaultPolicy, describePolicy } from './retention.js';

/** A target's state in words and tone (CONTRACT §11). */
export const storageStates = {
  ok: ['OK', 'green'],
  degraded: ['Degraded', 'yellow'],
  full: ['Full', 'red'],
  unreachable: ['Unreachable', 'red'],
};

export function StorageStateBadge({ state }) {
  const [label, tone] = storageStates[state] || [state, ''];
  return html`<${Badge} tone=${tone}>${label}<//>`;
}

const stateHelp = {
  degraded: 'The target answers, but a step of the check failed.',
  full: 'Free space is below the minimum: backups to it fail until space is freed.',
  unreachable: 'The last check could not connect to the target.',
};

function Where({ t }) {
  if (t.kind === 'local') return html`<span class="mono">${t.path}</span>`;
  return html`<span class="mono">${t.tls === false ? 'http' : 'https'}://${t.endpoint}</span>
    <div class="small muted">bucket <span class="mono">${t.bucket}</span>${t.prefix && html`, prefix <span class="mono">${t.prefix}</span>`}${t.region && html`, region ${t.region}`}${t.pathStyle && ', path-style'}</div>`;
}

function Capacity({ t }) {
  if (t.capacityBytes === null || t.capacityBytes === undefined) return html`<span class="muted">not reported</span>`;
  const pct = t.capacityBytes ? (t.usedBytes / t.capacityBytes) * 100 : 0;
  return html`<div style=${{ minWidth: '150px' }}><${Progress} percent=${pct} tone=${pct > 90 ? 'red' : pct > 75 ? 'yellow' : ''} />
    <div class="small muted" style=${{ marginTop: '4px' }}>${bytes(t.usedBytes)} used of ${bytes(t.capacityBytes)} · ${bytes(t.freeBytes)} free</div></div>`;
}

function Placed({ t, tenantName }) {
  const names = t.tenantIds.map(tenantName);
  if (t.default) return names.length ? html`${names.join(', ')}<div class="small muted">and every tenant not placed elsewhere</div>` : html`<span class="muted">Every tenant not placed elsewhere</span>`;
  return names.length ? names.join(', ') : html`<span class="muted">None placed</span>`;
}

function TargetsTable({ items, ctx, onEdit }) {
  const tenantName = (id) => (ctx.tenants.find((x) => x.id === id) || {}).name || id;
  return html`<div class="table-wrap"><table class="targets"><thead><tr><th>Target</th><th>Where</th><th>State</th><th>Capacity</th><th class="num">Stored</th><th>Tenants</th><th class="hide-narrow">Checked</th>${ctx.provider && html`<th><span class="sr-only">Actions</span></th>`}</tr></thead><tbody>
    ${items.map((t) => html`<tr key=${t.id} data-target=${t.id}>
      <td><span class="name">${t.name}</span> ${t.default && html`<${Badge} tone="blue">Default<//>`}<div class="small muted">${t.kind === 'local' ? 'Local directory' : 'S3-compatible'}</div></td>
      <td class="where"><${Where} t=${t} /></td>
      <td class="state"><${StorageStateBadge} state=${t.state} />${t.state !== 'ok' && html`<div class="small last-error">${t.lastError || stateHelp[t.state]}</div>`}</td>
      <td><${Capacity} t=${t} /></td>
      <td class="num">${bytes(t.storedBytes)}</td>
      <td class="small"><${Placed} t=${t} tenantName=${tenantName} /></td>
      <td class="hide-narrow"><${Ago} at=${t.checkedAt} empty="not yet" /></td>
      ${ctx.provider && html`<td class="num"><button class="small" onClick=${() => onEdit(t)} aria-label=${'Edit ' + t.name}>Edit</button></td>`}
    </tr>`)}
  </tbody></table></div>`;
}

/**
 * What became of the last submit, just above the form's buttons where the
 * person's eyes are, scrolled into view in a long dialog: the check
 * running, its refusal in the appliance's own words (they are written for
 * the person adding the target), or another error.
 */
function Outcome({ busy, checking, error, refused }) {
  const ref = useRef(null);
  useEffect(() => { if ((busy || error) && ref.current) ref.current.scrollIntoView({ block: 'nearest' }); }, [busy, error]);
  return html`<div ref=${ref} class="outcome">
    ${busy && checking && html`<div class="alert info" role="status">${checking}</div>`}
    ${!busy && error && error.code === 'storage_target_unusable' ? html`<div class="alert error" role="alert" data-testid="check-failed"><strong>${refused}</strong><div class="check-detail">${error.message}</div></div>`
      : !busy && html`<${ErrorNote} error=${error} />`}
  </div>`;
}

function TenantChecks({ ctx, value, onChange, hint }) {
  if (ctx.tenants.length === 0) return html`<p class="small muted">No tenants yet. Tenants created later use the default target until you place them.</p>`;
  const toggle = (id) => onChange(value.includes(id) ? value.filter((x) => x !== id) : [...value, id]);
  return html`<fieldset class="field"><legend class="label">Tenants placed on this target</legend>
    <div class="checks">${ctx.tenants.map((tn) => html`<label key=${tn.id}><input type="checkbox" checked=${value.includes(tn.id)} onChange=${() => toggle(tn.id)} /> ${tn.name}</label>`)}</div>
    <div class="hint">${hint}</div></fieldset>`;
}

const placementHint = 'New backups of these tenants go to this target; each moves from any other target. Data already written stays where it is and is read from there.';

function AddTarget({ ctx, onClose }) {
  const [form, setForm] = useState({ kind: 'local', name: '', path: '', endpoint: '', region: '', bucket: '', prefix: '', accessKeyId: '', secretAccessKey: '', pathStyle: false, tls: true, default: false, tenantIds: [] });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { name: form.name, kind: form.kind };
    if (form.kind === 'local') body.path = form.path;
    else {
      for (const k of ['endpoint', 'region', 'bucket', 'prefix', 'accessKeyId', 'secretAccessKey']) if (form[k]) body[k] = form[k];
      body.pathStyle = form.pathStyle; body.tls = form.tls;
    }
    if (form.default) body.default = true;
    if (form.tenantIds.length) body.tenantIds = form.tenantIds;
    try { onClose(await api('POST', '/storage-targets', body, { tenant: '' })); } catch (err) { setError(err); setBusy(false); }
  };
  const f = (error && error.fields) || {};
  const text = (k, label, a = {}) => html`<${Field} label=${label} error=${f[k]} hint=${a.hint}>${(x) => html`<input ...${x} type=${a.type || 'text'} required=${!!a.required} autocomplete="off" spellcheck="false" placeholder=${a.placeholder} value=${form[k]} onInput=${set(k)} />`}<//>`;
  return html`<${Dialog} title="Add storage target" onClose=${() => onClose(null)}><form onSubmit=${submit}>
    ${text('name', 'Name', { required: true, hint: 'How the target is listed, e.g. “NAS in the rack” or “Wasabi eu-central”.' })}
    <fieldset class="field"><legend class="label">Kind</legend><div class="checks">
      <label><input type="radio" name="kind" value="local" checked=${form.kind === 'local'} onChange=${set('kind')} /> Local directory</label>
      <label><input type="radio" name="kind" value="s3" checked=${form.kind === 's3'} onChange=${set('kind')} /> S3-compatible</label>
    </div></fieldset>
    ${form.kind === 'local' ? text('path', 'Directory path', { required: true, placeholder: '/mnt/backup', hint: 'Absolute path of an existing directory on the appliance. Mount the disk or share first: the directory is not created.' }) : html`
      ${text('endpoint', 'Endpoint', { required: true, placeholder: 's3.eu-central-1.wasabisys.com', hint: 'Host name and optional :port of the S3 API, without https://.' })}
      ${text('bucket', 'Bucket', { required: true, hint: 'An existing bucket.' })}
      ${text('region', 'Region (if the provider needs one)')}
      ${text('prefix', 'Prefix (optional)', { hint: 'Keys start with this inside the bucket, to share a bucket.' })}
      ${text('accessKeyId', 'Access key ID', { required: true })}
      ${text('secretAccessKey', 'Secret access key', { required: true, type: 'password', hint: 'Stored encrypted and never shown again.' })}
      <div class="field"><label class="check"><input type="checkbox" checked=${form.tls} onChange=${set('tls')} /> Use HTTPS</label>
        <label class="check"><input type="checkbox" checked=${form.pathStyle} onChange=${set('pathStyle')} /> Path-style addressing</label>
        <div class="hint">Path-style puts the bucket in the path instead of the host name; MinIO and many self-hosted servers need it.</div>${(f.tls || f.pathStyle) && html`<div class="error">${f.tls || f.pathStyle}</div>`}</div>`}
    <div class="field"><label class="check"><input type="checkbox" checked=${form.default} onChange=${set('default')} /> Make this the default target</label>
      <div class="hint">Tenants not placed on a target write to the default.</div></div>
    <${TenantChecks} ctx=${ctx} value=${form.tenantIds} onChange=${(ids) => setForm({ ...form, tenantIds: ids })} hint=${placementHint} />
    <${Outcome} busy=${busy} error=${error} refused="The target did not pass the check. Nothing was saved."
      checking="Checking the target… The appliance writes, reads back and deletes a small test object before it saves anything; an unreachable target can take up to 30 seconds." />
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button><button class="primary" type="submit" disabled=${busy}>${busy ? 'Checking the target…' : 'Check and add target'}</button></div>
  </form><//>`;
}

function EditTarget({ ctx, t, onClose }) {
  const [form, setForm] = useState({ name: t.name, default: t.default, tenantIds: t.tenantIds, accessKeyId: t.accessKeyId || '', secretAccessKey: '' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const newCredentials = t.kind === 's3' && (form.secretAccessKey !== '' || form.accessKeyId !== (t.accessKeyId || ''));
  const submit = async (e) => {
    e.preventDefault();
    const body = {};
    if (form.name !== t.name) body.name = form.name;
    if (form.default && !t.default) body.default = true;
    const same = form.tenantIds.length === t.tenantIds.length && form.tenantIds.every((x) => t.tenantIds.includes(x));
    if (!same) body.tenantIds = form.tenantIds;
    if (t.kind === 's3' && form.accessKeyId !== (t.accessKeyId || '')) body.accessKeyId = form.accessKeyId;
    if (t.kind === 's3' && form.secretAccessKey) body.secretAccessKey = form.secretAccessKey;
    if (Object.keys(body).length === 0) { onClose(null); return; }
    setBusy(true); setError(null);
    try { onClose(await api('PATCH', '/storage-targets/' + encodeURIComponent(t.id), body, { tenant: '' })); } catch (err) { setError(err); setBusy(false); }
  };
  const f = (error && error.fields) || {};
  return html`<${Dialog} title=${'Edit ' + t.name} onClose=${() => onClose(null)}><form onSubmit=${submit}>
    <${Field} label="Name" error=${f.name}>${(a) => html`<input ...${a} type="text" required maxlength="200" value=${form.name} onInput=${(e) => setForm({ ...form, name: e.target.value })} />`}<//>
    <div class="field"><label class="check"><input type="checkbox" checked=${form.default} disabled=${t.default} onChange=${(e) => setForm({ ...form, default: e.target.checked })} /> Default target</label>
      <div class="hint">${t.default ? 'This is the default. To change that, make another target the default.' : 'Tenants not placed elsewhere write here from now on; the current default stops being it.'}</div>${f.default && html`<div class="error">${f.default}</div>`}</div>
    <${TenantChecks} ctx=${ctx} value=${form.tenantIds} onChange=${(ids) => setForm({ ...form, tenantIds: ids })} hint=${placementHint} />
    ${f.tenantIds && html`<div class="error">${f.tenantIds}</div>`}
    ${t.kind === 's3' && html`<h3>New credentials</h3>
      <${Field} label="Access key ID" error=${f.accessKeyId}>${(a) => html`<input ...${a} type="text" autocomplete="off" spellcheck="false" value=${form.accessKeyId} onInput=${(e) => setForm({ ...form, accessKeyId: e.target.value })} />`}<//>
      <${Field} label="Secret access key" error=${f.secretAccessKey} hint="Leave empty to keep the stored secret. New credentials are checked before they replace the old ones.">${(a) => html`<input ...${a} type="password" autocomplete="new-password" value=${form.secretAccessKey} onInput=${(e) => setForm({ ...form, secretAccessKey: e.target.value })} />`}<//>`}
    <p class="small muted">The kind, path, endpoint and bucket cannot change: the data is there.</p>
    <${Outcome} busy=${busy} error=${error} refused="The new credentials did not pass the check. The old ones stay in use."
      checking=${newCredentials && 'Checking the new credentials…'} />
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button><button class="primary" type="submit" disabled=${busy}>${busy ? (newCredentials ? 'Checking…' : 'Saving…') : 'Save changes'}</button></div>
  </form><//>`;
}

/**
 * The one download of the appliance key. The appliance cannot be asked
 * whether it was downloaded without spending the download, so the panel
 * learns it from the answer: the file, or 410 naming who has it.
 */
function ApplianceKey({ ctx }) {
  const [state, setState] = useState(null); // null | {busy} | {done, at, filename} | {gone: message} | {error}
  const download = async () => {
    setState({ busy: true });
    try {
      const { blob, filename } = await apiDownload('POST', '/storage/appliance-key');
      saveFile(blob, filename);
      setState({ done: true, at: new Date().toISOString(), filename });
    } catch (err) {
      setState(err.code === 'gone' ? { gone: err.message } : { error: err });
    }
  };
  return html`<section class="panel" aria-labelledby="key-title"><h2 id="key-title">Appliance key</h2>
    <div class="alert warn"><strong>This key decrypts every backup this appliance stores.</strong> Without it, losing this machine loses the backups: the storage targets alone cannot be read. Download it once and keep it offline, apart from the appliance (a password manager, a safe). The appliance offers it only once.</div>
    ${state && state.error && html`<${ErrorNote} error=${state.error} />`}
    ${state && state.done && html`<div class="alert ok" role="status" data-testid="key-downloaded">Downloaded as <span class="mono">${state.filename}</span> by ${ctx.session.user.email}, <${Time} at=${state.at} seconds />. Store it offline now: the appliance will not offer it again.</div>`}
    ${state && state.gone && html`<div class="alert info" role="status" data-testid="key-gone">${state.gone} If that copy is lost, keep this appliance's data directory safe: it holds the only other copy.</div>`}
    ${!(state && (state.done || state.gone)) && html`<button class="primary" onClick=${download} disabled=${state && state.busy}>${state && state.busy ? 'Downloading…' : 'Download appliance key'}</button>`}
  </section>`;
}

/** The tenant whose retention the panel shows: a tenant administrator's own, or one a provider picks. */
function RetentionPanel({ ctx }) {
  const own = ctx.session.user.tenantId || '';
  const [picked, setPicked] = useState(ctx.tenant || (ctx.tenants[0] && ctx.tenants[0].id) || '');
  const tenantId = own || picked || (ctx.tenants[0] && ctx.tenants[0].id) || '';
  const [note, setNote] = useState(null);
  const [error, setError] = useState(null);
  const [running, setRunning] = useState(false);
  const path = tenantId ? '/retention?tenantId=' + encodeURIComponent(tenantId) : null;
  const loaded = useApi(path);
  // While another tenant's policy loads, the previous answer is not shown as this one's.
  const pol = loaded.path === path ? loaded : { ...loaded, data: null, error: null };
  const name = (ctx.tenants.find((x) => x.id === tenantId) || {}).name || tenantId;
  const put = (policy) => api('PUT', '/retention?tenantId=' + encodeURIComponent(tenantId), policy);
  const run = async () => {
    setError(null); setNote(null); setRunning(true);
    try {
      const j = await api('POST', '/retention/run', { tenantId });
      setNote({ job: j });
    } catch (e) { setError(e); }
    setRunning(false);
  };
  return html`<section class="panel" aria-labelledby="retention-title"><div class="page-head" style=${{ marginBottom: '8px' }}><h2 id="retention-title" style=${{ margin: 0 }}>Retention</h2><span class="spacer"></span>
    ${!own && ctx.tenants.length > 0 && html`<label for="ret-tenant">Tenant</label><select id="ret-tenant" style=${{ width: 'auto', maxWidth: '260px' }} value=${tenantId}
      onChange=${(e) => { setPicked(e.target.value); setNote(null); setError(null); }}>${ctx.tenants.map((tn) => html`<option key=${tn.id} value=${tn.id}>${tn.name}</option>`)}</select>`}</div>
    <p class="muted">Which backups of ${own ? 'your' : name + '’s'} mailboxes, drives, servers and clients are kept as they age. Retention runs every night at 02:30 UTC; a policy applies from its next run.</p>
    ${!tenantId ? html`<${Empty} title="No tenants yet">Create a tenant first: each tenant has its own retention policy.<//>` : html`
    <${ErrorNote} error=${error} />
    ${note && note.job && html`<div class="alert ok" role="status" data-testid="retention-job">Retention for ${name} is ${note.job.state === 'running' ? 'running' : 'queued'}. <${Link} href=${'/ui/jobs/' + encodeURIComponent(note.job.id)}>Follow the job<//></div>`}
    <${Loaded} state=${pol} what="Retention policies" rows=${4}>${(r) => html`
      <p><strong>Now:</strong> ${describePolicy(r.policy)} ${r.isDefault && html`<${Badge} tone="blue">Default policy<//>`}</p>
      <${PolicyForm} key=${tenantId} idPrefix="ret-" initial=${r.policy} resetTo=${defaultPolicy} save=${async (p) => { const saved = await put(p); pol.reload(); return saved.policy; }}>
        <button type="button" onClick=${run} disabled=${running}>${running ? 'Starting…' : 'Run retention now'}</button>
      <//>`}<//>`}
  </section>`;
}

function Summary({ s }) {
  const reported = s.targets.some((t) => t.freeBytes !== null && t.freeBytes !== undefined);
  return html`<p class="summary" data-testid="storage-summary"><${StorageStateBadge} state=${s.state} />
    <span>${s.targets.length} target${s.targets.length === 1 ? '' : 's'}</span><span>·</span>
    <span>${bytes(s.storedBytes)} stored</span><span>·</span>
    <span>${reported ? `${bytes(s.freeBytes)} free` : 'free space not reported'}</span></p>`;
}

export function StoragePage({ ctx }) {
  // Storage is the appliance's: a provider administrator sees every target
  // whichever tenant the menu selects; a tenant administrator the targets
  // holding their tenant's data, read-only.
  const scope = ctx.provider ? { tenant: '' } : {};
  const [tick, setTick] = useState(0);
  const overview = useApi('/storage', [tick], scope);
  const list = useApi(ctx.provider ? '/storage-targets' : null, [tick], { all: true, ...scope });
  const [dialog, setDialog] = useState(null);
  const [added, setAdded] = useState(null);
  const reload = () => setTick(tick + 1);
  const close = (t) => { const kind = dialog && dialog.kind; setDialog(null); if (t) { setAdded(kind === 'add' ? t : null); reload(); } };
  const add = ctx.provider && html`<button class="primary" onClick=${() => { setAdded(null); setDialog({ kind: 'add' }); }}>Add storage target</button>`;
  const targets = ctx.provider ? list : { ...overview, data: overview.data && { items: overview.data.targets } };
  return html`<${PageHead} title="Storage"><button onClick=${reload}>Refresh</button>${add}<//>
    <p class="muted">Where the appliance keeps the mail, files and archive it backs up itself, encrypted and deduplicated. Servers and clients back up to their own repositories on the appliance’s disk.</p>
    ${overview.data && html`<${Summary} s=${overview.data} />`}
    ${ctx.provider && ctx.tenant && html`<p class="small muted">Storage is shown for the whole appliance: the tenant menu does not narrow it. The retention below is per tenant.</p>`}
    ${added && html`<div class="alert ok" role="status" data-testid="target-added">Target “${added.name}” added: the check passed (write, read back, conditional create, delete).</div>`}
    ${!ctx.provider && html`<div class="alert info">These are the targets holding your tenant’s backups. Your provider manages them.</div>`}
    <${Loaded} state=${targets} what="Storage targets" rows=${3}>${(d) => html`<div class="panel flush">
      ${d.items.length === 0 ? html`<${Empty} title="No storage targets yet" action=${add}>The appliance creates its local target when it starts.<//>`
        : html`<${TargetsTable} items=${d.items} ctx=${ctx} onEdit=${(t) => setDialog({ kind: 'edit', t })} />`}
    </div>`}<//>
    ${ctx.provider && html`<${ApplianceKey} ctx=${ctx} />`}
    <${RetentionPanel} ctx=${ctx} />
    ${dialog && dialog.kind === 'add' && html`<${AddTarget} ctx=${ctx} onClose=${close} />`}
    ${dialog && dialog.kind === 'edit' && html`<${EditTarget} ctx=${ctx} t=${dialog.t} onClose=${close} />`}`;
}
