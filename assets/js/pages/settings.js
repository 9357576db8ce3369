// Appliance settings. Provider administrators change them; tenant
// administrators see them read-only.
import { html, useState, useEffect } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Field, ErrorNote, Time } from '../ui.js';

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
    </form>`}<//>
    <${Maintenance} ro=${ro} />`;
}

const phaseText = {
  announced: 'Announced', downloading: 'Downloading the release', verifying: 'Checking the signature and checksum',
  applying: 'Replacing the program', restarting: 'Restarting', failed: 'Failed',
};
const running = (m) => m && m.phase !== 'announced' && m.phase !== 'failed';

// Maintenance: the updater's phase (version.maintenance) and, for provider
// administrators, updating to the version the update check found. While an
// update is announced or runs the version is read again every 3 s; the appliance restarts
// in the middle, so a failed read then is expected and retried.
function Maintenance({ ro }) {
  const v = useApi('/version');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [last, setLast] = useState(null);
  useEffect(() => { if (v.data) setLast(v.data); }, [v.data]);
  const d = v.data || last;
  const m = d && d.maintenance;
  useEffect(() => {
    if (!m || m.phase === 'failed') return;
    const id = setTimeout(v.reload, 3000);
    return () => clearTimeout(id);
  }, [v.data, v.error]);
  const act = async (method, body) => {
    setBusy(true); setError(null);
    try { await api(method, '/maintenance', body); } catch (err) { setError(err); }
    setBusy(false); v.reload();
  };
  if (!d) return null;
  return html`<div class="panel" style=${{ maxWidth: '620px' }} aria-live="polite">
    <h2>Version</h2>
    <p>Running <strong>${d.running}</strong>${d.latest && html`; latest on the ${d.channel} channel: <strong>${d.latest}</strong>`}${d.updateAvailable === false && ' (up to date)'}.</p>
    <${ErrorNote} error=${error} />
    ${m && html`<div class=${'alert ' + (m.phase === 'failed' ? 'error' : 'info')} role="status" data-phase=${m.phase}>
      Update to ${m.targetVersion}: <strong>${phaseText[m.phase] || m.phase}</strong>${m.phase === 'announced' && m.startsAt ? html` — starts at <${Time} at=${m.startsAt} />` : ''}${m.error ? html`<div>${m.error}</div>` : ''}
      ${running(m) && html`<div class="hint">The appliance restarts during the update; if the new version is not ready within a minute the previous one is put back.</div>`}</div>`}
    ${!ro && html`<div class="actions" style=${{ justifyContent: 'flex-start' }}>
      ${d.updateAvailable && !running(m) && (!m || m.phase === 'failed' || m.targetVersion !== d.latest) && html`<button class="primary" disabled=${busy} onClick=${() => act('POST', { targetVersion: d.latest })}>Update to v${d.latest}</button>`}
      ${m && !running(m) && html`<button disabled=${busy} onClick=${() => act('DELETE')}>${m.phase === 'failed' ? 'Dismiss' : 'Cancel update'}</button>`}
    </div>`}
  </div>`;
}
