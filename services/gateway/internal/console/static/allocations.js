// Allocations: search by tenant, pool, owner, namespace and address (the
// List filter syntax), kept live by the allocations watch stream, with
// polling every 2 s while the stream is down.
import { errorView, filterOf, list, parent, session, watch } from './api.js';
import { enumLabel, field, h, lastSegment, replace, table, tenantOf, time } from './dom.js';

/** The filter fields of the search form, in filter order. */
const FILTER_FIELDS = ['pool', 'owner', 'namespace', 'address'];

/** sleep waits ms milliseconds, or until signal is aborted. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

/** byTenantAndOwner orders allocations for people (the API orders them by name, a hash). */
function byTenantAndOwner(a, b) {
  return tenantOf(a.name).localeCompare(tenantOf(b.name)) || String(a.owner).localeCompare(String(b.owner));
}

/** announcedBy renders who announces an allocation's addresses, and its
 * conditions (another host using an L2 address: "Conflict"). */
function announcedBy(a) {
  const anns = a.announcements ?? [];
  const conds = (a.conditions ?? []).map((c) =>
    h('li', { class: 'condition', title: c.message ?? '' },
      h('span', { class: 'badge warn' }, c.type), ' ', h('code', {}, c.address),
      ' used by ', h('code', {}, c.hardwareAddress), ' (seen by ', lastSegment(c.announcer), ')'));
  if (!anns.length && !conds.length) return h('span', { class: 'muted' }, 'nobody');
  return h('ul', { class: 'plain' }, anns.map((n) =>
    h('li', {}, lastSegment(n.announcer), ' ', h('span', { class: 'tag' }, enumLabel(n.protocol, 'ANNOUNCEMENT_PROTOCOL_')),
      n.address ? [' ', h('code', {}, n.address)] : null)), conds);
}

/** allocationRow renders one allocation; fresh ones are highlighted. */
function allocationRow(a, fresh) {
  return h('tr', { 'data-name': a.name, class: fresh ? 'fresh' : null },
    h('th', { scope: 'row' }, a.owner ?? ''),
    h('td', {}, tenantOf(a.name)),
    h('td', {}, h('ul', { class: 'plain' }, (a.addresses ?? []).map((x) => h('li', {}, h('code', {}, x))))),
    h('td', {}, lastSegment(a.pool)),
    h('td', {}, a.namespace || h('span', { class: 'muted' }, '—')),
    h('td', {}, announcedBy(a)),
    h('td', {}, time(a.createTime)),
    h('td', {}, a.expireTime ? time(a.expireTime) : h('span', { class: 'muted' }, 'never')));
}

/** searchForm is the filter form, filled from the route's parameters. */
function searchForm(page, pools) {
  const p = page.params;
  const input = (name, label, hint) => field(label, h('input', {
    id: `f-${name}`, name, value: p.get(name) ?? '', autocomplete: 'off', spellcheck: 'false',
  }), hint);
  const poolSelect = h('select', { id: 'f-pool', name: 'pool' },
    h('option', { value: '' }, 'Any pool'),
    pools.map((n) => h('option', { value: n, '.selected': n === p.get('pool') }, n)));
  if (p.get('pool') && !pools.includes(p.get('pool'))) {
    poolSelect.append(h('option', { value: p.get('pool'), '.selected': true }, p.get('pool')));
  }
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Search allocations' },
    field('Tenant', h('input', {
      id: 'f-tenant', name: 'tenant', value: p.get('tenant') ?? session.tenant,
      autocomplete: 'off', spellcheck: 'false', placeholder: 'every tenant',
    })),
    field('Pool', poolSelect),
    input('owner', 'Owner'),
    input('namespace', 'Namespace'),
    input('address', 'Address'),
    h('div', { class: 'actions' },
      h('button', { type: 'submit' }, 'Search'),
      h('button', { type: 'reset', class: 'secondary' }, 'Clear')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (String(v).trim()) q.set(k, String(v).trim());
    page.go(`#/allocations${q.size ? `?${q}` : ''}`);
  });
  form.addEventListener('reset', (ev) => {
    ev.preventDefault();
    page.go('#/allocations');
  });
  return form;
}

/** allocationsPage lists allocations matching the route's filters, live. */
export async function allocationsPage(page) {
  const tenant = page.params.get('tenant') ?? session.tenant;
  const terms = Object.fromEntries(FILTER_FIELDS.map((f) => [f, page.params.get(f)]));
  const filter = filterOf(terms);
  const path = `/v1/${parent(tenant)}/allocations`;

  const liveEl = h('p', { class: 'live', id: 'live', role: 'status' }, 'Connecting…');
  const findInput = h('input', { id: 'find', type: 'search', autocomplete: 'off', placeholder: 'owner, address, pool…' });
  const countEl = h('p', { class: 'muted small', id: 'alloc-count' });
  const results = h('div', { id: 'alloc-results' }, h('p', { class: 'muted' }, 'Loading allocations…'));
  const formSlot = h('div');
  page.main.append(
    page.title('Allocations', liveEl),
    formSlot,
    h('p', { class: 'filter-expr' }, 'Filter: ', filter ? h('code', { id: 'filter-expr' }, filter) : h('span', { class: 'muted', id: 'filter-expr' }, 'none'),
      ' · Parent: ', h('code', {}, parent(tenant))),
    h('div', { class: 'find' }, field('Find in results', findInput)),
    countEl, results);

  // The pool choices come from ListPools; the form works without them.
  list('/v1/pools', 'pools', { signal: page.signal })
    .then(({ items }) => items.map((p) => lastSegment(p.name)))
    .catch(() => [])
    .then((pools) => { if (!page.signal.aborted) replace(formSlot, searchForm(page, pools)); });

  let items = [];
  let seen = null; // names shown so far; null before the first load
  let more = false;

  const show = () => {
    const needle = findInput.value.trim().toLowerCase();
    const shown = needle
      ? items.filter((a) => [a.owner, a.name, a.pool, a.namespace, ...(a.addresses ?? [])]
        .some((v) => String(v ?? '').toLowerCase().includes(needle)))
      : items;
    countEl.textContent = `${shown.length} of ${items.length}${more ? '+' : ''} allocation${items.length === 1 ? '' : 's'}`;
    replace(results, shown.length
      ? table('Allocations', ['Owner', 'Tenant', 'Addresses', 'Pool', 'Namespace', 'Announced by', 'Created', 'Expires'],
        shown.map((a) => allocationRow(a, seen !== null && !seen.has(a.name))), { id: 'alloc-table' })
      : h('p', { class: 'empty' }, items.length ? 'No allocation matches the text.' : 'No allocations match.'));
  };
  findInput.addEventListener('input', show);

  let last = '';
  const load = async () => {
    try {
      const out = await list(path, 'allocations', { query: { filter }, signal: page.signal });
      const key = JSON.stringify(out);
      if (key === last) return;
      last = key;
      const before = seen;
      ({ items, more } = out);
      items.sort(byTenantAndOwner);
      show();
      seen = new Set([...(before ?? []), ...items.map((a) => a.name)]);
    } catch (err) {
      if (err.name === 'AbortError') return;
      last = '';
      replace(results, errorView('Could not list allocations:', err));
    }
  };

  // One load at a time; a change seen meanwhile loads once more after it.
  let running = false;
  let again = false;
  const refresh = async () => {
    if (running) { again = true; return; }
    running = true;
    try {
      do { again = false; await load(); } while (again && !page.signal.aborted);
    } finally { running = false; }
  };

  let streaming = false;
  const setLive = (state, text) => {
    liveEl.dataset.state = state;
    liveEl.textContent = text;
  };
  page.every(2000, async () => { if (!streaming) await refresh(); });

  let backoff = 1000;
  while (!page.signal.aborted) {
    let reason = 'the stream ended';
    try {
      await watch(`${path}:watch`, (msg) => {
        if (!streaming && msg.snapshotComplete) {
          streaming = true;
          backoff = 1000;
          setLive('streaming', 'Live: watching for changes');
        }
        if (streaming) refresh();
      }, { signal: page.signal });
    } catch (err) {
      if (err.name === 'AbortError' || page.signal.aborted) return;
      if (err.unauthenticated) return;
      reason = err.message;
    }
    streaming = false;
    setLive('polling', `Live: polling every 2 s (watch stream: ${reason})`);
    await sleep(backoff, page.signal);
    backoff = Math.min(backoff * 2, 30000);
  }
}
