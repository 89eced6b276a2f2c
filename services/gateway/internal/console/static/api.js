// The gateway's REST API as the console uses it: the signed-in token, JSON
// calls, paged lists, the allocations watch stream, and API errors.
import { h } from './dom.js';

const TOKEN_KEY = 'beacon.console.token';
const TENANT_KEY = 'beacon.console.tenant';

/**
 * session is the signed-in token and the tenant the console shows ("" for
 * every tenant), kept in sessionStorage: they last as long as the tab and
 * are never written to disk by the console.
 */
export const session = {
  get token() { return sessionStorage.getItem(TOKEN_KEY) ?? ''; },
  get tenant() { return sessionStorage.getItem(TENANT_KEY) ?? ''; },
  get signedIn() { return this.token !== ''; },
  signIn(token, tenant) {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(TENANT_KEY, tenant);
  },
  signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(TENANT_KEY);
  },
};

/** parent is "tenants/{tenant}", or "tenants/-" for every tenant. */
export function parent(tenant = session.tenant) {
  return `tenants/${tenant ? encodeURIComponent(tenant) : '-'}`;
}

/** The names of google.rpc.Code values. */
const CODES = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND',
  'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION',
  'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS',
  'UNAUTHENTICATED',
];

/**
 * APIError is an error answer of the API: the JSON body's code, message
 * and details (google.rpc.Status), with the HTTP status.
 */
export class APIError extends Error {
  constructor(httpStatus, status) {
    super(status?.message || `HTTP ${httpStatus}`);
    this.name = 'APIError';
    this.httpStatus = httpStatus;
    this.code = Number(status?.code ?? 0);
    this.details = Array.isArray(status?.details) ? status.details : [];
  }

  /** codeName is the gRPC code's name, e.g. INVALID_ARGUMENT. */
  get codeName() { return CODES[this.code] ?? `code ${this.code}`; }

  /** unauthenticated tells a refused or missing token. */
  get unauthenticated() { return this.httpStatus === 401 || this.code === 16; }
}

/** onUnauthenticated is called when the gateway refuses the token. */
let unauthenticatedHook = () => {};
export function onUnauthenticated(fn) { unauthenticatedHook = fn; }

/** request makes a fetch Request for path with the session's token. */
function request(method, path, { query, body, signal, token = session.token } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, String(v));
  }
  const headers = { Accept: 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const init = { method, headers, signal, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  return new Request(url, init);
}

/** errorFrom turns a failed response into an APIError. */
async function errorFrom(resp) {
  let status = null;
  try {
    status = await resp.json();
  } catch {
    status = { message: `${resp.status} ${resp.statusText}`.trim() };
  }
  return new APIError(resp.status, status);
}

/** unreachable is the error for a request that got no answer. */
function unreachable(err) {
  const e = new APIError(0, { code: 14, message: `The gateway did not answer: ${err.message}` });
  e.cause = err;
  return e;
}

/**
 * call makes one API call and returns the decoded JSON answer. It throws
 * an APIError for an error answer or no answer, and an AbortError when
 * signal is aborted. A refused token also calls the onUnauthenticated hook
 * (unless opts.token was given explicitly: the sign-in check).
 */
export async function call(method, path, opts = {}) {
  let resp;
  try {
    resp = await fetch(request(method, path, opts));
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw unreachable(err);
  }
  if (!resp.ok) {
    const e = await errorFrom(resp);
    if (e.unauthenticated && opts.token === undefined) unauthenticatedHook(e);
    throw e;
  }
  const text = await resp.text();
  return text ? JSON.parse(text) : {};
}

/**
 * list calls a List method and follows next_page_token until it has
 * `limit` items or there are no more. It returns { items, more }.
 */
export async function list(path, field, { query = {}, limit = 1000, signal } = {}) {
  const items = [];
  let pageToken = '';
  for (;;) {
    const pageSize = Math.min(limit - items.length, 1000);
    const out = await call('GET', path, { query: { ...query, pageSize, pageToken }, signal });
    items.push(...(out[field] ?? []));
    pageToken = out.nextPageToken ?? '';
    if (!pageToken || items.length >= limit) return { items, more: pageToken !== '' };
  }
}

/**
 * watch reads a server stream (grpc-gateway's newline-delimited JSON:
 * {"result": ...} per message, {"error": ...} on failure) and calls
 * onMessage with each result. It resolves when the stream ends and throws
 * an APIError if it fails.
 */
export async function watch(path, onMessage, { query, signal } = {}) {
  let resp;
  try {
    resp = await fetch(request('GET', path, { query, signal }));
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw unreachable(err);
  }
  if (!resp.ok) {
    const e = await errorFrom(resp);
    if (e.unauthenticated) unauthenticatedHook(e);
    throw e;
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      if (msg.error) throw new APIError(resp.status, msg.error);
      if (msg.result) onMessage(msg.result);
    }
  }
}

/** quote renders a filter value as a double-quoted string. */
export function quote(v) {
  return `"${String(v).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
}

/**
 * filterOf builds a List filter, `a = "x" AND b = "y"`, from the
 * non-empty entries of terms ({field: value}).
 */
export function filterOf(terms) {
  return Object.entries(terms)
    .filter(([, v]) => v !== undefined && v !== null && String(v).trim() !== '')
    .map(([k, v]) => `${k} = ${quote(String(v).trim())}`)
    .join(' AND ');
}

/**
 * detailView renders one google.rpc.Status detail; a field violation that
 * the message already says word for word is left out.
 */
function detailView(d, message) {
  const type = String(d['@type'] ?? '').replace(/^type\.googleapis\.com\//, '');
  switch (type) {
    case 'google.rpc.BadRequest':
      return (d.fieldViolations ?? [])
        .filter((v) => message !== `${v.field}: ${v.description}`)
        .map((v) => h('li', {}, h('code', {}, v.field || '(request)'), ': ', v.description ?? ''));
    case 'google.rpc.ErrorInfo': {
      const meta = Object.entries(d.metadata ?? {}).map(([k, v]) => `${k}=${v}`).join(', ');
      return h('li', {}, 'Reason: ', h('code', {}, d.reason ?? ''), d.domain ? ` (${d.domain})` : '', meta ? ` — ${meta}` : '');
    }
    case 'google.rpc.RetryInfo':
      return h('li', {}, `Retry after ${d.retryDelay ?? 'a moment'}.`);
    case 'google.rpc.QuotaFailure':
      return (d.violations ?? []).map((v) => h('li', {}, `Quota: ${v.subject ?? ''} ${v.description ?? ''}`.trim()));
    case 'google.rpc.PreconditionFailure':
      return (d.violations ?? []).map((v) => h('li', {}, `${v.subject ?? ''}: ${v.description ?? ''}`));
    case 'google.rpc.LocalizedMessage':
      return h('li', {}, d.message ?? '');
    default:
      return h('li', {}, h('code', {}, JSON.stringify(d)));
  }
}

/**
 * errorView renders an error readably: what failed, the code, the message
 * and the details (field violations first). title says what was tried.
 */
export function errorView(title, err) {
  if (!(err instanceof APIError)) {
    return h('div', { class: 'error', role: 'alert' },
      h('p', { class: 'error-title' }, title), h('p', {}, String(err?.message ?? err)));
  }
  const details = err.details.flatMap((d) => [detailView(d, err.message)].flat());
  return h('div', { class: 'error', role: 'alert' },
    h('p', { class: 'error-title' }, title, ' ',
      h('span', { class: 'code' }, err.codeName),
      err.httpStatus ? h('span', { class: 'http' }, ` HTTP ${err.httpStatus}`) : ''),
    h('p', { class: 'error-message' }, err.message),
    details.length ? h('ul', { class: 'error-details' }, details) : null);
}
