// Global groups: one address for a Service in several clusters. The list
// shows each group's address, the tenants granted to join and the members.
import { errorView, list } from './api.js';
import { enumLabel, h, lastSegment, replace, table } from './dom.js';

/** groupRow renders one global group as a table row. */
function groupRow(g) {
  const pool = (g.name ?? '').split('/')[1] ?? '';
  const members = (g.members ?? []).map((m) => {
    const tenant = (m.allocation ?? '').split('/')[1] ?? '';
    const role = enumLabel(m.role ?? 'GLOBAL_ROLE_ACTIVE', 'GLOBAL_ROLE_').toLowerCase();
    return h('li', {}, h('code', {}, tenant), ` ${m.owner ?? ''} `, h('span', { class: role === 'backup' ? 'muted' : '' }, `(${role})`));
  });
  return h('tr', { 'data-group': lastSegment(g.name) },
    h('th', { scope: 'row' }, lastSegment(g.name),
      g.description ? h('div', { class: 'muted small' }, g.description) : null),
    h('td', {}, pool),
    h('td', {}, (g.addresses ?? []).length
      ? h('ul', { class: 'plain' }, g.addresses.map((a) => h('li', {}, h('code', {}, a))))
      : h('span', { class: 'muted' }, 'none yet')),
    h('td', {}, (g.tenants ?? []).length ? g.tenants.map(lastSegment).join(', ') : h('span', { class: 'muted' }, 'none')),
    h('td', {}, members.length ? h('ul', { class: 'plain' }, members) : h('span', { class: 'muted' }, 'no members')));
}

/** groupsPage lists every pool's global groups, refreshed every 2 s. */
export function groupsPage(page) {
  const body = h('div', { 'aria-live': 'off' }, h('p', { class: 'muted' }, 'Loading global groups…'));
  const updated = h('p', { class: 'muted small updated' });
  page.main.append(page.title('Global groups'), body, updated);
  let last = '';
  page.every(2000, async () => {
    try {
      const { items, more } = await list('/v1/pools/-/globalGroups', 'globalGroups', { signal: page.signal });
      const key = JSON.stringify(items);
      if (key !== last) {
        last = key;
        replace(body, items.length
          ? table('Global groups: one address announced by several clusters', ['Group', 'Pool', 'Addresses', 'Tenants', 'Members'],
            items.map(groupRow), { id: 'groups-table' })
          : h('p', { class: 'empty' }, 'No global groups. An administrator creates one with beaconctl group create POOL/GROUP --tenant …'),
        more ? h('p', { class: 'muted' }, 'Showing the first 1000 groups.') : null);
      }
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 2 s`;
    } catch (err) {
      if (err.name === 'AbortError') return;
      last = '';
      replace(body, errorView('Could not list global groups:', err));
    }
  });
}
