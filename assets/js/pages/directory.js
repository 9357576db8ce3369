// The directory: every user, shared mailbox and room of the Microsoft 365
// tenants and every IMAP account, with licences and protection, searchable
// and filtered; protection is switched per entry (optimistically: the
// switch moves at once and moves back if the appliance refuses). The
// Billing summary tab is in billing.js.
import { html, useState, useEffect } from '../lib.js';
import { api, apiAll, qs } from '../api.js';
import { PageHead, Loaded, useApi, Badge, ErrorNote, Empty, Link, Ago } from '../ui.js';

const PAGE = 100;

export const directoryKinds = { user: 'User', shared_mailbox: 'Shared mailbox', room: 'Room', imap_account: 'IMAP account' };
const objectWords = { mailbox: 'Mailbox', drive: 'OneDrive', imap: 'Account' };

/** The two tabs of the directory. */
export function DirectoryTabs({ current }) {
  const tab = (href, label, id) => html`<${Link} href=${href} class=${'tab' + (current === id ? ' current' : '')} aria-current=${current === id ? 'page' : undefined}>${label}<//>`;
  return html`<nav class="tabs" aria-label="Directory views">${tab('/ui/directory', 'Entries', 'entries')}${tab('/ui/directory/billing', 'Billing summary', 'billing')}</nav>`;
}

/** id -> kind of every protected object, to label an entry's links; {} until loaded. */
function useObjectKinds(tick) {
  const [kinds, setKinds] = useState({});
  useEffect(() => {
    let live = true;
    Promise.all(['mailbox', 'drive', 'imap'].map((k) => apiAll('/protected-objects?kind=' + k).catch(() => ({ items: [] }))))
      .then((lists) => { if (live) setKinds(Object.fromEntries(lists.flatMap((l) => l.items.map((o) => [o.id, o.kind])))); });
    return () => { live = false; };
  }, [tick]);
  return kinds;
}

function Licences({ skus }) {
  if (!skus || skus.length === 0) return html`<span class="muted">—</span>`;
  return html`<span class="licences">${skus.map((s) => html`<${Badge} key=${s} tone="blue">${s}<//>`)}</span>`;
}

export function DirectoryPage({ ctx }) {
  const [filters, setFilters] = useState({ q: '', kind: '', protected: '', licensed: '' });
  const [q, setQ] = useState('');
  const first = useApi('/directory' + qs({ ...filters, limit: PAGE }), [JSON.stringify(filters)]);
  const [rows, setRows] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [moreError, setMoreError] = useState(null);
  const [toggleError, setToggleError] = useState(null);
  const [pending, setPending] = useState({});
  const [kindsTick, setKindsTick] = useState(0);
  const objectKinds = useObjectKinds(kindsTick);
  useEffect(() => { if (first.data) { setRows(first.data.items); setCursor(first.data.nextCursor); } }, [first.data]);
  const set = (k) => (e) => setFilters({ ...filters, [k]: e.target.value });
  const search = (e) => { e.preventDefault(); setFilters({ ...filters, q: q.trim() }); };
  const loadMore = async () => {
    setMoreError(null);
    try {
      const r = await api('GET', '/directory' + qs({ ...filters, limit: PAGE, cursor }));
      setRows([...rows, ...r.items]); setCursor(r.nextCursor);
    } catch (e) { setMoreError(e); }
  };
  const replace = (id, fn) => setRows((cur) => cur.map((r) => (r.id === id ? fn(r) : r)));
  const toggle = async (entry) => {
    const want = !entry.protected;
    setToggleError(null);
    replace(entry.id, (r) => ({ ...r, protected: want }));
    setPending((p) => ({ ...p, [entry.id]: true }));
    try {
      const saved = await api('PUT', '/directory/' + encodeURIComponent(entry.id) + '/protection', { protected: want }, { tenant: entry.tenantId });
      replace(entry.id, () => saved || { ...entry, protected: want });
      // Protecting a user may have created its mailbox and OneDrive objects.
      if (saved && (saved.protectedObjectIds || []).some((id) => !objectKinds[id])) setKindsTick((n) => n + 1);
    } catch (e) {
      replace(entry.id, (r) => ({ ...r, protected: entry.protected }));
      setToggleError({ name: entry.displayName, want, error: e });
    }
    setPending((p) => { const n = { ...p }; delete n[entry.id]; return n; });
  };
  const showTenant = ctx.provider && !ctx.tenant;
  const tenantName = (id) => (ctx.tenants.find((x) => x.id === id) || {}).name || id;
  const filtered = filters.q || filters.kind || filters.protected || filters.licensed;
  return html`<${PageHead} title="Directory"><button onClick=${first.reload}>Refresh</button><//>
    <${DirectoryTabs} current="entries" />
    <p class="muted">Every user, shared mailbox and room of the Microsoft 365 tenants and every IMAP account. Protecting a user backs up their mailbox and OneDrive; unprotecting stops the backups and keeps the snapshots.</p>
    ${toggleError && html`<div class="alert error" role="alert" data-testid="toggle-failed">Could not ${toggleError.want ? 'protect' : 'unprotect'} ${toggleError.name}: ${toggleError.error.friendly || toggleError.error.message}. The switch is back where it was.</div>`}
    <div class="panel flush">
      <form class="filters" role="search" onSubmit=${search}>
        <div class="field grow"><label for="dir-q">Search name or email</label><input id="dir-q" type="search" placeholder="Name, email or user principal name" value=${q} onInput=${(e) => setQ(e.target.value)} /></div>
        <div class="field"><label for="dir-kind">Kind</label><select id="dir-kind" value=${filters.kind} onChange=${set('kind')}><option value="">Every kind</option>
          ${Object.entries(directoryKinds).map(([v, l]) => html`<option key=${v} value=${v}>${l}</option>`)}</select></div>
        <div class="field"><label for="dir-prot">Protection</label><select id="dir-prot" value=${filters.protected} onChange=${set('protected')}><option value="">Any</option><option value="true">Protected</option><option value="false">Not protected</option></select></div>
        <div class="field"><label for="dir-lic">Licence</label><select id="dir-lic" value=${filters.licensed} onChange=${set('licensed')}><option value="">Any</option><option value="true">Licensed</option><option value="false">Unlicensed</option></select></div>
        <button type="submit">Search</button>
      </form>
      <${Loaded} state=${first} what="The directory" rows=${5}>${() => rows.length === 0
        ? html`<${Empty} title=${filtered ? 'No entry matches' : 'The directory is empty'}>${filtered ? 'Change the search or the filters.' : html`Add a <${Link} href="/ui/m365">Microsoft 365 tenant<//> or an <${Link} href="/ui/email">IMAP account<//>: its users appear here after the directory sync.`}<//>`
        : html`<div class="table-wrap"><table class="directory"><thead><tr><th>Name</th><th class="hide-narrow">Kind</th>${showTenant && html`<th class="hide-narrow">Tenant</th>`}<th class="hide-narrow">Email</th><th>Licences</th><th class="hide-narrow">Account</th><th>Protected</th><th class="hide-narrow">Backups</th></tr></thead><tbody>
          ${rows.map((e) => html`<tr key=${e.id} data-entry=${e.id} data-email=${e.email}>
            <td><span class="name">${e.displayName}</span>${e.userPrincipalName && e.userPrincipalName !== e.email && html`<div class="small muted mono">${e.userPrincipalName}</div>`}
              <div class="small muted show-narrow">${directoryKinds[e.kind] || e.kind} · ${e.email}</div>${e.removedAt && html`<div><${Badge} tone="yellow">Removed <${Ago} at=${e.removedAt} /><//></div>`}</td>
            <td class="hide-narrow">${directoryKinds[e.kind] || e.kind}</td>
            ${showTenant && html`<td class="small hide-narrow">${tenantName(e.tenantId)}</td>`}
            <td class="mono small hide-narrow">${e.email}</td>
            <td><${Licences} skus=${e.licenses} /></td>
            <td class="hide-narrow">${e.enabled ? 'Enabled' : html`<${Badge} tone="yellow">Sign-in blocked<//>`}</td>
            <td><label class="switch"><input type="checkbox" role="switch" aria-label=${'Protect ' + e.displayName} checked=${e.protected} disabled=${!!pending[e.id]}
              onChange=${() => toggle(e)} /><span class="small">${e.protected ? 'On' : 'Off'}</span></label></td>
            <td class="hide-narrow">${(e.protectedObjectIds || []).map((id) => html`<${Link} key=${id} class="obj-link" href=${'/ui/objects/' + encodeURIComponent(id)}>${objectWords[objectKinds[id]] || 'Backups'}<//> `)}</td>
          </tr>`)}
        </tbody></table></div>
        <${ErrorNote} error=${moreError} />
        <div class="pager"><span>${rows.length} entr${rows.length === 1 ? 'y' : 'ies'}${cursor ? ' shown' : ''}</span><span class="spacer"></span>${cursor && html`<button onClick=${loadMore}>Show more</button>`}</div>`}<//>
    </div>`;
}
