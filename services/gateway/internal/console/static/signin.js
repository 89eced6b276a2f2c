// The sign-in page: a bearer token, checked against the gateway before it
// is kept, and optionally the tenant to show.
import { call, errorView, session } from './api.js';
import { field, h, replace } from './dom.js';

/** signInPage asks for a token and checks it with a harmless read. */
export function signInPage(page) {
  const token = h('input', {
    id: 'token', name: 'token', type: 'password', required: true,
    autocomplete: 'off', spellcheck: 'false', placeholder: 'bct_…',
  });
  const tenant = h('input', {
    id: 'tenant', name: 'tenant', type: 'text', autocomplete: 'off',
    spellcheck: 'false', pattern: '[a-z0-9]([-a-z0-9]*[a-z0-9])?',
  });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const result = h('div', { class: 'result' });
  const form = h('form', { class: 'card narrow', 'aria-labelledby': 'page-title', novalidate: true },
    field('Bearer token', token, 'An admin, viewer or tenant token (bct_…). It is kept in this tab only and sent to the gateway with each call.'),
    field('Tenant (optional)', tenant, 'Show only this tenant. A tenant token needs its tenant here; empty: every tenant.'),
    h('div', { class: 'actions' }, submit),
    result);

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const secret = token.value.trim();
    if (!secret) {
      replace(result, h('p', { class: 'error', role: 'alert' }, 'Enter a token.'));
      token.focus();
      return;
    }
    submit.disabled = true;
    replace(result, h('p', { class: 'muted' }, 'Checking the token…'));
    try {
      await call('GET', '/v1/pools', { query: { pageSize: 1 }, token: secret, signal: page.signal });
      session.signIn(secret, tenant.value.trim());
      page.go('#/pools', 'Signed in.');
    } catch (err) {
      if (err.name === 'AbortError') return;
      replace(result, errorView('Sign-in failed:', err));
      submit.disabled = false;
    }
  });

  page.main.append(
    page.title('Sign in'),
    h('p', { class: 'muted' }, 'Beacon hands out load-balancer addresses from pools. Sign in with a token to see and manage them.'),
    form);
  token.focus();
}
