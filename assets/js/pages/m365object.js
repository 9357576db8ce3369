// One protected object of any kind at /ui/objects/{id}: an IMAP account
// goes to its Email accounts page; a Microsoft 365 mailbox or OneDrive is
// shown here with its snapshots, the snapshot browser (folders and
// messages with .eml download, or folders and files with their sizes),
// restores of everything or chosen items, and Back up now / Verify now
// followed on the job page.
import { html, useState, useEffect } from '../lib.js';
import { api } from '../api.js';
import { PageHead, Loaded, useApi, Time, Badge, ErrorNote, Link, word, tones, navigate } from '../ui.js';
import { attentionHelp, SourceState } from './email.js';
import { LastSnapshot, RecentRuns, Snapshots, SnapshotBrowser, RestoreDialog, kindOf } from './objects.js';

const kindWords = { mailbox: 'Mailbox', drive: 'OneDrive', imap: 'IMAP account' };

export function ObjectPage({ ctx, params }) {
  const [tick, setTick] = useState(0);
  const objState = useApi('/protected-objects/' + encodeURIComponent(params.id), [tick]);
  const srcs = useApi('/sources', [tick], { all: true });
  const [started, setStarted] = useState(null);
  const [startError, setStartError] = useState(null);
  const [busy, setBusy] = useState('');
  const [snap, setSnap] = useState(null);
  const [restore, setRestore] = useState(null);
  useEffect(() => { if (objState.data && objState.data.kind === 'imap') navigate('/ui/email/' + encodeURIComponent(params.id), true); }, [objState.data]);
  const crumb = html`<${Link} href="/ui/m365">Microsoft 365<//>`;
  if (objState.error && objState.error.status === 404 && !objState.error.unavailable) return html`<${PageHead} title="Not found" crumb=${crumb} /><div class="panel"><p>This mailbox or OneDrive does not exist or belongs to another tenant.</p></div>`;
  const start = async (kind) => {
    setBusy(kind); setStartError(null); setStarted(null);
    try {
      const j = await api('POST', kind === 'backup' ? '/backups' : '/verifies', { targetType: 'protected_object', targetId: params.id }, { tenant: objState.data.tenantId });
      setStarted({ kind, job: j });
      setTick(tick + 1);
    } catch (e) { setStartError(e); }
    setBusy('');
  };
  return html`<${Loaded} state=${objState} what="Protected objects">${(o) => {
    if (o.kind === 'imap') return null;
    const k = kindOf(o);
    const src = o.sourceId && srcs.data ? srcs.data.items.find((s) => s.id === o.sourceId) : null;
    const tenant = (ctx.tenants.find((x) => x.id === o.tenantId) || {}).name || o.tenantId;
    const crumbs = html`<${Link} href="/ui/m365">Microsoft 365<//>${src && html` › <${Link} href=${'/ui/m365/' + encodeURIComponent(src.id)}>${src.displayName}<//>`}`;
    return html`
    <${PageHead} title=${`${o.displayName} · ${kindWords[o.kind] || o.kind}`} crumb=${crumbs}>
      <button onClick=${() => start('backup')} disabled=${!!busy || !o.sourceId}>${busy === 'backup' ? 'Starting…' : 'Back up now'}</button>
      <button onClick=${() => start('verify')} disabled=${!!busy || !o.lastSnapshot}>${busy === 'verify' ? 'Starting…' : 'Verify now'}</button>
    <//>
    ${started && html`<div class="alert ok" role="status" data-testid="job-started">${started.kind === 'backup' ? 'Backup' : 'Verify run'} ${started.job.state === 'running' ? 'running' : 'queued'}. <${Link} href=${'/ui/jobs/' + encodeURIComponent(started.job.id)}>Follow its progress<//></div>`}
    <${ErrorNote} error=${startError} />
    ${!o.sourceId && html`<div class="alert info">Its Microsoft 365 tenant was deleted: it is no longer backed up. Its snapshots stay browsable and can be restored into another ${k.account} of the same tenant until retention removes them.</div>`}
    ${o.sourceId && !o.protected && html`<div class="alert info">Protection is off: this ${k.account} is not backed up on schedule. Turn it on in the <${Link} href="/ui/directory">Directory<//>; existing snapshots are kept.</div>`}
    ${o.attention && html`<div class="alert warn"><strong>${word(o.attention)}.</strong> ${attentionHelp[o.attention] || ''}${src && src.lastError && html`<div class="check-detail small">${src.lastError}</div>`}</div>`}
    <div class="grid2">
      <div class="panel"><h2>${kindWords[o.kind] || 'Object'}</h2><dl class="facts">
        <dt>Address</dt><dd class="mono">${o.address}</dd>
        <dt>Microsoft 365</dt><dd>${src ? html`<${Link} href=${'/ui/m365/' + encodeURIComponent(src.id)}>${src.displayName}<//> <${SourceState} src=${src} />` : html`<span class="muted">deleted</span>`}</dd>
        ${ctx.provider && html`<dt>Tenant</dt><dd>${tenant}</dd>`}
        <dt>Protection</dt><dd>${o.protected ? 'On' : 'Off'}</dd>
        <dt>Schedule</dt><dd>${!o.sourceId || !o.protected ? html`<span class="muted">Not backed up</span>` : src && src.schedule ? html`<span class="mono">${src.schedule}</span> (UTC)` : 'Daily, early morning (UTC)'}</dd>
        <dt>Added</dt><dd><${Time} at=${o.createdAt} /></dd><dt>Id</dt><dd class="mono">${o.id}</dd>
      </dl></div>
      <div class="panel"><h2>Backups</h2><dl class="facts">
        <dt>Readiness</dt><dd><${Badge} tone=${tones[o.readiness.state] || ''}>${word(o.readiness.state)}<//>${o.readiness.overdue && html` <${Badge} tone="yellow">Overdue<//>`}</dd>
        <dt>Last verify</dt><dd><${Time} at=${o.readiness.checkedAt} empty="not yet" /></dd>
        <dt>Last backup</dt><dd><${Time} at=${o.lastBackupAt} empty="none yet" /></dd>
        <dt>Last success</dt><dd><${Time} at=${o.lastSuccessAt} empty="none yet" /></dd>
        <dt>Last snapshot</dt><dd><${LastSnapshot} s=${o.lastSnapshot} noun=${k.item} /></dd>
      </dl></div>
    </div>
    <div class="panel flush"><h2>Snapshots</h2><${Snapshots} id=${o.id} tick=${tick} selected=${snap} onSelect=${setSnap} /></div>
    ${snap && html`<${SnapshotBrowser} key=${snap.id} obj=${o} snap=${snap} onRestore=${(picked) => setRestore(picked)} />`}
    <div class="panel"><h2>Recent runs</h2><${RecentRuns} id=${o.id} tick=${tick} /></div>
    ${restore && snap && html`<${RestoreDialog} obj=${o} snap=${snap} picked=${restore} onClose=${() => setRestore(null)} />`}`;
  }}<//>`;
}
