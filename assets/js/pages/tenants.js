// Tenants: provider administrators list and create them; a tenant
// administrator sees only its own.
import { html, useState } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Time, Field, ErrorNote, Empty } from '../ui.js';

function CreateTenant({ onCreated }) {
  const [name, setName] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    try {
      const t = await api('POST', '/tenants', { name });
      setName('');
      onCreated(t);
    } catch (err) { setError(err); }
    setBusy(false);
  };
  return html`<form class="panel" onSubmit=${submit}><h2>New tenant</h2>
    <${ErrorNote} error=${error && !error.fields.name ? error : null} />
    <div class="inline">
      <div class="grow" style=${{ flex: 1, minWidth: '220px' }}><${Field} label="Name" error=${error && error.fields.name} hint="The customer’s name as your team knows it.">${(a) => html`<input ...${a} type="text" maxlength="200" required value=${name} onInput=${(e) => setName(e.target.value)} />`}<//></div>
      <button class="primary" type="submit" disabled=${busy || !name.trim()}>Create tenant</button>
    </div>
  </form>`;
}

export function TenantsPage({ ctx }) {
  const list = useApi('/tenants', [], { all: true });
  const [created, setCreated] = useState(null);
  return html`<${PageHead} title="Tenants" />
    ${ctx.provider && html`<${CreateTenant} onCreated=${(t) => { setCreated(t); list.reload(); ctx.reloadTenants(); }} />`}
    ${created && html`<div class="alert ok" role="status">Tenant “${created.name}” created. Switch to it from the Tenant menu at the top to add its machines and keys.</div>`}
    <${Loaded} state=${list} what="Tenants">${(d) => html`<div class="panel flush">
      ${d.items.length === 0 ? html`<${Empty} title="No tenants yet">Create one tenant per customer above; its machines, keys and webhooks stay separate from every other tenant’s.<//>` : html`
      <div class="table-wrap"><table><thead><tr><th>Name</th><th>Id</th><th>Created</th></tr></thead><tbody>
        ${d.items.map((t) => html`<tr key=${t.id}><td class="name">${t.name}</td><td class="mono muted">${t.id}</td><td><${Time} at=${t.createdAt} /></td></tr>`)}
      </tbody></table></div>`}
    </div>`}<//>`;
}
