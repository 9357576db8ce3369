// Sign in. A wrong password, a locked-out address and an ended session
// each get their own plain sentence.
import { html, useState, useEffect } from '../lib.js';
import { api } from '../api.js';
import { Field, ErrorNote } from '../ui.js';

export function SignInPage({ notice, onDone }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => { document.title = 'Sign in · Backstop'; }, []);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    try {
      onDone(await api('POST', '/session', { email, password }, { quiet: true }));
    } catch (err) { setError(err); setPassword(''); setBusy(false); }
  };
  const f = (error && error.fields) || {};
  return html`<div class="auth"><div class="panel">
    <div class="brand"><span>Backstop</span></div>
    <h1 style=${{ marginBottom: '14px' }}>Sign in</h1>
    ${notice && !error && html`<div class="alert info" role="status">${notice}</div>`}
    <${ErrorNote} error=${error} />
    <form onSubmit=${submit}>
      <${Field} label="E-mail address" error=${f.email}>${(a) => html`<input ...${a} type="email" name="email" autocomplete="username" required value=${email} onInput=${(e) => setEmail(e.target.value)} />`}<//>
      <${Field} label="Password" error=${f.password}>${(a) => html`<input ...${a} type="password" name="password" autocomplete="current-password" required value=${password} onInput=${(e) => setPassword(e.target.value)} />`}<//>
      <button class="primary" type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
    </form>
  </div></div>`;
}
