// The failure-code catalogue: what each stable cause code means and how to
// fix it. A job failure's docsUrl points here with the code as the anchor,
// so the page scrolls to and marks that code.
import { html, useEffect, useState } from '../lib.js';
import { PageHead, Loaded, useApi, Badge } from '../ui.js';

const hashCode = () => decodeURIComponent(location.hash.slice(1));

export function FailureCodesPage() {
  const st = useApi('/failure-codes');
  // The in-page navigation (a job's "Read more" link) changes the hash
  // without a hashchange event; a typed or pasted #code fires one.
  const [target, setTarget] = useState(hashCode);
  useEffect(() => {
    const update = () => setTarget(hashCode());
    window.addEventListener('hashchange', update);
    window.addEventListener('backstop:navigate', update);
    return () => { window.removeEventListener('hashchange', update); window.removeEventListener('backstop:navigate', update); };
  }, []);
  useEffect(() => {
    if (st.data && target) document.getElementById(target)?.scrollIntoView({ block: 'start' });
  }, [st.data, target]);
  return html`<${PageHead} title="Failure codes" />
    <p class="muted" style=${{ maxWidth: '720px' }}>Every job failure carries one of these stable codes in
      <code>failure.code</code>. Codes are never renamed or removed, so a PSA or ticketing tool can map them to ticket types
      (the same list is served at <code>GET /api/v1/failure-codes</code>).</p>
    <${Loaded} state=${st} what="The failure codes">${() => html`<div>
      ${st.data.items.map((c) => html`<section class=${'panel' + (c.code === target ? ' target' : '')} id=${c.code} key=${c.code}
          aria-current=${c.code === target ? 'location' : undefined}>
        ${c.code === target && html`<div class="target-note">The cause you followed</div>`}
        <h2 style=${{ display: 'flex', gap: '8px', alignItems: 'center', flexWrap: 'wrap' }}>
          <code>${c.code}</code> <span>${c.title}</span>
          <${Badge}>${c.category}<//>
          ${c.transient && html`<${Badge} tone="blue">retried automatically<//>`}
          ${c.retryable && html`<${Badge}>retry after fixing<//>`}
        </h2>
        <ol>${c.fixSteps.map((step, i) => html`<li key=${i}>${step}</li>`)}</ol>
        ${c.params.length > 0 && html`<p class="muted">Parameters: ${c.params.map((p, i) => html`${i > 0 && ', '}<code>${p.name}</code> (${p.description})`)}</p>`}
      </section>`)}
    </div>`}<//>`;
}
