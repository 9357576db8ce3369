// First-run setup: the one-time link printed by `backstop serve` carries
// the token in the fragment (#token=…), which never reaches a server log.
import { html, useState, useEffect } from '../lib.js';
import { api } from '../api.js';
import { Field, ErrorNote } from '../ui.js';

export function SetupPage({ onDone }) {
  const token = new URLSearchParams(location.hash.slice(1)).get('token') || '';
  const [open, setOpen] = useState(null);
  const [form, setForm] = useState({ email: '', password: '', confirm: '' });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    document.title = 'Set up · Backstop';
    api('GET', '/setup', undefined, { quiet: true }).then((r) => setOpen(r.open)).catch(() => setOpen(false));
  }, []);
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value });
  const mismatch = form.confirm && form.confirm !== form.password ? 'The two passwords differ.' : '';
  const submit = async (e) => {
    e.preventDefault();
    if (mismatch) return;
    setBusy(true); setError(null);
    try {
      const s = await api('POST', '/setup', { token, email: form.email, password: form.password }, { quiet: true });
      history.replaceState(null, '', '/ui/'); // drop the spent token from the address bar
      onDone(s);
    } catch (err) { setError(err); setBusy(false); }
  };
  const f = (error && error.fields) || {};
  return html`<div class="auth"><div class="panel">
    <div class="brand"><span>Backstop</span></div>
    <h1>Create the first administrator</h1>
    <p class="muted small" style=${{ marginTop: '6px' }}>This administrator manages every tenant. You can add more administrators later with <code>backstop admin create-user</code>.</p>
    ${open === false && html`<div class="alert warn" role="alert">Setup is closed: an administrator already exists, or the appliance was restarted and printed a new link. <a href="/ui/">Sign in</a> instead.</div>`}
    ${open && !token && html`<div class="alert warn" role="alert">This address has no setup token. Open the full link that <code>backstop serve</code> printed.</div>`}
    <${ErrorNote} error=${error} />
    <form onSubmit=${submit} novalidate>
      <${Field} label="E-mail address" error=${f.email}>${(a) => html`<input ...${a} type="email" autocomplete="username" required value=${form.email} onInput=${set('email')} />`}<//>
      <${Field} label="Password" error=${f.password} hint="At least 12 characters.">${(a) => html`<input ...${a} type="password" autocomplete="new-password" required value=${form.password} onInput=${set('password')} />`}<//>
      <${Field} label="Repeat the password" error=${mismatch}>${(a) => html`<input ...${a} type="password" autocomplete="new-password" required value=${form.confirm} onInput=${set('confirm')} />`}<//>
      <button class="primary" type="submit" disabled=${busy || !open || !token}>${busy ? 'Creating…' : 'Create administrator'}</button>
    </form>
  </div></div>`;
}
