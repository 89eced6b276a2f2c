// DOM helpers. The console builds every element with these: text goes in
// as text nodes, never as markup (the CSP enforces Trusted Types with no
// policy, so innerHTML and friends would throw).

/**
 * h builds an element. attrs: attributes, except `class` (a string or an
 * array, falsy entries dropped), `on*` (event listeners), and properties
 * given as `.name` (set on the element, e.g. `.checked`). Children are
 * nodes, strings (text), numbers, or arrays of them; null, undefined and
 * false are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') {
      el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
    } else if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k.startsWith('.')) {
      el[k.slice(1)] = v;
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

/** replace makes children (as for h) the only children of el. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** append adds children (as for h) to el. */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** table builds an accessible table: a caption, column headers, rows of cells. */
export function table(caption, headers, rows, attrs = {}) {
  return h('table', attrs,
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows));
}

/** field is a labelled form control with an optional hint. */
export function field(label, control, hint) {
  const id = control.id;
  let hintEl = null;
  if (hint) {
    hintEl = h('p', { class: 'hint', id: `${id}-hint` }, hint);
    control.setAttribute('aria-describedby', hintEl.id);
  }
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hintEl);
}

/** lastSegment returns what follows the last '/' of a resource name. */
export function lastSegment(name) {
  const s = String(name ?? '');
  return s.slice(s.lastIndexOf('/') + 1);
}

/** tenantOf returns the tenant of "tenants/{tenant}/...". */
export function tenantOf(name) {
  const m = /^tenants\/([^/]+)/.exec(String(name ?? ''));
  return m ? m[1] : '';
}

const timeFormat = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: '2-digit', day: '2-digit',
  hour: '2-digit', minute: '2-digit', second: '2-digit',
});

/** time renders an RFC 3339 timestamp as a <time> element. */
export function time(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return String(ts);
  return h('time', { datetime: ts, title: ts }, timeFormat.format(d));
}

/** enumLabel turns "IP_FAMILY_IPV4" into "IPV4" given the prefix "IP_FAMILY_". */
export function enumLabel(value, prefix) {
  return String(value ?? '').replace(prefix, '').replaceAll('_', ' ') || '—';
}
