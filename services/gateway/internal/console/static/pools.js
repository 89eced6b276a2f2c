// Pools: the list with per-family utilization, and the create form.
import { call, errorView, list } from './api.js';
import { enumLabel, field, h, lastSegment, replace, table } from './dom.js';

/** big parses a decimal string (sizes may exceed 2^64) as a BigInt. */
function big(v) {
  try { return BigInt(v ?? 0); } catch { return 0n; }
}

/** count renders a BigInt readably: grouped digits, or ≈ m × 10^e when huge. */
export function count(n) {
  if (n < 1_000_000_000_000n) return n.toLocaleString();
  const s = n.toString();
  return `≈ ${s[0]}.${s.slice(1, 3)} × 10^${s.length - 1}`;
}

/** FAMILIES names the address families. */
const FAMILIES = { IP_FAMILY_IPV4: 'IPv4', IP_FAMILY_IPV6: 'IPv6' };

/** usageView renders one FamilyUsage: a meter and used / size (percent). */
function usageView(pool, u) {
  const size = big(u.size);
  const used = big(u.used);
  const free = big(u.free);
  const family = FAMILIES[u.family] ?? enumLabel(u.family, 'IP_FAMILY_');
  const basisPoints = size > 0n ? Number((used * 10000n) / size) : 0;
  const pct = basisPoints / 100;
  const pctText = used > 0n && basisPoints === 0 ? '<0.01%' : `${pct.toFixed(pct < 10 ? 2 : 1)}%`;
  const id = `use-${lastSegment(pool.name)}-${family}`;
  return h('div', { class: 'usage' },
    h('span', { class: 'family', id }, family),
    h('meter', {
      min: 0, max: 10000, low: 7000, high: 9000, optimum: 0, value: basisPoints,
      'aria-labelledby': id, title: `${pctText} used`,
    }, pctText),
    h('span', { class: 'numbers' }, `${count(used)} / ${count(size)} used · ${count(free)} free (${pctText})`));
}

/** poolRow renders one pool as a table row. */
function poolRow(p) {
  const fams = p.status?.families ?? [];
  return h('tr', { 'data-pool': lastSegment(p.name) },
    h('th', { scope: 'row' }, lastSegment(p.name),
      p.description ? h('div', { class: 'muted small' }, p.description) : null),
    h('td', {}, h('ul', { class: 'plain' }, (p.ranges ?? []).map((r) => h('li', {}, h('code', {}, r))))),
    h('td', {}, p.autoAssign === false ? 'No' : 'Yes'),
    h('td', {}, (p.tenants ?? []).length ? p.tenants.join(', ') : h('span', { class: 'muted' }, 'any')),
    h('td', { class: 'usage-cell' }, fams.length ? fams.map((u) => usageView(p, u)) : h('span', { class: 'muted' }, 'no addresses')));
}

/** poolsPage lists pools, refreshed every 2 s. */
export function poolsPage(page) {
  const body = h('div', { 'aria-live': 'off' }, h('p', { class: 'muted' }, 'Loading pools…'));
  const updated = h('p', { class: 'muted small updated' });
  page.main.append(
    page.title('Pools', h('a', { class: 'button', href: '#/pools/new' }, 'Create pool')),
    body, updated);
  let last = '';
  page.every(2000, async () => {
    try {
      const { items, more } = await list('/v1/pools', 'pools', { signal: page.signal });
      const key = JSON.stringify(items);
      if (key !== last) {
        last = key;
        replace(body, items.length
          ? table('Pools and their utilization', ['Pool', 'Ranges', 'Auto-assign', 'Tenants', 'Utilization'],
            items.map(poolRow), { id: 'pools-table' })
          : h('p', { class: 'empty' }, 'No pools yet. ', h('a', { href: '#/pools/new' }, 'Create the first one.')),
        more ? h('p', { class: 'muted' }, 'Showing the first 1000 pools.') : null);
      }
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 2 s`;
    } catch (err) {
      if (err.name === 'AbortError') return;
      last = '';
      replace(body, errorView('Could not list pools:', err));
    }
  });
}

/** splitList splits text on commas, whitespace and newlines. */
function splitList(text) {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
}

/**
 * markInvalid flags the controls that an error's field violations name
 * ("pool.ranges[0]" names the control of "pool.ranges").
 */
function markInvalid(err, controls) {
  for (const d of err.details ?? []) {
    for (const v of d.fieldViolations ?? []) {
      const c = controls[String(v.field ?? '').replace(/\[\d+\]$/, '')];
      c?.setAttribute('aria-invalid', 'true');
    }
  }
}

/** newPoolPage is the create-pool form. */
export function newPoolPage(page) {
  const id = h('input', { id: 'pool-id', name: 'pool-id', required: true, autocomplete: 'off', spellcheck: 'false', maxlength: 63 });
  const description = h('input', { id: 'pool-description', name: 'description', autocomplete: 'off' });
  const ranges = h('textarea', { id: 'pool-ranges', name: 'ranges', rows: 4, required: true, spellcheck: 'false' });
  const exclusions = h('textarea', { id: 'pool-exclusions', name: 'exclusions', rows: 2, spellcheck: 'false' });
  const tenants = h('input', { id: 'pool-tenants', name: 'tenants', autocomplete: 'off', spellcheck: 'false' });
  const autoAssign = h('input', { id: 'pool-auto-assign', name: 'auto-assign', type: 'checkbox', '.checked': true });
  const avoidBuggy = h('input', { id: 'pool-avoid-buggy', name: 'avoid-buggy-ips', type: 'checkbox' });
  const submit = h('button', { type: 'submit' }, 'Create pool');
  const result = h('div', { class: 'result' });

  const form = h('form', { class: 'card form', 'aria-labelledby': 'page-title', novalidate: true },
    field('Pool ID', id, 'Lower-case letters, digits and “-”, starting with a letter; at most 63 characters.'),
    field('Description (optional)', description),
    field('Ranges', ranges, 'One per line: CIDRs (192.0.2.0/24, 2001:db8::/120) or ranges (198.51.100.10-198.51.100.20). IPv4 and IPv6 may be mixed.'),
    field('Exclusions (optional)', exclusions, 'Addresses inside the ranges never to hand out, in the same forms.'),
    field('Tenants (optional)', tenants, 'Comma-separated tenants that may draw from the pool; empty: every tenant.'),
    h('div', { class: 'field check' }, autoAssign, h('label', { for: autoAssign.id }, 'Auto-assign: use this pool for allocations that do not name a pool')),
    h('div', { class: 'field check' }, avoidBuggy, h('label', { for: avoidBuggy.id }, 'Avoid buggy IPs: skip IPv4 addresses ending in .0 or .255')),
    h('div', { class: 'actions' }, submit, h('a', { class: 'button secondary', href: '#/pools' }, 'Cancel')),
    result);

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const c of form.querySelectorAll('[aria-invalid]')) c.removeAttribute('aria-invalid');
    const pool = {
      description: description.value.trim(),
      ranges: splitList(ranges.value),
      exclusions: splitList(exclusions.value),
      tenants: splitList(tenants.value),
      autoAssign: autoAssign.checked,
      avoidBuggyIps: avoidBuggy.checked,
    };
    submit.disabled = true;
    replace(result, h('p', { class: 'muted' }, 'Creating the pool…'));
    try {
      const out = await call('POST', '/v1/pools', { query: { poolId: id.value.trim() }, body: pool, signal: page.signal });
      page.go('#/pools', `Pool ${lastSegment(out.pool?.name ?? id.value.trim())} created.`);
    } catch (err) {
      if (err.name === 'AbortError') return;
      markInvalid(err, { pool_id: id, 'pool.description': description, 'pool.ranges': ranges, 'pool.exclusions': exclusions, 'pool.tenants': tenants });
      replace(result, errorView('The pool was not created:', err));
      submit.disabled = false;
    }
  });

  page.main.append(page.title('Create pool'), form);
  id.focus();
}
