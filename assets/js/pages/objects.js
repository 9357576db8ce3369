// The parts of a protected object's page every kind shares (IMAP accounts,
// Microsoft 365 mailboxes and OneDrives): the recent runs, the snapshot
// list, a browser of one snapshot's folders and items with download of one
// item, and the restore dialog. What differs between kinds (the words, the
// columns, the default restore folder) is in `kinds` below.
import { html, useState, useEffect } from '../lib.js';
import { api, apiDownload, qs } from '../api.js';
import { useApi, Time, Ago, Badge, StateBadge, Field, ErrorNote, Empty, Dialog, Loaded, Link, word, bytes, duration, saveFile, navigate } from '../ui.js';

const SNAPSHOTS_PAGE = 20;
const ITEMS_PAGE = 100;

/** Words and behaviour per protected-object kind. */
export const kinds = {
  imap: { mail: true, item: 'message', items: 'messages', account: 'account', original: 'the original account', restoreTitle: 'Restore messages' },
  mailbox: { mail: true, item: 'message', items: 'messages', account: 'mailbox', original: 'the original mailbox', restoreTitle: 'Restore messages' },
  drive: { mail: false, item: 'file', items: 'files', account: 'OneDrive', original: 'the original OneDrive', restoreTitle: 'Restore files' },
};
export const kindOf = (obj) => kinds[obj.kind] || kinds.imap;

/**
 * The folder a restore of a snapshot taken at `at` goes into by default
 * (app/protect.RestoreFolder): mail "Restored YYYY-MM-DD HH:MM UTC", files
 * "Restored YYYY-MM-DD HH-MM UTC" (OneDrive forbids ':' in names).
 */
export function restoreFolder(at, kind = 'imap') {
  const d = new Date(at);
  const p = (n) => String(n).padStart(2, '0');
  const sep = kind === 'drive' ? '-' : ':';
  return `Restored ${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ${p(d.getUTCHours())}${sep}${p(d.getUTCMinutes())} UTC`;
}

/** The newest snapshot in one line: items, size, age. */
export function LastSnapshot({ s, noun = 'message' }) {
  if (!s) return html`<span class="muted">none yet</span>`;
  return html`<span class="snap-sum">${s.items.toLocaleString()} ${noun}${s.items === 1 ? '' : 's'} · ${bytes(s.bytes)}<span class="small muted"><${Ago} at=${s.at} /></span></span>`;
}

export function RecentRuns({ id, tick }) {
  const runs = useApi('/jobs' + qs({ targetId: id, limit: 10 }), [tick]);
  if (runs.error) return html`<${ErrorNote} error=${runs.error} />`;
  if (!runs.data) return html`<p class="muted">Loading runs…</p>`;
  if (runs.data.items.length === 0) return html`<p class="muted">No runs yet. The first backup runs on the daily schedule, or now with “Back up now”.</p>`;
  return html`<div class="table-wrap"><table><thead><tr><th>Run</th><th>State</th><th>Started</th><th class="hide-narrow">Duration</th></tr></thead><tbody>
    ${runs.data.items.map((j) => html`<tr key=${j.id}><td><${Link} href=${'/ui/jobs/' + encodeURIComponent(j.id)}>${word(j.queue)}<//></td>
      <td><${StateBadge} value=${j.state} />${j.failure && html`<div class="small muted mono">${j.failure.code}</div>`}</td><td><${Time} at=${j.startedAt || j.queuedAt} /></td><td class="hide-narrow">${duration(j.durationMs)}</td></tr>`)}
  </tbody></table></div>`;
}

export function Snapshots({ id, tick, selected, onSelect }) {
  const first = useApi('/protected-objects/' + encodeURIComponent(id) + '/snapshots' + qs({ limit: SNAPSHOTS_PAGE }), [tick]);
  const [more, setMore] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [moreError, setMoreError] = useState(null);
  useEffect(() => {
    setMore([]); setCursor(first.data ? first.data.nextCursor : null);
    if (first.data && first.data.items.length && !selected) onSelect(first.data.items[0]);
  }, [first.data]);
  const loadMore = async () => {
    setMoreError(null);
    try {
      const r = await api('GET', '/protected-objects/' + encodeURIComponent(id) + '/snapshots' + qs({ limit: SNAPSHOTS_PAGE, cursor }));
      setMore([...more, ...r.items]); setCursor(r.nextCursor);
    } catch (e) { setMoreError(e); }
  };
  return html`<${Loaded} state=${first} what="Snapshots" rows=${3}>${(d) => {
    const items = [...d.items, ...more];
    if (items.length === 0) return html`<${Empty} title="No snapshots yet">A snapshot is taken by each backup. Back up now to take the first.<//>`;
    return html`<div class="table-wrap"><table class="snapshots"><thead><tr><th>Taken</th><th class="num">Items</th><th class="num">Size</th><th class="num hide-narrow">Added</th><th class="num hide-narrow">Removed</th><th><span class="sr-only">Browse</span></th></tr></thead><tbody>
      ${items.map((s) => html`<tr key=${s.id} class=${selected && selected.id === s.id ? 'selected' : ''} data-snapshot=${s.id}>
        <td><${Time} at=${s.at} seconds /></td><td class="num">${s.items.toLocaleString()}</td><td class="num nowrap">${bytes(s.bytes)}</td>
        <td class="num hide-narrow">${s.addedItems.toLocaleString()}</td><td class="num hide-narrow">${s.removedItems.toLocaleString()}</td>
        <td class="num">${selected && selected.id === s.id ? html`<span class="small muted">Shown below</span>` : html`<button class="small" onClick=${() => onSelect(s)}>Browse</button>`}</td>
      </tr>`)}
    </tbody></table></div>
    <${ErrorNote} error=${moreError} />
    ${cursor && html`<div class="pager"><span class="spacer"></span><button onClick=${loadMore}>Show older snapshots</button></div>`}`;
  }}<//>`;
}

/** The parts of a folder path, for the breadcrumb. */
function crumbs(folder) {
  const parts = folder.split('/').filter(Boolean);
  return parts.map((name, i) => ({ name, path: parts.slice(0, i + 1).join('/') }));
}

function Flags({ flags }) {
  if (!flags || flags.length === 0) return html`<span class="muted">—</span>`;
  const seen = flags.includes('\\Seen');
  return html`<span class="flags">${!seen && html`<${Badge} tone="blue">Unread<//>`}${flags.filter((f) => f !== '\\Seen').map((f) => html`<${Badge} key=${f}>${f.replace(/^\\/, '')}<//>`)}</span>`;
}

/**
 * One snapshot's folders and messages: a breadcrumb over the folder path,
 * the folder's subfolders and messages (paged), a search over the whole
 * snapshot, and a selection of messages and folders kept across folders
 * for "Restore…".
 */
export function SnapshotBrowser({ obj, snap, onRestore }) {
  const [folder, setFolder] = useState('/');
  const [q, setQ] = useState('');
  const [query, setQuery] = useState('');
  const [picked, setPicked] = useState(new Map()); // selector (item id or folder path) -> label
  const [more, setMore] = useState([]);
  const [cursor, setCursor] = useState(null);
  const [moreError, setMoreError] = useState(null);
  const [downloadError, setDownloadError] = useState(null);
  const [downloading, setDownloading] = useState('');
  const k = kindOf(obj);
  const base = '/protected-objects/' + encodeURIComponent(obj.id) + '/snapshots/' + encodeURIComponent(snap.id) + '/items';
  const params = query ? { q: query, limit: ITEMS_PAGE } : { folder, limit: ITEMS_PAGE };
  const list = useApi(base + qs(params));
  useEffect(() => { setMore([]); setCursor(list.data ? list.data.nextCursor : null); }, [list.data]);
  const loadMore = async () => {
    setMoreError(null);
    try {
      const r = await api('GET', base + qs({ ...params, cursor }));
      setMore([...more, ...r.items]); setCursor(r.nextCursor);
    } catch (e) { setMoreError(e); }
  };
  const open = (path) => { setQuery(''); setQ(''); setFolder(path || '/'); };
  const search = (e) => { e.preventDefault(); setQuery(q.trim()); };
  const key = (it) => (it.kind === 'folder' ? it.path : it.id);
  const toggle = (it) => {
    const next = new Map(picked);
    if (next.has(key(it))) next.delete(key(it)); else next.set(key(it), it.kind === 'folder' ? 'Folder ' + it.path : it.subject || it.name);
    setPicked(next);
  };
  const download = async (it) => {
    setDownloadError(null); setDownloading(it.id);
    try {
      const { blob, filename } = await apiDownload('GET', base + '/' + encodeURIComponent(it.id) + '/content');
      saveFile(blob, filename);
    } catch (e) { setDownloadError(e); }
    setDownloading('');
  };
  const path = crumbs(folder);
  return html`<section class="panel flush" aria-labelledby="browse-title" data-testid="snapshot-browser">
    <div class="browse-head"><h2 id="browse-title">Snapshot of <${Time} at=${snap.at} seconds /></h2><span class="spacer"></span>
      ${picked.size > 0 && html`<span class="small" data-testid="picked">${picked.size} selected</span><button class="small" onClick=${() => setPicked(new Map())}>Clear selection</button>`}
      <button class="primary" onClick=${() => onRestore(picked)}>Restore…</button></div>
    <form class="filters" role="search" onSubmit=${search}>
      <div class="field grow"><label for="item-q">${k.mail ? 'Search subject or sender' : 'Search file name'}</label><input id="item-q" type="search" placeholder=${k.mail ? 'Whole snapshot: subject, sender or name' : 'Whole snapshot: file or folder name'} value=${q} onInput=${(e) => setQ(e.target.value)} /></div>
      <button type="submit">Search</button>${query && html`<button type="button" onClick=${() => open(folder)}>Clear search</button>`}
    </form>
    <nav class="folder-path" aria-label="Folder">
      ${query ? html`<span>${k.mail ? 'Messages' : 'Files'} matching “<strong>${query}</strong>” in every folder</span>` : html`
        ${path.length ? html`<button class="link" onClick=${() => open('/')}>All folders</button>` : html`<strong>All folders</strong>`}
        ${path.map((c, i) => html`<span key=${c.path}><span class="sep" aria-hidden="true">›</span>${i === path.length - 1 ? html`<strong aria-current="location">${c.name}</strong>` : html`<button class="link" onClick=${() => open(c.path)}>${c.name}</button>`}</span>`)}`}
    </nav>
    <${ErrorNote} error=${downloadError} />
    <${Loaded} state=${list.path === base + qs(params) ? list : { ...list, data: null }} what="Snapshot items" rows=${5}>${(d) => {
      const items = [...d.items, ...more];
      if (items.length === 0) return html`<${Empty} title=${query ? `No ${k.item} matches` : 'This folder is empty'}>${query ? (k.mail ? 'Try another word from the subject or the sender’s name or address.' : 'Try another part of the file’s name.') : `It held no ${k.items} when the snapshot was taken.`}<//>`;
      if (!k.mail) return html`<${FileTable} items=${items} query=${query} picked=${picked} pick=${key} toggle=${toggle} open=${open} download=${download} downloading=${downloading} />
        <${ErrorNote} error=${moreError} />
        ${cursor && html`<div class="pager"><span class="spacer"></span><button onClick=${loadMore}>Show more</button></div>`}`;
      return html`<div class="table-wrap"><table class="items"><thead><tr><th class="pick"><span class="sr-only">Select</span></th><th>Subject</th><th class="hide-narrow">From</th><th class="hide-narrow">Date</th><th class="num">Size</th><th class="hide-narrow">Flags</th><th><span class="sr-only">Download</span></th></tr></thead><tbody>
        ${items.map((it) => it.kind === 'folder' ? html`<tr key=${'f' + it.id} class="folder" data-folder=${it.path}>
            <td class="pick"><input type="checkbox" aria-label=${'Select folder ' + it.path} checked=${picked.has(key(it))} onChange=${() => toggle(it)} /></td>
            <td colspan="6"><button class="link folder-link" onClick=${() => open(it.path)}><span class="folder-icon" aria-hidden="true"></span>${it.name}</button>${query && html` <span class="small muted">${it.path}</span>`}</td></tr>`
          : html`<tr key=${it.id} data-item=${it.id}>
            <td class="pick"><input type="checkbox" aria-label=${'Select ' + (it.subject || it.name)} checked=${picked.has(key(it))} onChange=${() => toggle(it)} /></td>
            <td class="subject"><span class="name">${it.subject || html`<span class="muted">(no subject)</span>`}</span>
              <div class="small muted show-narrow sender-under">${it.from}</div>${query && html`<div class="small muted">${it.path}</div>`}</td>
            <td class="sender hide-narrow">${it.from || html`<span class="muted">—</span>`}</td>
            <td class="hide-narrow nowrap"><${Time} at=${it.date} empty="—" /></td>
            <td class="num nowrap">${bytes(it.size)}</td>
            <td class="hide-narrow"><${Flags} flags=${it.flags} /></td>
            <td class="num">${it.kind === 'message' || it.kind === 'file' ? html`<button class="small" aria-label=${'Download ' + (it.subject || it.name) + ' as .eml'} disabled=${downloading === it.id} onClick=${() => download(it)}>${downloading === it.id ? 'Downloading…' : '.eml'}</button>` : null}</td>
          </tr>`)}
      </tbody></table></div>
      <${ErrorNote} error=${moreError} />
      ${cursor && html`<div class="pager"><span class="spacer"></span><button onClick=${loadMore}>Show more</button></div>`}`;
    }}<//>
  </section>`;
}

/** A drive snapshot's folder: subfolders and files with their sizes, each file downloadable. */
function FileTable({ items, query, picked, pick, toggle, open, download, downloading }) {
  return html`<div class="table-wrap"><table class="items files"><thead><tr><th class="pick"><span class="sr-only">Select</span></th><th>Name</th><th class="num">Size</th><th><span class="sr-only">Download</span></th></tr></thead><tbody>
    ${items.map((it) => it.kind === 'folder' ? html`<tr key=${'f' + it.id} class="folder" data-folder=${it.path}>
        <td class="pick"><input type="checkbox" aria-label=${'Select folder ' + it.path} checked=${picked.has(pick(it))} onChange=${() => toggle(it)} /></td>
        <td colspan="3"><button class="link folder-link" onClick=${() => open(it.path)}><span class="folder-icon" aria-hidden="true"></span>${it.name}</button>${query && html` <span class="small muted">${it.path}</span>`}</td></tr>`
      : html`<tr key=${it.id} data-item=${it.id}>
        <td class="pick"><input type="checkbox" aria-label=${'Select ' + it.name} checked=${picked.has(pick(it))} onChange=${() => toggle(it)} /></td>
        <td class="subject"><span class="name">${it.name}</span>${query && html`<div class="small muted">${it.path}</div>`}</td>
        <td class="num nowrap">${bytes(it.size)}</td>
        <td class="num"><button class="small" aria-label=${'Download ' + it.name} disabled=${downloading === it.id} onClick=${() => download(it)}>${downloading === it.id ? 'Downloading…' : 'Download'}</button></td>
      </tr>`)}
  </tbody></table></div>`;
}

export function RestoreDialog({ obj, snap, picked, onClose }) {
  const [what, setWhat] = useState(picked.size ? 'picked' : 'all');
  const [dest, setDest] = useState(obj.id);
  const [folder, setFolder] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const k = kindOf(obj);
  // Other objects of the same kind and tenant that can take the restore:
  // their source is present and enabled.
  const targets = useApi('/protected-objects' + qs({ kind: obj.kind }), [], { all: true, tenant: obj.tenantId });
  const srcs = useApi('/sources', [], { all: true, tenant: obj.tenantId });
  const usable = (targets.data && srcs.data) ? targets.data.items.filter((o) => o.tenantId === obj.tenantId && o.sourceId
    && srcs.data.items.some((s) => s.id === o.sourceId && s.state !== 'disabled')) : [];
  const original = usable.some((o) => o.id === obj.id);
  useEffect(() => { if (targets.data && srcs.data && !original && dest === obj.id && usable.length) setDest(usable[0].id); }, [targets.data, srcs.data]);
  const defaultFolder = restoreFolder(snap.at, obj.kind);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true); setError(null);
    const body = { snapshotId: snap.id };
    if (what === 'picked') body.items = [...picked.keys()];
    const d = {};
    if (dest !== obj.id) d.protectedObjectId = dest;
    if (folder.trim()) d.folder = folder.trim();
    if (Object.keys(d).length) body.destination = d;
    try {
      const j = await api('POST', '/restores', body, { tenant: obj.tenantId });
      onClose(true);
      navigate('/ui/jobs/' + encodeURIComponent(j.id));
    } catch (err) { setError(err); setBusy(false); }
  };
  const f = (error && error.fields) || {};
  const itemsError = Object.keys(f).find((k) => k.startsWith('items'));
  const destName = (usable.find((o) => o.id === dest) || obj).displayName;
  return html`<${Dialog} title=${k.restoreTitle} onClose=${() => onClose(false)}><form onSubmit=${submit}>
    <p>From the snapshot of <strong><${Time} at=${snap.at} seconds /></strong> of ${obj.displayName}.</p>
    <fieldset class="field"><legend class="label">What</legend>
      <label class="check"><input type="radio" name="what" value="all" checked=${what === 'all'} onChange=${() => setWhat('all')} /> Everything in the snapshot (every folder and ${k.item})</label>
      <label class="check"><input type="radio" name="what" value="picked" disabled=${picked.size === 0} checked=${what === 'picked'} onChange=${() => setWhat('picked')} /> The selected items (${picked.size})</label>
      ${what === 'picked' && html`<ul class="plain small picked-list">${[...picked.values()].slice(0, 8).map((l, i) => html`<li key=${i}>${l}</li>`)}${picked.size > 8 && html`<li>and ${picked.size - 8} more</li>`}</ul>`}
      ${picked.size === 0 && html`<div class="hint">To restore only some ${k.items} or folders, close this, tick them in the snapshot and choose Restore… again.</div>`}
      ${itemsError && html`<div class="error">${f[itemsError]}</div>`}
    </fieldset>
    <${Field} label=${'Into the ' + k.account} error=${f['destination.protectedObjectId']}>${(a) => html`<select ...${a} value=${dest} onChange=${(e) => setDest(e.target.value)}>
      ${!original && html`<option value=${obj.id} disabled>${obj.displayName} (cannot take ${k.items}: its ${obj.kind === 'imap' ? 'account' : 'tenant'} is deleted or disabled)</option>`}
      ${usable.map((o) => html`<option key=${o.id} value=${o.id}>${o.displayName}${o.id === obj.id ? ` (${k.original})` : ''} · ${o.address}</option>`)}</select>`}<//>
    <${Field} label="Folder (optional)" error=${f['destination.folder']} hint=${k.mail ? html`Default: a new folder <strong class="mono">${defaultFolder}</strong> in ${destName}. The snapshot’s folders are recreated inside it, with each message’s ${obj.kind === 'imap' ? 'exact bytes' : 'headers, body, attachments'}, flags and dates.`
      : html`Default: a new folder <strong class="mono">${defaultFolder}</strong> at the root of ${destName}’s OneDrive. The snapshot’s folders are recreated inside it.`}>${(a) => html`<input ...${a}
      type="text" spellcheck="false" placeholder=${defaultFolder} value=${folder} onInput=${(e) => setFolder(e.target.value)} />`}<//>
    <div class="alert info small">A restore never overwrites or deletes anything, and never duplicates: ${k.mail ? 'a message' : 'a file'} already in the destination folder is skipped, so running the same restore again adds nothing.</div>
    ${error && !itemsError && !f['destination.protectedObjectId'] && !f['destination.folder'] && html`<${ErrorNote} error=${error} />`}
    <div class="actions"><button type="button" onClick=${() => onClose(false)}>Cancel</button>
      <button class="primary" type="submit" disabled=${busy || (!original && dest === obj.id)}>${busy ? 'Starting…' : 'Start restore'}</button></div>
  </form><//>`;
}