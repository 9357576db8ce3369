// Integrations -> API keys. The value is shown once, in the dialog that
// created it; the list shows only fingerprints.
import { html, useState } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Time, Ago, Badge, Field, ErrorNote, Empty, Dialog, Confirm, Secret, CopyButton, Link } from '../ui.js';

/** The key created last in this tab, for the curl example in the API reference. Memory only. */
export const recentKey = { value: '', name: '', tenantId: '', provider: false };

export function curlExample(value, tenantId, provider) {
  const header = provider && tenantId ? ` \\\n  -H 'X-Service-Tenant: ${tenantId}'` : '';
  return `curl -sS ${location.origin}/api/v1/status \\\n  -H 'Authorization: Bearer ${value}'${header}`;
}

const expiries = [['30', '30 days'], ['90', '90 days'], ['180', '180 days'], ['365', '365 days'], ['', 'No expiry']];

function CreateKey({ ctx, onClose }) {
  const scopes = ctx.session.user.scopes;
  const providerEdition = ctx.session.user.edition === 'provider';
  const [form, setForm] = useState({ name: '', tenantId: ctx.tenant || (ctx.session.user.tenantId || ''), provider: false, scopes: ['status:read'], expires: '90' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState(null);
  const toggle = (s) => setForm({ ...form, scopes: form.scopes.includes(s) ? form.scopes.filter((x) => x !== s) : [...form.scopes, s] });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { name: form.name, scopes: form.scopes, expiresInDays: form.expires ? Number(form.expires) : null };
    if (form.provider) body.provider = true; else if (form.tenantId) body.tenantId = form.tenantId;
    try {
      const k = await api('POST', '/api-keys', body);
      Object.assign(recentKey, { value: k.value, name: k.name, tenantId: k.tenantId || '', provider: k.provider });
      setCreated(k);
    } catch (err) { setError(err); }
    setBusy(false);
  };
  if (created) {
    return html`<${Dialog} title="Your new API key" onClose=${() => onClose(true)} footer=${html`<button class="primary" onClick=${() => onClose(true)}>I have stored the key</button>`}>
      <div class="alert warn" role="alert"><strong>Copy this key now.</strong> It is shown only once: Backstop keeps only its fingerprint and cannot show it again. If it is lost, revoke it and create a new one.</div>
      <${Secret} value=${created.value} label="API key value" />
      <p class="small muted">Key “${created.name}” · scopes ${created.scopes.join(', ')} · ${created.expiresAt ? html`expires <${Time} at=${created.expiresAt} />` : 'never expires'}</p>
      <h3>Try it</h3>
      <pre class="code">${curlExample(created.value, created.tenantId, created.provider)}</pre>
      <div class="actions" style=${{ justifyContent: 'flex-start', marginTop: 0 }}><${CopyButton} text=${curlExample(created.value, created.tenantId, created.provider)} label="Copy curl command" /><${Link} class="button" href="/ui/reference">Open the API reference<//></div>
    <//>`;
  }
  const f = (error && error.fields) || {};
  return html`<${Dialog} title="New API key" onClose=${() => onClose(false)}>
    <form onSubmit=${submit}>
      <${ErrorNote} error=${error} />
      <${Field} label="Name" error=${f.name} hint="Shown in the key list and the audit log, e.g. “PSA sync”.">${(a) => html`<input ...${a} type="text" maxlength="100" required value=${form.name} onInput=${(e) => setForm({ ...form, name: e.target.value })} />`}<//>
      ${ctx.provider && html`<${Field} label="Tenant" error=${f.tenantId || f.provider}>${(a) => html`<select ...${a} value=${form.provider ? '*' : form.tenantId} onChange=${(e) => setForm({ ...form, provider: e.target.value === '*', tenantId: e.target.value === '*' ? '' : e.target.value })}>
          <option value="" disabled>Choose a tenant</option>
          ${ctx.tenants.map((t) => html`<option key=${t.id} value=${t.id}>${t.name}</option>`)}
          ${providerEdition && html`<option value="*">Provider key: every tenant</option>`}
        </select>`}<//>`}
      <fieldset class="field" aria-describedby="scopes-hint">
        <legend class="label" style=${{ fontWeight: 550, fontSize: '13px', marginBottom: '6px' }}>Scopes</legend>
        <div class="checks">${scopes.map((s) => html`<label key=${s}><input type="checkbox" checked=${form.scopes.includes(s)} onChange=${() => toggle(s)} /> <code>${s}</code></label>`)}</div>
        <div class="hint" id="scopes-hint">Scopes do not imply each other: a key that changes protection also needs the read scope to read users.</div>
        ${f.scopes && html`<div class="error">${f.scopes}</div>`}
      </fieldset>
      <${Field} label="Expires" error=${f.expiresInDays}>${(a) => html`<select ...${a} value=${form.expires} onChange=${(e) => setForm({ ...form, expires: e.target.value })}>
        ${expiries.map(([v, l]) => html`<option key=${v} value=${v}>${l}</option>`)}</select>`}<//>
      <div class="actions"><button type="button" onClick=${() => onClose(false)}>Cancel</button>
        <button class="primary" type="submit" disabled=${busy || form.scopes.length === 0 || (ctx.provider && !form.provider && !form.tenantId)}>${busy ? 'Creating…' : 'Create key'}</button></div>
    </form>
  <//>`;
}

export function KeysPage({ ctx }) {
  const list = useApi('/api-keys', [], { all: true });
  const [dialog, setDialog] = useState(null);
  const tenantName = (id) => (ctx.tenants.find((t) => t.id === id) || {}).name || id;
  const close = (changed) => { setDialog(null); if (changed) list.reload(); };
  const add = html`<button class="primary" onClick=${() => setDialog({ kind: 'create' })}>New API key</button>`;
  const now = Date.now();
  return html`<${PageHead} title="API keys" crumb="Integrations">${add}<//>
    <p class="muted">Keys let RMM, PSA and ticketing tools use the <${Link} href="/ui/reference">REST API<//>. Each key belongs to one tenant and carries only the scopes you choose.</p>
    <${Loaded} state=${list} what="API keys">${(d) => html`<div class="panel flush">
      ${d.items.length === 0 ? html`<${Empty} title="No API keys yet" action=${add}>Create a key for each tool that connects to Backstop, with only the scopes it needs.<//>` : html`
      <div class="table-wrap"><table><thead><tr><th>Name</th>${ctx.provider && html`<th>Tenant</th>`}<th>Scopes</th><th>Fingerprint</th><th>Last used</th><th>Expires</th><th>State</th><th><span class="sr-only">Actions</span></th></tr></thead><tbody>
        ${d.items.map((k) => {
          const expired = k.expiresAt && new Date(k.expiresAt) <= now;
          return html`<tr key=${k.id} class=${k.revokedAt ? 'revoked' : ''}>
            <td class="name">${k.name}</td>
            ${ctx.provider && html`<td>${k.provider ? html`<${Badge} tone="blue">Provider<//>` : tenantName(k.tenantId)}</td>`}
            <td class="small">${k.scopes.join(', ')}</td>
            <td class="mono" title=${'SHA-256 ' + k.fingerprint}>${k.fingerprint.slice(0, 12)}…</td>
            <td><${Ago} at=${k.lastUsedAt} /></td>
            <td><${Time} at=${k.expiresAt} empty="never" /></td>
            <td>${k.revokedAt ? html`<${Badge}>Revoked<//>` : expired ? html`<${Badge} tone="yellow">Expired<//>` : html`<${Badge} tone="green">Active<//>`}</td>
            <td class="num">${!k.revokedAt && html`<button class="danger small" onClick=${() => setDialog({ kind: 'revoke', key: k })}>Revoke</button>`}</td>
          </tr>`;
        })}
      </tbody></table></div>`}
    </div>`}<//>
    ${dialog && dialog.kind === 'create' && html`<${CreateKey} ctx=${ctx} onClose=${close} />`}
    ${dialog && dialog.kind === 'revoke' && html`<${Confirm} title="Revoke this key?" confirmLabel="Revoke key" onClose=${close}
        act=${() => api('DELETE', '/api-keys/' + encodeURIComponent(dialog.key.id))}>
      <p>Any tool using “${dialog.key.name}” loses access with its next request. This cannot be undone; the key stays listed for the audit trail.</p><//>`}`;
}
