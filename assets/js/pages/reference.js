// The API reference, rendered from the running server's own OpenAPI
// description: always the exact contract of this appliance, offline.
import { html, useState, useMemo } from '../lib.js';
import { PageHead, Loaded, useApi, Empty, CopyButton, Link } from '../ui.js';
import { recentKey, curlExample } from './keys.js';

const methods = ['get', 'post', 'put', 'patch', 'delete'];

function refName(ref) { return ref ? ref.split('/').pop() : ''; }

function typeOf(s, schemas) {
  if (!s) return '';
  if (s.$ref) return refName(s.$ref);
  if (Array.isArray(s.type)) return s.type.filter((t) => t !== 'null').join(' | ') + (s.type.includes('null') ? ' | null' : '');
  if (s.type === 'array') return typeOf(s.items, schemas) + '[]';
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  return s.type || 'object';
}

function Schema({ schema, schemas }) {
  const s = schema && schema.$ref ? schemas[refName(schema.$ref)] : schema;
  if (!s || !s.properties) return html`<p class="small muted">${typeOf(schema, schemas)}</p>`;
  const required = new Set(s.required || []);
  return html`<div class="table-wrap"><table class="attempts"><thead><tr><th>Field</th><th>Type</th><th>Description</th></tr></thead><tbody>
    ${Object.entries(s.properties).map(([k, p]) => html`<tr key=${k}><td class="mono">${k}${required.has(k) ? '' : html`<span class="muted">?</span>`}</td>
      <td class="mono small">${typeOf(p, schemas)}${p.enum && p.type !== undefined ? ' ∈ ' + p.enum.join(', ') : ''}</td><td class="small">${p.description || ''}</td></tr>`)}
  </tbody></table></div>`;
}

function Operation({ method, path, op, schemas }) {
  const body = op.requestBody && op.requestBody.content && op.requestBody.content['application/json'];
  const ok = Object.entries(op.responses || {}).find(([c]) => c.startsWith('2'));
  const okSchema = ok && ok[1].content && (ok[1].content['application/json'] || ok[1].content['text/event-stream']);
  return html`<details class="op"><summary><span class=${'method ' + method}>${method.toUpperCase()}</span><code>${path}</code><span class="muted small">${op.summary}</span></summary>
    <div class="body">
      ${op.description && html`<p class="small">${op.description}</p>`}
      ${op.parameters && op.parameters.length > 0 && html`<h3>Parameters</h3><div class="table-wrap"><table class="attempts"><thead><tr><th>Name</th><th>In</th><th>Type</th><th>Description</th></tr></thead><tbody>
        ${op.parameters.map((p) => html`<tr key=${p.in + p.name}><td class="mono">${p.name}</td><td>${p.in}</td><td class="mono small">${typeOf(p.schema, schemas)}</td><td class="small">${p.description || ''}</td></tr>`)}</tbody></table></div>`}
      ${body && html`<h3>Request body</h3><${Schema} schema=${body.schema} schemas=${schemas} />`}
      ${okSchema && okSchema.schema && html`<h3>Response ${ok[0]}</h3><${Schema} schema=${okSchema.schema} schemas=${schemas} />`}
      <p class="small muted">Other answers: ${Object.keys(op.responses || {}).filter((c) => !c.startsWith('2')).join(', ') || 'none documented'} (problem+json).</p>
    </div></details>`;
}

export function ReferencePage() {
  const spec = useApi('/openapi.json');
  const [q, setQ] = useState('');
  const groups = useMemo(() => {
    if (!spec.data) return [];
    const byTag = new Map();
    for (const [path, item] of Object.entries(spec.data.paths || {})) {
      for (const m of methods) {
        const op = item[m];
        if (!op) continue;
        const text = `${m} ${path} ${op.summary || ''}`.toLowerCase();
        if (q && !text.includes(q.toLowerCase())) continue;
        const tag = (op.tags && op.tags[0]) || 'other';
        if (!byTag.has(tag)) byTag.set(tag, []);
        byTag.get(tag).push({ method: m, path, op });
      }
    }
    return [...byTag.entries()].sort(([a], [b]) => a.localeCompare(b));
  }, [spec.data, q]);
  const example = recentKey.value ? curlExample(recentKey.value, recentKey.tenantId, recentKey.provider) : '';
  return html`<${PageHead} title="API reference" crumb="Integrations"><a class="button" href="/api/v1/openapi.json" download="backstop-openapi.json">Download OpenAPI</a><//>
    <div class="panel"><h2>Getting started</h2>
      <p>Send an API key as <code>Authorization: Bearer bsk_…</code>. Each operation below names the one scope it needs. Errors are <code>application/problem+json</code> with a stable <code>code</code>; each key may make 600 requests per 10 minutes.</p>
      ${example ? html`<p class="small">With the key “${recentKey.name}” you just created:</p><pre class="code">${example}</pre><${CopyButton} text=${example} label="Copy curl command" />`
        : html`<p class="small muted">Create a key under <${Link} href="/ui/keys">API keys<//>; this page then shows a ready-to-paste curl command with it.</p>`}
    </div>
    <${Loaded} state=${spec} what="The API description" rows=${10}>${(d) => html`<div class="panel flush">
      <div class="filters"><div class="field grow"><label for="ref-q">Filter operations</label><input id="ref-q" type="search" placeholder="e.g. endpoints, POST, webhooks" value=${q} onInput=${(e) => setQ(e.target.value)} /></div>
        <span class="small muted">${d.info.title} ${d.info.version} · OpenAPI ${d.openapi}</span></div>
      ${groups.length === 0 ? html`<${Empty} title="No operation matches">Clear the filter to see every operation.<//>` : groups.map(([tag, ops]) => html`<section key=${tag}>
        <h3 style=${{ padding: '0 16px' }}>${tag}</h3>${ops.map((o) => html`<${Operation} key=${o.method + o.path} ...${o} schemas=${(d.components && d.components.schemas) || {}} />`)}</section>`)}
    </div>`}<//>`;
}
