// Billing summary: the directory counts per tenant now (GET
// /directory/summary) and, for a chosen month, the daily counts recorded at
// 00:00 UTC (?from=&to=) as a small chart and a table, with the daily rows
// as a CSV file for a PSA or a spreadsheet.
import { html, useState } from '../lib.js';
import { qs } from '../api.js';
import { PageHead, Loaded, useApi, Time, Empty, saveFile } from '../ui.js';
import { DirectoryTabs } from './directory.js';

const columns = [
  ['users', 'Users'], ['sharedMailboxes', 'Shared mailboxes'], ['rooms', 'Rooms'], ['imapAccounts', 'IMAP accounts'],
  ['licensed', 'Licensed'], ['protected', 'Protected'], ['protectedMailboxes', 'Protected mailboxes'], ['protectedDrives', 'Protected OneDrives'],
];
const series = [['users', 'Users', '#1f5fa8'], ['licensed', 'Licensed', '#8a5a00'], ['protected', 'Protected', '#1e7a46']];

const pad = (n) => String(n).padStart(2, '0');
const thisMonth = () => { const d = new Date(); return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}`; };
/** The first and last date of a month "YYYY-MM". */
function monthRange(month) {
  const [y, m] = month.split('-').map(Number);
  const last = new Date(Date.UTC(y, m, 0)).getUTCDate();
  return { from: `${month}-01`, to: `${month}-${pad(last)}`, days: last };
}

/** Sums the daily rows per date (every tenant, or one). */
function perDay(daily, tenantId) {
  const by = new Map();
  for (const r of daily) {
    if (tenantId && r.tenantId !== tenantId) continue;
    const cur = by.get(r.date) || Object.fromEntries(columns.map(([k]) => [k, 0]));
    for (const [k] of columns) cur[k] += r[k] || 0;
    by.set(r.date, cur);
  }
  return by;
}

/** Users, licensed and protected per day of the month as lines. */
function Chart({ month, days, byDate }) {
  const W = 800, H = 180, L = 34, B = 20, T = 8;
  const dates = Array.from({ length: days }, (_, i) => `${month}-${pad(i + 1)}`);
  const max = Math.max(1, ...[...byDate.values()].flatMap((c) => series.map(([k]) => c[k])));
  const x = (i) => L + (days > 1 ? (i * (W - L - 6)) / (days - 1) : 0);
  const y = (v) => T + (H - T - B) * (1 - v / max);
  const line = (k) => dates.map((d, i) => (byDate.has(d) ? `${x(i).toFixed(1)},${y(byDate.get(d)[k]).toFixed(1)}` : null)).filter(Boolean).join(' ');
  const label = series.map(([k, l]) => `${l}: ${dates.filter((d) => byDate.has(d)).map((d) => byDate.get(d)[k]).join(', ')}`).join('; ');
  return html`<figure class="chart" data-testid="billing-chart">
    <svg viewBox=${`0 0 ${W} ${H}`} role="img" aria-label=${`Daily counts in ${month}. ${label}`}>
      <line x1=${L} y1=${y(0)} x2=${W} y2=${y(0)} stroke="#e2e5ea" />
      <line x1=${L} y1=${y(max)} x2=${W} y2=${y(max)} stroke="#e2e5ea" stroke-dasharray="3 3" />
      <text x=${L - 4} y=${y(max) + 4} text-anchor="end" font-size="10" fill="#5d6776">${max}</text>
      <text x=${L - 4} y=${y(0) + 4} text-anchor="end" font-size="10" fill="#5d6776">0</text>
      ${[0, Math.floor((days - 1) / 2), days - 1].map((i) => html`<text key=${i} x=${x(i)} y=${H - 4} text-anchor="middle" font-size="10" fill="#5d6776">${i + 1}</text>`)}
      ${series.map(([k, , color]) => html`<g key=${k} data-series=${k}><polyline points=${line(k)} fill="none" stroke=${color} stroke-width="2" />
        ${dates.map((d, i) => byDate.has(d) && html`<circle key=${d} cx=${x(i)} cy=${y(byDate.get(d)[k])} r=${k === 'users' ? 4.5 : 3} fill=${color}><title>${d}: ${byDate.get(d)[k]}</title></circle>`)}</g>`)}
    </svg>
    <figcaption class="legend small">${series.map(([k, l, color]) => html`<span key=${k}><span class="swatch" style=${{ background: color }}></span>${l}</span>`)}</figcaption>
  </figure>`;
}

function csv(daily, tenantName) {
  const esc = (v) => (/[",\n]/.test(String(v)) ? '"' + String(v).replace(/"/g, '""') + '"' : String(v));
  const head = ['date', 'tenantId', 'tenant', ...columns.map(([k]) => k)];
  const lines = daily.map((r) => [r.date, r.tenantId, tenantName(r.tenantId), ...columns.map(([k]) => r[k] || 0)].map(esc).join(','));
  return [head.join(','), ...lines].join('\r\n') + '\r\n';
}

export function BillingPage({ ctx }) {
  const [month, setMonth] = useState(thisMonth());
  const [tenantId, setTenantId] = useState('');
  const range = monthRange(month);
  const current = useApi('/directory/summary');
  const monthly = useApi('/directory/summary' + qs({ from: range.from, to: range.to }), [month]);
  const tenantName = (id) => (ctx.tenants.find((x) => x.id === id) || {}).name || id;
  return html`<${PageHead} title="Directory"><//>
    <${DirectoryTabs} current="billing" />
    <p class="muted">What a PSA bills from: the directory counted per tenant. The daily rows are recorded at 00:00 UTC.</p>
    <${Loaded} state=${current} what="The billing summary" rows=${3}>${(s) => html`<section class="panel flush" aria-labelledby="now-title">
      <h2 id="now-title">Now <span class="small muted">(counted <${Time} at=${s.generatedAt} />)</span></h2>
      ${s.tenants.length === 0 ? html`<${Empty} title="Nothing to count yet">Add a Microsoft 365 tenant or an IMAP account.<//>` : html`
      <div class="table-wrap"><table class="billing" data-testid="billing-now"><thead><tr><th>Tenant</th>${columns.map(([k, l]) => html`<th key=${k} class="num">${l}</th>`)}</tr></thead><tbody>
        ${s.tenants.map((t) => html`<tr key=${t.tenantId} data-tenant=${t.tenantId}><td>${tenantName(t.tenantId)}</td>${columns.map(([k]) => html`<td key=${k} class="num" data-count=${k}>${t[k]}</td>`)}</tr>`)}
      </tbody>${s.tenants.length > 1 && html`<tfoot><tr><th>Total</th>${columns.map(([k]) => html`<th key=${k} class="num">${s.total[k]}</th>`)}</tr></tfoot>`}</table></div>`}
    </section>`}<//>
    <section class="panel flush" aria-labelledby="daily-title">
      <h2 id="daily-title">Daily counts</h2>
      <div class="filters">
        <div class="field"><label for="bill-month">Month</label><input id="bill-month" type="month" value=${month} max=${thisMonth()} onChange=${(e) => e.target.value && setMonth(e.target.value)} /></div>
        ${ctx.provider && !ctx.tenant && html`<div class="field"><label for="bill-tenant">Tenant</label><select id="bill-tenant" value=${tenantId} onChange=${(e) => setTenantId(e.target.value)}>
          <option value="">Every tenant</option>${ctx.tenants.map((t) => html`<option key=${t.id} value=${t.id}>${t.name}</option>`)}</select></div>`}
        <span class="spacer"></span>
        <button type="button" disabled=${!monthly.data || !(monthly.data.daily || []).length}
          onClick=${() => saveFile(new Blob([csv((monthly.data.daily || []).filter((r) => !tenantId || r.tenantId === tenantId), tenantName)], { type: 'text/csv' }), `backstop-directory-${month}.csv`)}>Download CSV</button>
      </div>
      <${Loaded} state=${monthly} what="Daily counts" rows=${4}>${(s) => {
        const daily = (s.daily || []).filter((r) => !tenantId || r.tenantId === tenantId);
        if (daily.length === 0) return html`<${Empty} title="No daily counts for this month">The appliance records the counts every day at 00:00 UTC; a month before the first sync has none.<//>`;
        const byDate = perDay(daily, '');
        return html`<div class="chart-wrap"><${Chart} month=${month} days=${range.days} byDate=${byDate} /></div>
          <div class="table-wrap"><table class="billing daily" data-testid="billing-daily"><thead><tr><th>Date</th>${!tenantId && ctx.provider && html`<th>Tenant</th>`}${columns.map(([k, l]) => html`<th key=${k} class="num">${l}</th>`)}</tr></thead><tbody>
            ${daily.map((r) => html`<tr key=${r.date + r.tenantId} data-date=${r.date}><td class="nowrap">${r.date}</td>${!tenantId && ctx.provider && html`<td>${tenantName(r.tenantId)}</td>`}${columns.map(([k]) => html`<td key=${k} class="num">${r[k]}</td>`)}</tr>`)}
          </tbody></table></div>`;
      }}<//>
    </section>`;
}
