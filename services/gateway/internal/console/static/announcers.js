// Announcers: the nodes subscribed now (or drained), their BGP sessions,
// their interfaces and what they announce. Refreshed every 2 s.
import { errorView, list, parent } from './api.js';
import { enumLabel, h, lastSegment, replace, table, tenantOf, time } from './dom.js';

/** badge is a short status word. */
function badge(text, kind) {
  return h('span', { class: ['badge', kind] }, text);
}

/** sessionsView renders an announcer's BGP sessions. */
function sessionsView(node, sessions) {
  if (!sessions.length) return h('p', { class: 'muted' }, 'No BGP sessions.');
  return table(`BGP sessions of ${node}`, ['Peer', 'State', 'BFD', 'Prefixes advertised', 'Since'],
    sessions.map((s) => {
      const state = enumLabel(s.state, 'STATE_');
      return h('tr', {},
        h('th', { scope: 'row' }, lastSegment(s.peer)),
        h('td', {}, badge(state, s.state === 'STATE_ESTABLISHED' ? 'ok' : 'warn')),
        h('td', {}, s.bfdUp ? badge('up', 'ok') : h('span', { class: 'muted' }, 'down or off')),
        h('td', {}, String(s.advertisedPrefixes ?? 0)),
        h('td', {}, time(s.since)));
    }), { class: 'compact' });
}

/** announcedView renders what an announcer reports it announces. */
function announcedView(node, announced) {
  if (!announced.length) return h('p', { class: 'muted' }, 'Announces nothing.');
  return table(`Addresses announced by ${node}`, ['Address', 'Protocol', 'Via'],
    announced.map((a) => h('tr', {},
      h('th', { scope: 'row' }, h('code', {}, a.address)),
      h('td', {}, h('span', { class: 'tag' }, enumLabel(a.protocol, 'ANNOUNCEMENT_PROTOCOL_'))),
      h('td', {}, [...(a.interfaces ?? []), ...(a.peers ?? []).map(lastSegment)].join(', ') || h('span', { class: 'muted' }, 'every interface')))),
    { class: 'compact' });
}

/** interfacesView renders a node's interfaces on one line each. */
function interfacesView(ifs) {
  if (!ifs.length) return h('p', { class: 'muted' }, 'None reported.');
  return h('ul', { class: 'plain interfaces' }, ifs.map((i) => h('li', {},
    h('code', {}, i.name), ' ', i.up ? badge('up', 'ok') : badge('down', 'warn'), ' ',
    (i.addresses ?? []).join(', '))));
}

/** announcerCard renders one announcer. */
function announcerCard(a) {
  const node = lastSegment(a.name);
  const labels = Object.entries(a.labels ?? {}).map(([k, v]) => `${k}=${v}`);
  const headingId = `node-${tenantOf(a.name)}-${node}`;
  return h('section', { class: 'card announcer', 'aria-labelledby': headingId, 'data-name': a.name },
    h('h2', { id: headingId }, node, ' ',
      a.live ? badge('live', 'ok') : badge('offline', 'warn'),
      a.draining ? badge('draining', 'warn') : null,
      a.excluded ? badge('excluded', 'warn') : null),
    h('p', { class: 'muted small' }, `Tenant ${tenantOf(a.name)}`,
      a.connectTime ? [' · connected ', time(a.connectTime)] : null,
      labels.length ? ` · labels ${labels.join(', ')}` : null),
    h('h3', {}, 'Interfaces'),
    interfacesView(a.interfaces ?? []),
    h('h3', {}, 'BGP sessions'),
    sessionsView(node, a.status?.sessions ?? []),
    h('h3', {}, 'Announces'),
    announcedView(node, a.status?.announced ?? []));
}

/** announcersPage lists announcers, refreshed every 2 s. */
export function announcersPage(page) {
  const body = h('div', {}, h('p', { class: 'muted' }, 'Loading announcers…'));
  const updated = h('p', { class: 'muted small updated' });
  page.main.append(page.title('Announcers'), body, updated);
  let last = '';
  page.every(2000, async () => {
    try {
      const { items } = await list(`/v1/${parent()}/announcers`, 'announcers', { signal: page.signal });
      const key = JSON.stringify(items);
      if (key !== last) {
        last = key;
        replace(body, ...(items.length
          ? items.map(announcerCard)
          : [h('p', { class: 'empty' }, 'No announcers are connected. An announcer appears here while announcerd on a node is subscribed, or while its node is drained.')]));
      }
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every 2 s`;
    } catch (err) {
      if (err.name === 'AbortError') return;
      last = '';
      replace(body, errorView('Could not list announcers:', err));
    }
  });
}
