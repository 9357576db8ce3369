// Entry point: resolves the session, then renders the shell and the page
// for the current path. Routes live in one table below; a page for a new
// API is one import and one line here.
import { html, render, useState, useEffect } from './lib.js';
import { api, apiAll, setCsrf, setTenantHeader, whenSessionEnds } from './api.js';
import { Link, navigate } from './ui.js';
import { SetupPage } from './pages/setup.js';
import { SignInPage } from './pages/signin.js';
import { DashboardPage } from './pages/dashboard.js';
import { TenantsPage } from './pages/tenants.js';
import { EndpointsPage, EndpointPage } from './pages/endpoints.js';
import { JobsPage, JobPage } from './pages/jobs.js';
import { StoragePage } from './pages/storage.js';
import { EmailAccountsPage, EmailAccountPage } from './pages/email.js';
import { M365TenantsPage, M365TenantPage } from './pages/m365.js';
import { ObjectPage } from './pages/m365object.js';
import { ArchivePage } from './pages/archive.js';
import { ArchiveSearchPage, ArchiveMessagePage } from './pages/archive_search.js';
import { ArchiveHoldsPage, ArchiveRetentionPage, ArchiveEvidencePage } from './pages/archive_policy.js';
import { DirectoryPage } from './pages/directory.js';
import { BillingPage } from './pages/billing.js';
import { KeysPage } from './pages/keys.js';
import { WebhooksPage, WebhookPage } from './pages/webhooks.js';
import { SettingsPage } from './pages/settings.js';
import { AuditPage } from './pages/audit.js';
import { ReferencePage } from './pages/reference.js';
import { FailureCodesPage } from './pages/failures.js';

// [pattern, component, nav label or null, nav group, provider only]
const routes = [
  ['/ui/', DashboardPage, 'Dashboard', 'Overview'],
  ['/ui/endpoints', EndpointsPage, 'Servers & clients', 'Overview'],
  ['/ui/endpoints/:id', EndpointPage],
  ['/ui/email', EmailAccountsPage, 'Email accounts', 'Overview'],
  ['/ui/email/:id', EmailAccountPage],
  ['/ui/m365', M365TenantsPage, 'Microsoft 365', 'Overview'],
  ['/ui/m365/:id', M365TenantPage],
  ['/ui/objects/:id', ObjectPage],
  ['/ui/archive', ArchivePage, 'Archive', 'Overview'],
  ['/ui/archive/search', ArchiveSearchPage],
  ['/ui/archive/messages/:id', ArchiveMessagePage],
  ['/ui/archive/holds', ArchiveHoldsPage],
  ['/ui/archive/retention', ArchiveRetentionPage],
  ['/ui/archive/evidence', ArchiveEvidencePage],
  ['/ui/directory', DirectoryPage, 'Directory', 'Overview'],
  ['/ui/directory/billing', BillingPage],
  ['/ui/jobs', JobsPage, 'Jobs', 'Overview'],
  ['/ui/jobs/:id', JobPage],
  ['/ui/storage', StoragePage, 'Storage', 'Overview'],
  ['/ui/keys', KeysPage, 'API keys', 'Integrations'],
  ['/ui/webhooks', WebhooksPage, 'Webhooks', 'Integrations'],
  ['/ui/webhooks/:id', WebhookPage],
  ['/ui/reference', ReferencePage, 'API reference', 'Integrations'],
  ['/ui/failure-codes', FailureCodesPage, 'Failure codes', 'Integrations'],
  ['/ui/tenants', TenantsPage, 'Tenants', 'Administration', true],
  ['/ui/settings', SettingsPage, 'Settings', 'Administration'],
  ['/ui/audit', AuditPage, 'Audit log', 'Administration'],
];

// match finds the page for path; provider-only pages do not exist for a
// tenant administrator (the API refuses their data anyway).
function match(path, provider) {
  for (const [pattern, page, , , providerOnly] of routes) {
    if (providerOnly && !provider) continue;
    const names = [];
    const re = new RegExp('^' + pattern.replace(/:(\w+)/g, (_, n) => { names.push(n); return '([^/]+)'; }) + '/?$');
    const m = re.exec(path);
    if (m) return { page, params: Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1])])) };
  }
  return null;
}

function usePath() {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    window.addEventListener('popstate', update);
    window.addEventListener('backstop:navigate', update);
    return () => { window.removeEventListener('popstate', update); window.removeEventListener('backstop:navigate', update); };
  }, []);
  return path;
}

const TENANT_KEY = 'backstop.tenant';

function App() {
  const path = usePath();
  const [session, setSession] = useState(undefined); // undefined: checking; null: signed out
  const [notice, setNotice] = useState('');
  const [tenants, setTenants] = useState([]);
  const [tenant, setTenant] = useState(sessionStorage.getItem(TENANT_KEY) || '');

  const signedIn = (s) => {
    setCsrf(s.csrfToken);
    setNotice('');
    setSession(s);
  };
  useEffect(() => {
    whenSessionEnds(() => {
      setCsrf('');
      setSession((cur) => {
        if (cur) setNotice('Your session has ended. Sign in again to continue.');
        return null;
      });
    });
    api('GET', '/session', undefined, { quiet: true }).then(signedIn).catch(() => setSession(null));
  }, []);

  const provider = !!(session && session.user.provider);
  useEffect(() => {
    if (!session) return;
    const own = provider ? tenant : '';
    setTenantHeader(own);
    // A tenant administrator gets its own tenant only: pages use the list
    // to show the tenant's name instead of its id.
    apiAll('/tenants').then((r) => setTenants(r.items)).catch(() => {});
  }, [session, provider]);
  // On a narrow screen the navigation folds behind a menu button; it folds
  // again after each navigation so the page is what the person sees next.
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(() => setMenuOpen(false), [path]);

  const chooseTenant = (id) => {
    sessionStorage.setItem(TENANT_KEY, id);
    setTenantHeader(id);
    setTenant(id);
  };

  if (path === '/' || path === '/ui') { navigate('/ui/', true); return null; }
  if (path === '/setup') return html`<${SetupPage} onDone=${(s) => { signedIn(s); navigate('/ui/', true); }} />`;
  if (session === undefined) return html`<p class="boot" role="status">Loading Backstop…</p>`;
  if (session === null) return html`<${SignInPage} notice=${notice} onDone=${signedIn} />`;

  const m = match(path, provider);
  const signOut = async () => {
    try { await api('DELETE', '/session'); } catch { /* signed out either way */ }
    setCsrf(''); sessionStorage.removeItem(TENANT_KEY); setTenantHeader('');
    setNotice('You have signed out.');
    setSession(null);
    navigate('/ui/', true);
  };
  const ctx = { session, provider, tenant, tenants, reloadTenants: () => apiAll('/tenants').then((r) => setTenants(r.items)) };
  const Page = m ? m.page : NotFound;
  const groups = [];
  for (const [pattern, , label, group, providerOnly] of routes) {
    if (!label || (providerOnly && !provider)) continue;
    let g = groups.find((x) => x.name === group);
    if (!g) groups.push((g = { name: group, items: [] }));
    g.items.push([pattern, label]);
  }
  const current = (pattern) => (pattern === '/ui/' ? path === '/ui/' || path === '/ui' : path.startsWith(pattern)) ? 'page' : undefined;
  return html`<div class="shell">
    <header class="topbar">
      <button type="button" class="menu-toggle" aria-controls="main-nav" aria-expanded=${menuOpen ? 'true' : 'false'}
        onClick=${() => setMenuOpen(!menuOpen)}><span aria-hidden="true">☰</span> Menu</button>
      <${Link} class="brand" href="/ui/"><img src=${document.querySelector('link[rel=icon]').href} alt="" />Backstop<//>
      <span class="spacer"></span>
      ${provider && html`<label for="tenant-switch" class="hide-narrow">Tenant</label>
        <select id="tenant-switch" aria-label="Tenant" value=${tenant} onChange=${(e) => chooseTenant(e.target.value)}>
          <option value="">All tenants</option>
          ${tenants.map((t) => html`<option key=${t.id} value=${t.id}>${t.name}</option>`)}
        </select>`}
      <span class="who" title=${session.user.email}>${session.user.email}</span>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <nav id="main-nav" class=${'nav' + (menuOpen ? ' open' : '')} aria-label="Main">
      ${groups.map((g) => html`<div class="group">${g.name}</div>
        ${g.items.map(([p, label]) => html`<${Link} href=${p} aria-current=${current(p)}>${label}<//>`)}`)}
    </nav>
    <main id="main" key=${tenant}><${Page} ctx=${ctx} params=${m ? m.params : {}} /></main>
  </div>`;
}

function NotFound() {
  return html`<div class="panel"><h1>Page not found</h1><p class="muted">There is no page at this address.</p><${Link} href="/ui/">Go to the dashboard<//></div>`;
}

const root = document.getElementById('app');
root.textContent = ''; // drop the boot message: render() diffs against existing children
render(html`<${App} />`, root);
