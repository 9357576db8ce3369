// The audit log: who did what, for which tenant, from where; newest first,
// filtered by tenant, actor and time, paged with the API's cursor.
import { html, useState, useEffect } from '../lib.js';
import { api, qs } from '../api.js';
import { PageHead, Loaded, useApi, Time, Badge, ErrorNote, Empty } from '../ui.js';

export function AuditPage({ ctx }) {
  const [filters, setFilters] = useState({ tenantId: ctx.tenant || '', actorId: '', since: '', until: '' });
  const [applied, setApplied] = useState(filters);
  const query = {
    tenantId: applied.tenantId, actorId: applied.actorId.trim(), limit: 100,
    since: applied.since ? new Date(applied.since).toISOString() : '', until: applied.until ? new Date(applied.until).toISOString() : '',
  };
  const list = useApi('/audit' + qs(query));
  const [more, setMore] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [moreError, setMoreError] = useState(null);
  useEffect(() => { setMore([]); setCursor(list.data ? list.data.nextCursor : null); }, [list.data]);
  const loadMore = async () => {
    try { const r = await api('GET', '/audit' + qs({ ...query, cursor })); setMore([...more, ...r.items]); setCursor(r.nextCursor); } catch (e) { setMoreError(e); }
  };
  const set = (k) => (e) => setFilters({ ...filters, [k]: e.target.value });
  const tenantName = (id) => (id ? (ctx.tenants.find((t) => t.id === id) || {}).name || id : '');
  const fe = list.error && list.error.fields;
  return html`<${PageHead} title="Audit log" />
    <div class="panel flush">
      <form class="filters" role="search" onSubmit=${(e) => { e.preventDefault(); setApplied(filters); }}>
        ${ctx.provider && html`<div class="field"><label for="au-tenant">Tenant</label><select id="au-tenant" value=${filters.tenantId} onChange=${set('tenantId')}><option value="">All tenants</option>${ctx.tenants.map((t) => html`<option value=${t.id}>${t.name}</option>`)}</select></div>`}
        <div class="field"><label for="au-actor">Actor id</label><input id="au-actor" type="text" placeholder="usr_… or key_…" value=${filters.actorId} onInput=${set('actorId')} /></div>
        <div class="field"><label for="au-since">From</label><input id="au-since" type="datetime-local" step="1" value=${filters.since} onInput=${set('since')} /></div>
        <div class="field"><label for="au-until">Until</label><input id="au-until" type="datetime-local" step="1" value=${filters.until} onInput=${set('until')} /></div>
        <button type="submit">Apply filters</button>
      </form>
      ${fe && Object.keys(fe).length > 0 ? html`<div style=${{ padding: '12px 16px' }}><${ErrorNote} error=${list.error} /><ul class="small">${Object.entries(fe).map(([k, v]) => html`<li>${k}: ${v}</li>`)}</ul></div>` : html`
      <${Loaded} state=${list} what="Audit entries" rows=${8}>${(d) => {
        const items = [...d.items, ...more];
        if (items.length === 0) return html`<${Empty} title="No audit entries match">Widen the time range or clear the actor filter.<//>`;
        return html`<div class="table-wrap" data-loaded=${list.path} aria-busy=${list.loading ? 'true' : 'false'}><table class="audit"><thead><tr><th>When</th><th>Actor</th><th>Action</th><th>Tenant</th><th>Status</th><th class="hide-narrow">From</th></tr></thead><tbody>
          ${items.map((a) => html`<tr key=${a.id}>
            <td><${Time} at=${a.at} seconds /></td>
            <td>${a.actorName || a.actorId || '—'}<div class="small muted">${a.actorType}${a.actorId && html` · <button type="button" class="link mono"
              title="Show only this actor’s entries" onClick=${() => { const next = { ...filters, actorId: a.actorId }; setFilters(next); setApplied(next); }}>${a.actorId}</button>`}</div></td>
            <td><code>${a.action}</code><div class="small muted mono target">${a.target}</div></td>
            <td>${a.tenantId ? tenantName(a.tenantId) : html`<span class="muted" title="Not for one tenant: the appliance or every tenant">—</span>`}</td>
            <td><${Badge} tone=${a.status < 300 ? 'green' : a.status < 500 ? 'yellow' : 'red'}>${a.status}<//></td>
            <td class="hide-narrow small">${a.ip}<div class="muted" title=${a.userAgent}>${(a.userAgent || '').slice(0, 40)}</div></td>
          </tr>`)}
        </tbody></table></div>
        <${ErrorNote} error=${moreError} />
        ${cursor && html`<div class="pager"><span class="spacer"></span><button onClick=${loadMore}>Show older entries</button></div>`}`;
      }}<//>`}
    </div>`;
}
