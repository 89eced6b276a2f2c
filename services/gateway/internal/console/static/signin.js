// The sign-in page: a bearer token, checked against the gateway before it
// is kept, and optionally the tenant to show.
import { call, errorView, parent, session } from './api.js';
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
    const scope = tenant.value.trim();
    try {
      // A read of the allocations the console will show checks the token
      // and that it may see that tenant (or every tenant).
      await call('GET', `/v1/${parent(scope)}/allocations`, { query: { pageSize: 1 }, token: secret, signal: page.signal });
      session.signIn(secret, scope);
      page.go('#/pools', scope ? `Signed in to tenant ${scope}.` : 'Signed in.');
    } catch (err) {
      if (err.name === 'AbortError') return;
      const hint = err.code === 7 && !scope
        ? h('p', { class: 'hint-line' }, 'This token may not read every tenant. A tenant token needs its tenant: fill in Tenant.')
        : null;
      replace(result, errorView('Sign-in failed:', err), hint);
      submit.disabled = false;
      (hint ? tenant : token).focus();
    }
  });

  page.main.append(
    page.title('Sign in'),
    h('p', { class: 'muted' }, 'Beacon hands out load-balancer addresses from pools. Sign in with a token to see and manage them.'),
    form);
  token.focus();
}
