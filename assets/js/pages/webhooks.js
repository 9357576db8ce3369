// Webhooks: create with events (the secret is shown once), send a test
// event, the delivery log with every attempt, replay, rotate the secret.
import { html, useState } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Time, Badge, StateBadge, Field, ErrorNote, Empty, Dialog, Confirm, Secret, Link, navigate } from '../ui.js';

const events = [
  ['job.failed', 'A job failed (including server and client runs)'],
  ['job.completed', 'A job completed'],
  ['verify.completed', 'A verify run completed'],
];

function SecretShown({ title, hook, onClose }) {
  return html`<${Dialog} title=${title} onClose=${onClose} footer=${html`<button class="primary" onClick=${onClose}>I have stored the secret</button>`}>
    <div class="alert warn" role="alert"><strong>Copy the signing secret now.</strong> It is shown only once. Your receiver uses it to check the <code>X-Service-Signature</code> header (HMAC-SHA-256 of the raw body).</div>
    <${Secret} value=${hook.secret} label="Signing secret" />
    <p class="small muted">Deliveries go to <span class="mono">${hook.url}</span>.</p>
  <//>`;
}

function CreateWebhook({ tenantMissing, onClose }) {
  const [form, setForm] = useState({ url: 'https://', description: '', events: ['job.failed'] });
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState(null);
  const toggle = (ev) => setForm({ ...form, events: form.events.includes(ev) ? form.events.filter((x) => x !== ev) : [...form.events, ev] });
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    try { setCreated(await api('POST', '/webhooks', { url: form.url, events: form.events, description: form.description })); } catch (err) { setError(err); }
    setBusy(false);
  };
  if (created) return html`<${SecretShown} title="Webhook created" hook=${created} onClose=${() => onClose(created)} />`;
  const f = (error && error.fields) || {};
  return html`<${Dialog} title="New webhook" onClose=${() => onClose(null)}><form onSubmit=${submit}>
    ${tenantMissing && html`<div class="alert info">Choose a tenant in the menu at the top first: a webhook belongs to one tenant.</div>`}
    <${ErrorNote} error=${error} />
    <${Field} label="Receiver URL" error=${f.url} hint="HTTPS address of your PSA, RMM or automation. Private and loopback addresses are refused unless the operator allows them.">${(a) => html`<input ...${a} type="url" required value=${form.url} onInput=${(e) => setForm({ ...form, url: e.target.value })} />`}<//>
    <fieldset class="field"><legend class="label" style=${{ fontWeight: 550, fontSize: '13px', marginBottom: '6px' }}>Events</legend>
      ${events.map(([ev, label]) => html`<label key=${ev} style=${{ display: 'flex', gap: '6px', fontWeight: 400, marginBottom: '4px' }}><input type="checkbox" checked=${form.events.includes(ev)} onChange=${() => toggle(ev)} /><span><code>${ev}</code> <span class="muted">${label}</span></span></label>`)}
      ${f.events && html`<div class="error">${f.events}</div>`}
    </fieldset>
    <${Field} label="Description (optional)" error=${f.description}>${(a) => html`<input ...${a} type="text" maxlength="200" value=${form.description} onInput=${(e) => setForm({ ...form, description: e.target.value })} />`}<//>
    <div class="actions"><button type="button" onClick=${() => onClose(null)}>Cancel</button><button class="primary" type="submit" disabled=${busy || form.events.length === 0}>${busy ? 'Creating…' : 'Create webhook'}</button></div>
  </form><//>`;
}

export function WebhooksPage({ ctx }) {
  const list = useApi('/webhooks');
  const [creating, setCreating] = useState(false);
  const add = html`<button class="primary" onClick=${() => setCreating(true)}>New webhook</button>`;
  return html`<${PageHead} title="Webhooks" crumb="Integrations">${add}<//>
    <p class="muted">Backstop calls your URL when a job fails or completes, signed with the webhook’s own secret. Failed deliveries are retried for about a day.</p>
    <${Loaded} state=${list} what="Webhooks">${(d) => html`<div class="panel flush">
      ${d.items.length === 0 ? html`<${Empty} title="No webhooks yet" action=${add}>Create one to open tickets in your PSA when a backup fails.<//>` : html`
      <div class="table-wrap"><table><thead><tr><th>Receiver</th><th>Events</th><th>State</th><th>Created</th></tr></thead><tbody>
        ${d.items.map((w) => html`<tr key=${w.id}><td><${Link} class="name mono" href=${'/ui/webhooks/' + encodeURIComponent(w.id)}>${w.url}<//>${w.description && html`<div class="small muted">${w.description}</div>`}</td>
          <td class="small">${w.events.join(', ')}</td><td>${w.enabled ? html`<${Badge} tone="green">Enabled<//>` : html`<${Badge}>Disabled<//>`}</td><td><${Time} at=${w.createdAt} /></td></tr>`)}
      </tbody></table></div>`}
    </div>`}<//>
    ${creating && html`<${CreateWebhook} tenantMissing=${ctx.provider && !ctx.tenant} onClose=${(w) => { setCreating(false); if (w) navigate('/ui/webhooks/' + encodeURIComponent(w.id)); }} />`}`;
}

function Deliveries({ id, tick }) {
  const list = useApi(`/webhooks/${encodeURIComponent(id)}/deliveries`, [tick]);
  const [error, setError] = useState(null);
  const replay = async (d) => {
    setError(null);
    try { await api('POST', `/webhooks/${encodeURIComponent(id)}/deliveries/${encodeURIComponent(d.id)}/replay`); list.reload(); } catch (e) { setError(e); }
  };
  return html`<div class="panel flush"><div class="page-head" style=${{ padding: '14px 16px 0', marginBottom: '6px' }}><h2 style=${{ margin: 0 }}>Delivery log</h2><span class="spacer"></span><button class="small" onClick=${list.reload}>Refresh</button></div>
    <div style=${{ padding: '0 16px' }}><${ErrorNote} error=${error} /></div>
    <${Loaded} state=${list} what="Deliveries">${(d) => d.items.length === 0
      ? html`<${Empty} title="No deliveries yet">Send a test event to check that your receiver answers 2xx.<//>`
      : html`<div class="table-wrap"><table><thead><tr><th>Event</th><th>State</th><th>Created</th><th>Attempts</th><th><span class="sr-only">Actions</span></th></tr></thead><tbody>
        ${d.items.map((dl) => html`<tr key=${dl.id} data-delivery=${dl.id}>
          <td><code>${dl.event}</code><div class="small muted mono">${dl.id}</div></td>
          <td><${StateBadge} value=${dl.state} />${dl.nextAttemptAt && html`<div class="small muted">next <${Time} at=${dl.nextAttemptAt} /></div>`}</td>
          <td><${Time} at=${dl.createdAt} seconds /></td>
          <td><details><summary>${dl.attempts.length} attempt${dl.attempts.length === 1 ? '' : 's'}</summary>
            <table class="attempts"><thead><tr><th>#</th><th>At</th><th>Status</th><th>Time</th><th>Answer or error</th></tr></thead><tbody>
            ${dl.attempts.map((a) => html`<tr key=${a.number}><td>${a.number}</td><td><${Time} at=${a.at} seconds /></td>
              <td>${a.statusCode === null ? html`<${Badge} tone="red">none<//>` : html`<${Badge} tone=${a.statusCode < 300 ? 'green' : 'red'}>${a.statusCode}<//>`}</td>
              <td class="num">${a.durationMs} ms</td><td class="small mono">${a.error || a.responseExcerpt || '—'}</td></tr>`)}
            </tbody></table></details></td>
          <td class="num"><button class="small" onClick=${() => replay(dl)}>Replay</button></td>
        </tr>`)}</tbody></table></div>`}<//>
  </div>`;
}

export function WebhookPage({ params }) {
  const id = params.id;
  const hook = useApi('/webhooks/' + encodeURIComponent(id));
  const [tick, setTick] = useState(0);
  const [dialog, setDialog] = useState(null);
  const [error, setError] = useState(null);
  const [note, setNote] = useState('');
  const test = async () => {
    setError(null); setNote('');
    try { await api('POST', `/webhooks/${encodeURIComponent(id)}/test`); setNote('Test event queued; it appears in the delivery log below.'); setTick(tick + 1); } catch (e) { setError(e); }
  };
  const crumb = html`<${Link} href="/ui/webhooks">Webhooks<//>`;
  return html`<${Loaded} state=${hook} what="Webhooks">${(w) => html`
    <${PageHead} title="Webhook" crumb=${crumb}>
      <button onClick=${test}>Send test event</button>
      <button onClick=${() => setDialog('rotate')}>Rotate secret</button>
      <button class="danger" onClick=${() => setDialog('delete')}>Delete</button>
    <//>
    <${ErrorNote} error=${error} />
    ${note && html`<div class="alert ok" role="status">${note}</div>`}
    <div class="panel"><dl class="facts"><dt>Receiver</dt><dd class="mono">${w.url}</dd><dt>Events</dt><dd>${w.events.join(', ')}</dd>
      <dt>Description</dt><dd>${w.description || '—'}</dd><dt>Created</dt><dd><${Time} at=${w.createdAt} /></dd><dt>Id</dt><dd class="mono">${w.id}</dd></dl></div>
    <${Deliveries} id=${id} tick=${tick} />
    ${dialog === 'rotate' && html`<${Confirm} title="Rotate the signing secret?" confirmLabel="Rotate secret" onClose=${(ok) => { if (!ok) setDialog(null); }}
        act=${async () => { const r = await api('POST', `/webhooks/${encodeURIComponent(id)}/rotate-secret`); setDialog({ rotated: { ...w, ...r } }); }}>
      <p>A new secret is created and shown once. For 24 hours deliveries carry signatures with both the old and the new secret, so you can update the receiver without losing events.</p><//>`}
    ${dialog && dialog.rotated && html`<${SecretShown} title="New signing secret" hook=${dialog.rotated} onClose=${() => setDialog(null)} />`}
    ${dialog === 'delete' && html`<${Confirm} title="Delete this webhook?" confirmLabel="Delete webhook" onClose=${(ok) => { setDialog(null); if (ok) navigate('/ui/webhooks'); }}
        act=${() => api('DELETE', '/webhooks/' + encodeURIComponent(id))}><p>Backstop stops calling ${w.url}. Pending deliveries are dropped.</p><//>`}
  `}<//>`;
}
