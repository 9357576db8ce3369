// Shared building blocks: data loading, times, badges, forms, dialogs,
// empty and "not available yet" states. Everything the API returns is
// rendered as text through Preact, never as HTML, so a tenant called
// <img src=x onerror=alert(1)> is shown, not run.
import { html, useState, useEffect, useRef, useCallback } from './lib.js';
import { api, apiAll, ApiError } from './api.js';

/**
 * Loads path with GET (every page of a paged list with all: true; for
 * another tenant than the menu's with tenant, '' for every tenant); reloads
 * when deps change. Returns {data, error,
 * loading, reload, path}: while a new path loads, data stays the previous
 * answer and path names the request that answer came from.
 */
export function useApi(path, deps = [], { all = false, tenant } = {}) {
  const [state, setState] = useState({ data: null, error: null, loading: true, path: null });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    if (!path) { setState({ data: null, error: null, loading: false }); return; }
    const ctl = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    (all ? apiAll(path, { signal: ctl.signal, tenant }) : api('GET', path, undefined, { signal: ctl.signal, tenant }))
      .then((data) => setState({ data, error: null, loading: false, path }))
      .catch((error) => { if (error.name !== 'AbortError') setState({ data: null, error, loading: false, path }); });
    return () => ctl.abort();
  }, [path, tick, ...deps]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const dateSecFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** An API timestamp in the browser's time zone, with the UTC value on hover. */
export function Time({ at, seconds, empty = '—' }) {
  if (!at) return html`<span class="muted">${empty}</span>`;
  const d = new Date(at);
  if (isNaN(d)) return html`<span>${at}</span>`;
  return html`<time datetime=${at} title=${'UTC ' + d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')}>${(seconds ? dateSecFmt : dateFmt).format(d)}</time>`;
}

/** "5 min ago" with the exact local time and UTC on hover. */
export function Ago({ at, empty = 'never' }) {
  if (!at) return html`<span class="muted">${empty}</span>`;
  const d = new Date(at);
  const s = Math.round((Date.now() - d) / 1000);
  let text;
  if (s < 60) text = 'just now';
  else if (s < 3600) text = `${Math.floor(s / 60)} min ago`;
  else if (s < 86400) text = `${Math.floor(s / 3600)} h ago`;
  else if (s < 86400 * 30) text = `${Math.floor(s / 86400)} d ago`;
  else text = dateFmt.format(d);
  return html`<time datetime=${at} title=${dateSecFmt.format(d) + ' · UTC ' + d.toISOString()}>${text}</time>`;
}

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function Badge({ tone = '', children }) {
  return html`<span class=${'badge ' + tone}>${children}</span>`;
}

/** Words for API enum values, so the interface never shows snake_case. */
export const words = {
  green: 'Verified', yellow: 'Needs a check', red: 'Restore test failed', unverified: 'Not yet verified', no_backup: 'No backup yet',
  silent: 'Silent', backup_overdue: 'Backup overdue', last_backup_failed: 'Last backup failed',
  restore_test_failed: 'Restore test failed', repository_damaged: 'Repository damaged', never_seen: 'Never seen',
  source_unreachable: 'Cannot reach the account',
  online: 'Online', offline: 'Offline', never: 'Never connected', active: 'Active', revoked: 'Revoked',
  queued: 'Queued', running: 'Running', succeeded: 'Succeeded', partial: 'Partly succeeded', failed: 'Failed',
  interrupted: 'Interrupted', cancelled: 'Cancelled', pending: 'Pending', delivered: 'Delivered', gone: 'Gone (410)',
  mailbox_backup: 'Mailbox backup', drive_backup: 'Drive backup', imap_backup: 'IMAP backup', endpoint_backup: 'Machine backup',
  endpoint_restore: 'Machine restore', restore: 'Restore', verify: 'Verify', archive_verify: 'Archive verify',
  directory_sync: 'Directory sync', mailbox: 'Mailbox', drive: 'OneDrive',
  schedule: 'Schedule', api: 'API', web: 'Web', retry: 'Retry', retention: 'Retention',
};
export const word = (v) => (v && words[v]) || (v ? String(v).replace(/_/g, ' ') : '—');

export const tones = {
  green: 'green', yellow: 'yellow', red: 'red', unverified: 'blue', online: 'green', offline: 'yellow', revoked: '',
  succeeded: 'green', partial: 'yellow', failed: 'red', running: 'blue', queued: '', interrupted: 'yellow', cancelled: '',
  delivered: 'green', pending: 'blue', gone: 'yellow',
};

export function StateBadge({ value }) {
  return html`<${Badge} tone=${tones[value] || ''}>${word(value)}<//>`;
}

/** Placeholder rows of a fixed height while a list loads, so nothing jumps. */
export function Loading({ rows = 3 }) {
  return html`<div role="status" aria-label="Loading" style=${{ padding: '8px 16px' }}>
    ${Array.from({ length: rows }, (_, i) => html`<div class="skeleton" key=${i} style=${{ width: `${90 - i * 12}%` }}></div>`)}
  </div>`;
}

export function Empty({ title, children, action }) {
  return html`<div class="empty"><strong>${title}</strong><div>${children}</div>${action && html`<div class="actions">${action}</div>`}</div>`;
}

/** The state of a page whose API this appliance does not serve yet. */
export function Unavailable({ what }) {
  return html`<div class="panel"><${Empty} title=${`${what} are not available on this appliance yet`}>
    This appliance’s API does not offer ${what.toLowerCase()} in this version. After an update that adds them, they appear here; nothing is shown until then.
  <//></div>`;
}

/** An error from the API, in words; validation details go next to their fields. */
export function ErrorNote({ error }) {
  if (!error) return null;
  const text = error instanceof ApiError ? error.friendly : String(error.message || error);
  return html`<div class="alert error" role="alert">${text}</div>`;
}

/** A loaded list or object with loading, unavailable and error states handled. */
export function Loaded({ state, what, rows, children }) {
  if (state.error && state.error.unavailable) return html`<${Unavailable} what=${what} />`;
  if (state.error) return html`<div class="panel"><${ErrorNote} error=${state.error} /><button onClick=${state.reload}>Try again</button></div>`;
  if (!state.data) return html`<div class="panel flush"><${Loading} rows=${rows} /></div>`;
  return children(state.data);
}

let fieldSeq = 0;
/** A labelled form field; error is the API's message for it. */
export function Field({ label, error, hint, children, id }) {
  const ref = useRef(id || `f${++fieldSeq}`);
  const fid = ref.current;
  const described = [hint && fid + '-hint', error && fid + '-err'].filter(Boolean).join(' ') || undefined;
  const control = typeof children === 'function' ? children({ id: fid, 'aria-describedby': described, 'aria-invalid': error ? 'true' : undefined }) : children;
  return html`<div class=${'field' + (error ? ' invalid' : '')}>
    <label for=${fid}>${label}</label>
    ${control}
    ${hint && html`<div class="hint" id=${fid + '-hint'}>${hint}</div>`}
    ${error && html`<div class="error" id=${fid + '-err'}>${error}</div>`}
  </div>`;
}

const focusable = 'a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])';

/**
 * A modal dialog on the native <dialog> element: the page behind is inert,
 * Tab and Shift+Tab cycle inside the dialog, Esc closes it, and focus goes
 * back to what had it before.
 */
export function Dialog({ title, onClose, children, footer }) {
  const ref = useRef(null);
  const restore = useRef(() => {});
  // Closing from the dialog itself (Esc, ✕) hands focus back at once; the
  // unmount cleanup below covers the callers' own buttons, but Preact may
  // run it only after the next paint.
  const close = () => { restore.current(); onClose(); };
  useEffect(() => {
    const d = ref.current;
    const opener = document.activeElement;
    if (d && !d.open) d.showModal();
    restore.current = () => {
      if (d.open) d.close();
      if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
    };
    const cancel = (e) => { e.preventDefault(); close(); };
    // A modal dialog makes the page inert, but Tab past its last control
    // still leaves it (to the document, or the browser's own controls):
    // wrap around instead.
    const trap = (e) => {
      if (e.key !== 'Tab') return;
      const items = [...d.querySelectorAll(focusable)].filter((el) => !el.disabled && el.getClientRects().length > 0);
      if (items.length === 0) return;
      const first = items[0];
      const last = items[items.length - 1];
      const inside = d.contains(document.activeElement);
      if (e.shiftKey && (!inside || document.activeElement === first)) { e.preventDefault(); last.focus(); }
      else if (!e.shiftKey && (!inside || document.activeElement === last)) { e.preventDefault(); first.focus(); }
    };
    d.addEventListener('cancel', cancel);
    d.addEventListener('keydown', trap);
    return () => {
      d.removeEventListener('cancel', cancel);
      d.removeEventListener('keydown', trap);
      restore.current();
    };
  }, []);
  return html`<dialog ref=${ref} aria-labelledby="dlg-title">
    <div class="dlg-head"><h2 id="dlg-title">${title}</h2><button class="link" aria-label="Close" onClick=${close}>✕</button></div>
    <div class="dlg-body">${children}</div>
    ${footer && html`<div class="dlg-foot">${footer}</div>`}
  </dialog>`;
}

/** Asks before an irreversible action; runs act and shows its error. */
export function Confirm({ title, children, confirmLabel, onClose, act }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const go = async () => {
    setBusy(true); setError(null);
    try { await act(); onClose(true); } catch (e) { setError(e); setBusy(false); }
  };
  return html`<${Dialog} title=${title} onClose=${() => onClose(false)} footer=${html`
      <button onClick=${() => onClose(false)}>Cancel</button>
      <button class="danger solid" disabled=${busy} onClick=${go}>${busy ? 'Working…' : confirmLabel}</button>`}>
    <${ErrorNote} error=${error} />${children}
  <//>`;
}

/** Copies text to the clipboard, with a fallback for browsers without the API. */
export function CopyButton({ text, label = 'Copy' }) {
  const [done, setDone] = useState(false);
  const copy = async () => {
    try { await navigator.clipboard.writeText(text); } catch {
      const t = document.createElement('textarea');
      t.value = text; document.body.appendChild(t); t.select(); document.execCommand('copy'); t.remove();
    }
    setDone(true); setTimeout(() => setDone(false), 1600);
  };
  return html`<button type="button" onClick=${copy} aria-live="polite">${done ? 'Copied' : label}</button>`;
}

/** A value shown once (key, secret, token), read-only with a copy button. */
export function Secret({ value, label }) {
  return html`<div class="secret"><label class="sr-only" for="secret-value">${label}</label>
    <input id="secret-value" type="text" readonly value=${value} onFocus=${(e) => e.target.select()} />
    <${CopyButton} text=${value} /></div>`;
}

export function Progress({ percent, tone = '' }) {
  const p = Math.max(0, Math.min(100, Number(percent) || 0));
  return html`<div class=${'bar ' + tone} role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow=${Math.round(p)}><span style=${{ width: p + '%' }}></span></div>`;
}

/** Hands a downloaded blob to the browser as a file named filename. */
export function saveFile(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url; a.download = filename; a.style.display = 'none';
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

/** Page heading with optional actions on the right. */
export function PageHead({ title, crumb, children }) {
  useEffect(() => { document.title = `${title} · Backstop`; }, [title]);
  return html`<div>${crumb && html`<div class="crumb">${crumb}</div>`}<div class="page-head"><h1>${title}</h1><span class="spacer"></span>${children}</div></div>`;
}

/** Navigates inside the single page without a reload. */
export function navigate(path, replace) {
  if (replace) history.replaceState(null, '', path); else history.pushState(null, '', path);
  window.dispatchEvent(new Event('backstop:navigate'));
}

/** An in-page link: keeps middle-click and new-tab behaviour of a real link. */
export function Link({ href, children, ...rest }) {
  const click = (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault(); navigate(href);
  };
  return html`<a href=${href} onClick=${click} ...${rest}>${children}</a>`;
}
