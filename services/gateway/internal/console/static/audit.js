// The audit log: who allocated, released, renewed or expired what, newest
// first, with filters. Refreshed every 2 s.
import { errorView, filterOf, list, parent, session } from './api.js';
import { enumLabel, field, h, lastSegment, replace, table, tenantOf, time } from './dom.js';

const ACTIONS = ['ALLOCATE', 'RELEASE', 'RENEW', 'EXPIRE', 'HOLD_END'];

/** How many records the page shows. */
const LIMIT = 200;

/** auditForm is the filter form, filled from the route's parameters. */
function auditForm(page) {
  const p = page.params;
  const input = (name, label) => field(label, h('input', {
    id: `a-${name}`, name, value: p.get(name) ?? '', autocomplete: 'off', spellcheck: 'false',
  }));
  const action = h('select', { id: 'a-action', name: 'action' },
    h('option', { value: '' }, 'Any action'),
    ACTIONS.map((a) => h('option', { value: a, '.selected': a === p.get('action') }, enumLabel(a, ''))));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the audit log' },
    field('Tenant', h('input', {
      id: 'a-tenant', name: 'tenant', value: p.get('tenant') ?? session.tenant,
      autocomplete: 'off', spellcheck: 'false', placeholder: 'every tenant',
    })),
    field('Action', action),
    input('owner', 'Owner'), input('pool', 'Pool'), input('address', 'Address'), input('actor', 'Actor'),
    h('div', { class: 'actions' },
      h('button', { type: 'submit' }, 'Filter'),
      h('button', { type: 'reset', class: 'secondary' }, 'Clear')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (String(v).trim()) q.set(k, String(v).trim());
    page.go(`#/audit${q.size ? `?${q}` : ''}`);
  });
  form.addEventListener('reset', (ev) => { ev.preventDefault(); page.go('#/audit'); });
  return form;
}

/** recordRow renders one audit record. */
function recordRow(r) {
  const action = enumLabel(r.action, 'ACTION_');
  return h('tr', { 'data-name': r.name },
    h('td', {}, time(r.time)),
    h('td', {}, h('span', { class: ['tag', `action-${action.replace(' ', '-').toLowerCase()}`] }, action)),
    h('td', {}, r.actor ?? ''),
    h('td', {}, tenantOf(r.name)),
    h('th', { scope: 'row' }, r.owner ?? ''),
    h('td', {}, h('ul', { class: 'plain' }, (r.addresses ?? []).map((x) => h('li', {}, h('code', {}, x))))),
    h('td', {}, lastSegment(r.pool)),
    h('td', { class: 'small' }, r.requestId ? h('code', {}, r.requestId) : ''));
}

/** auditPage lists audit records, refreshed every 2 s. */
export function auditPage(page) {
  const tenant = page.params.get('tenant') ?? session.tenant;
  const terms = Object.fromEntries(['action', 'owner', 'pool', 'address', 'actor'].map((f) => [f, page.params.get(f)]));
  const filter = filterOf(terms);
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading the audit log…'));
  const updated = h('p', { class: 'muted small updated' });
  page.main.append(
    page.title('Audit log'),
    auditForm(page),
    h('p', { class: 'filter-expr' }, 'Filter: ', filter ? h('code', {}, filter) : h('span', { class: 'muted' }, 'none'),
      ' · Parent: ', h('code', {}, parent(tenant))),
    body, updated);
  let last = '';
  page.every(2000, async () => {
    try {
      const { items, more } = await list(`/v1/${parent(tenant)}/auditRecords`, 'auditRecords', { query: { filter }, limit: LIMIT, signal: page.signal });
      const key = JSON.stringify(items);
      if (key !== last) {
        last = key;
        replace(body, items.length
          ? table('Audit records, newest first', ['Time', 'Action', 'Actor', 'Tenant', 'Owner', 'Addresses', 'Pool', 'Request ID'],
            items.map(recordRow), { id: 'audit-table' })
          : h('p', { class: 'empty' }, 'No audit records match.'),
        more ? h('p', { class: 'muted' }, `Showing the newest ${LIMIT}; narrow the filter to see older ones.`) : null);
      }
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 2 s`;
    } catch (err) {
      if (err.name === 'AbortError') return;
      last = '';
      replace(body, errorView('Could not read the audit log:', err));
    }
  });
}
