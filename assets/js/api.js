// Client of /api/v1, the same API every integration uses. It sends the
// session's CSRF token with unsafe methods and the selected tenant as
// X-Service-Tenant, and turns problem+json answers into ApiError.

let csrfToken = '';
let tenantHeader = '';
let onSessionEnded = () => {};

/** Remembers the CSRF token of the current session ('' when signed out). */
export function setCsrf(token) { csrfToken = token || ''; }

/** Selects the tenant acted for ('' = every tenant, provider administrators only). */
export function setTenantHeader(id) { tenantHeader = id || ''; }
export function currentTenant() { return tenantHeader; }

/** Registers what to do when the API says the session has ended. */
export function whenSessionEnds(fn) { onSessionEnded = fn; }

/** ApiError carries the problem+json answer; fields maps a form field name to its message. */
export class ApiError extends Error {
  constructor(status, problem) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(p.detail || p.title || `The appliance answered ${status}.`);
    this.status = status;
    this.code = p.code || '';
    this.problem = p;
    this.fields = {};
    for (const e of p.errors || []) {
      const name = String(e.location || '').replace(/^(body|query|path)\./, '');
      if (name && !this.fields[name]) this.fields[name] = e.message;
    }
    // A route this build of the appliance does not have: the page shows
    // "not available yet" rather than an error or made-up data.
    this.unavailable = (status === 404 && /^No route/.test(p.detail || '')) || status === 405 || status === 501;
  }

  /** A sentence for the person using the page. */
  get friendly() {
    if (this.status === 0) return this.message;
    if (this.code === 'csrf_failed') return 'This page’s security token is out of date (you may have signed in again in another tab). It has been refreshed: please try again.';
    if (this.code === 'rate_limited') return this.message || 'Too many requests; wait a moment and try again.';
    if (this.code === 'validation_failed' && Object.keys(this.fields).length) return 'Please correct the highlighted fields.';
    if (this.status >= 500) return this.message || 'The appliance had an internal error. Try again; if it persists, check its log.';
    return this.message;
  }
}

/**
 * Calls the API. path is relative to /api/v1. Resolves with the parsed
 * JSON (null for an empty answer); rejects with ApiError.
 */
export async function api(method, path, body, opts = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = csrfToken;
  const tenant = opts.tenant !== undefined ? opts.tenant : tenantHeader;
  if (tenant) headers['X-Service-Tenant'] = tenant;
  let res;
  try {
    res = await fetch('/api/v1' + path, {
      method, headers, credentials: 'same-origin', signal: opts.signal,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { detail: 'The appliance could not be reached. Check the network connection and try again.' });
  }
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { detail: text.slice(0, 200) }; }
  }
  if (!res.ok) {
    const err = new ApiError(res.status, data);
    if (res.status === 401 && !opts.quiet) onSessionEnded(err);
    if (err.code === 'csrf_failed') await refreshCsrf();
    throw err;
  }
  return data;
}

async function refreshCsrf() {
  try {
    const s = await api('GET', '/session', undefined, { quiet: true });
    setCsrf(s.csrfToken);
  } catch { /* the next call reports what is wrong */ }
}

/**
 * Reads every page of a paged list (CONTRACT §2: limit and nextCursor) and
 * answers {items}. For lists a person sees whole: tenants, API keys.
 */
export async function apiAll(path, opts = {}) {
  const items = [];
  let cursor = '';
  for (;;) {
    const sep = path.includes('?') ? '&' : '?';
    const page = await api('GET', path + sep + 'limit=1000' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''), undefined, opts);
    items.push(...page.items);
    if (!page.nextCursor) return { items };
    cursor = page.nextCursor;
  }
}

/** Query string from an object, skipping empty values. */
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, v);
  const s = u.toString();
  return s ? '?' + s : '';
}
