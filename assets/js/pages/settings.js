// Appliance settings. Provider administrators change them; tenant
// administrators see them read-only.
import { html, useState, useEffect } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Field, ErrorNote } from '../ui.js';

export function SettingsPage({ ctx }) {
  const st = useApi('/settings');
  const [form, setForm] = useState(null);
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(false);
  const [busy, setBusy] = useState(false);
  useEffect(() => { if (st.data) setForm({ updateCheck: st.data.updateCheck, updateChannel: st.data.updateChannel }); }, [st.data]);
  const ro = !ctx.provider;
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null); setSaved(false);
    try { const s = await api('PATCH', '/settings', form); setForm({ updateCheck: s.updateCheck, updateChannel: s.updateChannel }); setSaved(true); } catch (err) { setError(err); }
    setBusy(false);
  };
  return html`<${PageHead} title="Settings" />
    <${Loaded} state=${st} what="Settings">${() => form && html`<form class="panel" onSubmit=${submit} style=${{ maxWidth: '620px' }}>
      <h2>Updates</h2>
      ${ro && html`<div class="alert info">Only provider administrators change appliance settings.</div>`}
      <${ErrorNote} error=${error} />
      ${saved && html`<div class="alert ok" role="status">Settings saved.${form.updateCheck ? ' The update check runs within a minute, then daily.' : ''}</div>`}
      <div class="field"><label style=${{ display: 'flex', gap: '8px', alignItems: 'center' }}><input type="checkbox" disabled=${ro} checked=${form.updateCheck} onChange=${(e) => setForm({ ...form, updateCheck: e.target.checked })} /> Check for updates daily</label>
        <div class="hint">Asks the release feed for the newest version. Nothing about your data is sent. Off on a fresh installation.</div></div>
      <${Field} label="Release channel" error=${error && error.fields.updateChannel}>${(a) => html`<select ...${a} disabled=${ro} value=${form.updateChannel} onChange=${(e) => setForm({ ...form, updateChannel: e.target.value })} style=${{ maxWidth: '240px' }}>
        <option value="stable">Stable</option><option value="beta">Beta (early releases)</option></select>`}<//>
      ${!ro && html`<div class="actions" style=${{ justifyContent: 'flex-start' }}><button class="primary" type="submit" disabled=${busy}>${busy ? 'Saving…' : 'Save settings'}</button></div>`}
    </form>`}<//>`;
}
