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
  if (!res.ok) throw await failure(res, opts);
  return parseBody(await res.text());
}

function parseBody(text) {
  if (!text) return null;
  try { return JSON.parse(text); } catch { return { detail: text.slice(0, 200) }; }
}

/** The ApiError of a refused request; ends the session or refreshes the CSRF token when the answer says so. */
async function failure(res, opts) {
  const err = new ApiError(res.status, parseBody(await res.text()));
  if (res.status === 401 && !opts.quiet) onSessionEnded(err);
  if (err.code === 'csrf_failed') await refreshCsrf();
  return err;
}

/**
 * Calls an API route that answers a file (the appliance key, an archived
 * message, an evidence report) and resolves with {blob, filename}; a
 * refusal is an ApiError as with api(). opts: body (sent as JSON), accept
 * (the Accept header), tenant (X-Service-Tenant, only when given).
 */
export async function apiDownload(method, path, opts = {}) {
  const headers = { Accept: (opts.accept || 'application/octet-stream') + ', application/problem+json' };
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = csrfToken;
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  if (opts.tenant) headers['X-Service-Tenant'] = opts.tenant;
  let res;
  try {
    res = await fetch('/api/v1' + path, { method, headers, credentials: 'same-origin',
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  } catch {
    throw new ApiError(0, { detail: 'The appliance could not be reached. Check the network connection and try again.' });
  }
  if (!res.ok) throw await failure(res, opts);
  const m = /filename="?([^";]+)"?/.exec(res.headers.get('Content-Disposition') || '');
  return { blob: await res.blob(), filename: m ? m[1] : opts.filename || 'download' };
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
