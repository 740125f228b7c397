/*
 * The dashboard's Secrets view (loaded before dashboard.js, whose `api`, `el`, `section`, `attempt`,
 * `timeCell` and `qs` it uses when called, and after index-hooks.js, whose `paged` it uses).
 *   #secrets   every secret's name and expiry, expired ones marked, a page at a time; needs
 *              `secrets:list-secrets`. Values are never asked for: the listing carries none.
 */
/* global api, el, section, attempt, timeCell, qs, paged */
/* exported secretsView */
'use strict';
var SECRETS_API = '/api/secrets/v1';
/** Rows per page: a deployment may hold many secrets; the rest is one "more" click away. */
var SECRETS_PAGE = 100;

function secretRow(s) {
  return el(
    'tr',
    { 'data-secret': s.name },
    el('td', { text: s.name }),
    timeCell(s.expires),
    s.expired ? el('td', { class: 'state state-exception', text: 'expired' }) : el('td'),
  );
}

async function secretsView() {
  return [
    section(
      'Secrets',
      el('p', { class: 'muted', text: 'Names and expiry only: values are never read here.' }),
      await attempt(function () {
        return paged(['name', 'expires', ''], 'no secrets', async function (token) {
          var r = await api('GET', '/secrets-with-expiry' + qs({ limit: SECRETS_PAGE, continuationToken: token }), undefined, SECRETS_API);
          return { token: r.continuationToken, rows: r.secrets.map(secretRow) };
        });
      }),
    ),
  ];
}
