// The console's entry point: the hash router, the page shell (navigation,
// sign-out, flash messages) and the life cycle of pages.
import { onUnauthenticated, session } from './api.js';
import { allocationsPage } from './allocations.js';
import { announcersPage } from './announcers.js';
import { auditPage } from './audit.js';
import { h, replace } from './dom.js';
import { groupsPage } from './groups.js';
import { newPoolPage, poolsPage } from './pools.js';
import { signInPage } from './signin.js';

/** routes maps "#/{route}" to a page. A page is a function of a Page. */
const routes = {
  signin: signInPage,
  pools: poolsPage,
  'pools/new': newPoolPage,
  groups: groupsPage,
  allocations: allocationsPage,
  announcers: announcersPage,
  audit: auditPage,
};

const main = document.getElementById('main');
const flashEl = document.getElementById('flash');
let current = null;

/**
 * Page is what a page gets: its <main>, the route's query parameters, a
 * signal aborted when the user leaves the page, and helpers.
 */
class Page {
  constructor(route, params) {
    this.route = route;
    this.params = params;
    this.controller = new AbortController();
    this.signal = this.controller.signal;
    this.main = main;
  }

  /** every runs fn now and then every ms milliseconds (while the tab is visible) until the page is left. */
  every(ms, fn) {
    let timer = 0;
    const tick = async () => {
      if (this.signal.aborted) return;
      if (!document.hidden) {
        try { await fn(); } catch (err) { if (err.name !== 'AbortError') console.error(err); }
      }
      if (!this.signal.aborted) timer = setTimeout(tick, ms);
    };
    this.signal.addEventListener('abort', () => clearTimeout(timer));
    tick();
  }

  /** go navigates to a route, with a flash message shown there. */
  go(hash, message) {
    navigate(hash, message);
  }

  /** title sets the page's <h1> and the document title. */
  title(text, ...extra) {
    document.title = `${text} · Beacon console`;
    return h('div', { class: 'page-head' }, h('h1', { id: 'page-title' }, text), ...extra);
  }
}

/** flash shows a message in the status area until the user leaves the page. */
export function flash(message) {
  replace(flashEl, message ? h('p', {}, message) : null);
}

/** pendingFlash is shown by the next page rendered. */
let pendingFlash = '';

/** navigate goes to hash and shows message on the page there. */
function navigate(hash, message = '') {
  pendingFlash = message;
  if (location.hash === hash) render();
  else location.hash = hash;
}

/** parseHash splits "#/route?query" into the route and its parameters. */
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const route = q < 0 ? raw : raw.slice(0, q);
  return { route, params: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)) };
}

/** render shows the page the location names. */
function render() {
  let { route, params } = parseHash();
  if (!session.signedIn && route !== 'signin') {
    location.replace('#/signin');
    return;
  }
  if (session.signedIn && (route === 'signin' || !routes[route])) {
    route = 'pools';
    history.replaceState(null, '', '#/pools');
  }
  const left = current?.route;
  current?.controller.abort();
  current = new Page(route, params);
  if (pendingFlash || left !== route) flash(pendingFlash);
  pendingFlash = '';
  shell(route);
  replace(main);
  routes[route](current);
  const heading = document.getElementById('page-title');
  if (heading && document.activeElement !== heading && !main.contains(document.activeElement)) {
    main.focus({ preventScroll: true });
  }
}

/** shell updates the navigation and the signed-in block for route. */
function shell(route) {
  document.getElementById('nav').hidden = !session.signedIn;
  document.getElementById('who').hidden = !session.signedIn;
  document.getElementById('who-scope').textContent = session.tenant
    ? `Signed in · tenant ${session.tenant}` : 'Signed in · all tenants';
  const section = route.split('/')[0];
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.dataset.route === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

document.getElementById('sign-out').addEventListener('click', () => {
  session.signOut();
  navigate('#/signin', 'Signed out. The token was removed from this tab.');
});

onUnauthenticated((err) => {
  if (!session.signedIn) return;
  session.signOut();
  navigate('#/signin', `The gateway refused the token (${err.message}). Sign in again.`);
});

window.addEventListener('hashchange', render);
render();
