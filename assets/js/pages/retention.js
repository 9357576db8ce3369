// Retention policies in words and a form to change them: one policy per
// tenant (on the Storage page) and an optional override per machine (on
// its page). docs/retention.md is the reference; the appliance validates
// every policy, this form only says what it will do.
import { html, useState } from '../lib.js';
import { Field, ErrorNote } from '../ui.js';

/** The policy of a tenant that never saved one (docs/retention.md). */
export const defaultPolicy = { keepAllDays: 30, keepDailyDays: 90, keepWeeklyDays: 365, keepMonthlyDays: 2557 };

const tiers = [
  ['keepAllDays', 'Keep every backup for', 'Every backup younger than this many days is kept.'],
  ['keepDailyDays', 'Then one a day up to', 'The newest backup of each day (UTC) younger than this is kept.'],
  ['keepWeeklyDays', 'Then one a week up to', 'The newest backup of each week (Monday to Sunday, UTC) younger than this is kept.'],
  ['keepMonthlyDays', 'Then one a month up to', 'The newest backup of each calendar month younger than this is kept.'],
];

/** A number of days as a person would say it: "90 days", "1 year", "7 years". */
export function span(days) {
  if (days >= 365) {
    const years = Math.round(days / 365.25);
    if (Math.abs(days - years * 365.25) <= 2) return `${years} year${years === 1 ? '' : 's'}`;
  }
  return `${days} day${days === 1 ? '' : 's'}`;
}

/** The policy in one or two sentences. */
export function describePolicy(p) {
  const parts = [];
  if (p.keepAllDays) parts.push(`every backup for ${span(p.keepAllDays)}`);
  if (p.keepDailyDays) parts.push(`one a day up to ${span(p.keepDailyDays)}`);
  if (p.keepWeeklyDays) parts.push(`one a week up to ${span(p.keepWeeklyDays)}`);
  if (p.keepMonthlyDays) parts.push(`one a month up to ${span(p.keepMonthlyDays)}`);
  if (parts.length === 0) return 'Keep only the newest backup; every older one is removed.';
  const longest = Math.max(p.keepAllDays, p.keepDailyDays, p.keepWeeklyDays, p.keepMonthlyDays);
  return `Keep ${parts.join(', then ')}. Backups older than ${span(longest)} are removed, except the newest one, which is always kept.`;
}

/** What each tier of 0 means, in words; empty when no tier is 0. */
export function zeroWarnings(p) {
  const zero = tiers.filter(([k]) => p[k] === 0);
  if (zero.length === 0) return [];
  if (zero.length === tiers.length) return ['Every tier is 0: only the newest backup of each machine, mailbox and drive is kept. All older backups are removed at the next retention run.'];
  const out = [];
  if (p.keepAllDays === 0) out.push('“Keep every backup” is 0: even recent backups are thinned, so of several backups taken on one day only the newest stays.');
  if (p.keepDailyDays === 0) out.push('“One a day” is 0: no daily backups are kept beyond the first tier.');
  if (p.keepWeeklyDays === 0) out.push('“One a week” is 0: no weekly backups are kept.');
  if (p.keepMonthlyDays === 0) out.push('“One a month” is 0: no monthly backups are kept, so nothing older than the tiers above survives (except the newest backup).');
  return out;
}

/** The policy from the form's text, or the fields that are not whole numbers. */
function parse(form) {
  const policy = {};
  const errors = {};
  for (const [k] of tiers) {
    const v = String(form[k]).trim();
    if (!/^\d{1,6}$/.test(v)) errors[k] = 'Enter a whole number of days (0 skips this tier).';
    else policy[k] = Number(v);
  }
  return { policy, errors };
}

const asForm = (p) => Object.fromEntries(tiers.map(([k]) => [k, String(p[k])]));

/**
 * The four tiers as a form, with the policy in words and a warning for
 * each tier of 0 while the person types. save(policy) stores it and may
 * throw an ApiError whose fields name body.keepDailyDays etc.; children are
 * more buttons beside Save.
 */
export function PolicyForm({ initial, save, saveLabel = 'Save policy', idPrefix, resetTo, children }) {
  const [form, setForm] = useState(asForm(initial));
  const [error, setError] = useState(null);
  const [local, setLocal] = useState({});
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState(''); // the message after a save
  const { policy, errors } = parse(form);
  const complete = Object.keys(errors).length === 0;
  const changed = tiers.some(([k]) => String(form[k]).trim() !== String(initial[k]));
  const store = async (p, message) => {
    setBusy(true);
    try { const stored = await save(p); setForm(asForm(stored || p)); setSaved(message); } catch (err) { setError(err); }
    setBusy(false);
  };
  const submit = (e) => {
    e.preventDefault();
    setSaved(''); setError(null); setLocal(errors);
    if (complete) store(policy, 'Retention policy saved. It applies from the next retention run.');
  };
  const reset = () => { setSaved(''); setError(null); setLocal({}); store(resetTo, 'The default policy is back in place.'); };
  const fieldError = (k) => local[k] || (error && error.fields && (error.fields[k] || error.fields['policy.' + k]));
  const warnings = complete ? zeroWarnings(policy) : [];
  return html`<form onSubmit=${submit} noValidate>
    <${ErrorNote} error=${error} />
    ${saved && html`<div class="alert ok" role="status">${saved}</div>`}
    <div class="tiers">
      ${tiers.map(([k, label, hint]) => html`<${Field} key=${k} id=${idPrefix + k} label=${label + ' (days)'} hint=${hint} error=${fieldError(k)}>${(a) => html`
        <input ...${a} type="text" inputmode="numeric" name=${k} autocomplete="off" value=${form[k]}
          onInput=${(e) => { setForm({ ...form, [k]: e.target.value }); setSaved(''); if (local[k]) setLocal({ ...local, [k]: undefined }); }} />`}<//>`)}
    </div>
    ${changed && html`<p class="policy-words" aria-live="polite">${complete ? html`<strong>With these values:</strong> ${describePolicy(policy)}` : 'Enter a number of days for each tier.'}</p>`}
    ${warnings.length > 0 && html`<div class="alert warn" role="status" data-testid="zero-tier-warning"><strong>A tier of 0 is skipped.</strong>
      <ul class="plain">${warnings.map((w, i) => html`<li key=${i}>${w}</li>`)}</ul></div>`}
    <div class="actions" style=${{ justifyContent: 'flex-start' }}>
      <button class="primary" type="submit" disabled=${busy}>${busy ? 'Saving…' : saveLabel}</button>
      ${resetTo && html`<button type="button" onClick=${reset} disabled=${busy}>Reset to default</button>`}
      ${children}
    </div>
  </form>`;
}
