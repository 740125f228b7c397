/*
 * The dashboard's Index and Hooks views (loaded before dashboard.js, whose `api`, `el`, `grid`,
 * `section`, `attempt`, `taskLink` and `timeCell` they use when called). Calls are signed with the
 * user's credentials like every other dashboard call.
 *   #index=<namespace>   namespaces and indexed tasks under it (paged), each task opens the task view
 *   #hooks=<group>       hook groups, or one group's hooks with next fire, last fires and a trigger button;
 *                        each hook links to its own page (hook-edit.js)
 */
/* global api, el, grid, section, attempt, taskLink, timeCell, ago, enc, qs, actionNotes */
/* exported indexView, hooksView, paged */
'use strict';
var INDEX_API = '/api/index/v1';
var HOOKS_API = '/api/hooks/v1';
/** Rows per listing page: a namespace may hold many entries; the rest is one "more" click away. */
var INDEX_PAGE = 100;
/** Last fires shown per hook. */
var LAST_FIRES = 5;

function indexLink(ns, label) {
  return el('a', { href: '#index=' + enc(ns), text: label || ns || '(root)' });
}

/** The page at `token`, or the first one after it with rows: an empty page with a token is not the end. */
async function withRows(load, token) {
  var page = await load(token);
  while (!page.rows.length && page.token) page = await load(page.token);
  return page;
}

/** A paged listing: `load(token)` answers { rows, token }; a button fetches the next page in place. */
async function paged(columns, empty, load) {
  var first = await withRows(load, undefined);
  var table = grid(columns, first.rows, empty);
  var wrap = el('div', null, table);
  var token = first.token;
  if (token && table.tagName === 'TABLE') {
    var more = el('button', {
      type: 'button',
      class: 'more',
      text: 'more…',
      onclick: async function () {
        var next = await withRows(load, token);
        wrap.setAttribute('data-expanded', 'true');
        next.rows.forEach(function (r) {
          table.querySelector('tbody').appendChild(r);
        });
        token = next.token;
        if (!token) more.remove();
      },
    });
    wrap.appendChild(more);
  }
  return wrap;
}

async function indexView(ns) {
  var words = ns ? ns.split('.') : [];
  var crumbs = el('p', { id: 'index-path' }, indexLink('', 'index'));
  words.forEach(function (w, i) {
    crumbs.appendChild(document.createTextNode(' . '));
    crumbs.appendChild(indexLink(words.slice(0, i + 1).join('.'), w));
  });
  var suffix = ns ? '/' + enc(ns) : '';
  var namespaces = section(
    'Namespaces',
    await attempt(function () {
      return paged(['namespace', 'expires'], 'no namespaces here', async function (token) {
        var r = await api('GET', '/namespaces' + suffix + qs({ limit: INDEX_PAGE, continuationToken: token }), undefined, INDEX_API);
        return {
          token: r.continuationToken,
          rows: r.namespaces.map(function (n) {
            return el('tr', { 'data-namespace': n.namespace }, el('td', null, indexLink(n.namespace, n.name)), el('td', { text: n.expires }));
          }),
        };
      });
    }),
  );
  var tasks = section(
    'Indexed tasks',
    await attempt(function () {
      return paged(['name', 'task', 'rank', 'data', 'expires'], 'no tasks indexed here', async function (token) {
        var r = await api('GET', '/tasks' + suffix + qs({ limit: INDEX_PAGE, continuationToken: token }), undefined, INDEX_API);
        return {
          token: r.continuationToken,
          rows: r.tasks.map(function (t) {
            return el(
              'tr',
              { 'data-indexed': t.namespace },
              el('td', { text: t.namespace.split('.').pop() }),
              el('td', null, taskLink(t.taskId)),
              el('td', { class: 'num', text: t.rank }),
              el('td', null, el('code', { text: JSON.stringify(t.data) })),
              el('td', { text: t.expires }),
            );
          }),
        };
      });
    }),
  );
  return [section('Index', crumbs), namespaces, tasks];
}

function hookLink(group) {
  return el('a', { href: '#hooks=' + enc(group), text: group });
}

function lastFireText(f) {
  if (!f || f.result === 'no-fire') return 'never fired';
  if (f.result === 'success') return 'success';
  return 'error: ' + ((f.error && f.error.message) || '').split('\n')[0];
}

async function hookRow(group, h) {
  var base = '/hooks/' + enc(group) + '/' + enc(h.hookId);
  var results = await Promise.all([
    api('GET', base + '/status', undefined, HOOKS_API).catch(function () {
      return {};
    }),
    api('GET', base + '/last-fires' + qs({ limit: LAST_FIRES }), undefined, HOOKS_API).catch(function () {
      return { lastFires: [] };
    }),
  ]);
  var status = results[0];
  var fires = el('ul', { class: 'fires' });
  results[1].lastFires.forEach(function (f) {
    fires.appendChild(
      el(
        'li',
        { title: f.error || '' },
        el('span', { class: f.result === 'success' ? 'state state-completed' : 'state state-failed', text: f.result }),
        ' ',
        f.firedBy,
        ' ',
        ago(f.taskCreateTime),
        ' ',
        taskLink(f.taskId),
      ),
    );
  });
  var outcome = el('span', { class: 'muted trigger-outcome' });
  // The trigger payload, checked against the hook's triggerSchema by the service; JSON checked here first.
  var payload = el('textarea', { name: 'payload', rows: '3', cols: '34', 'aria-label': 'trigger payload (JSON)' });
  payload.value = '{}';
  var form = el(
    'form',
    { class: 'trigger-form', 'data-keep': 'true', 'data-trigger-form': group + '/' + h.hookId, hidden: 'hidden' },
    payload,
    el('button', { type: 'submit', text: 'Trigger' }),
    el('button', { type: 'button', class: 'cancel', text: 'Cancel', onclick: () => (form.hidden = true) }),
  );
  form.addEventListener('submit', async function (ev) {
    ev.preventDefault();
    var body;
    try {
      body = JSON.parse(payload.value);
    } catch (e) {
      outcome.textContent = 'The payload is not JSON: ' + e.message;
      return;
    }
    try {
      var r = await api('POST', base + '/trigger', body, HOOKS_API);
      outcome.textContent = 'created ';
      outcome.appendChild(r.taskId ? taskLink(r.taskId) : document.createTextNode('nothing: the template rendered no task'));
      form.hidden = true;
    } catch (e) {
      outcome.textContent = (e.code ? e.code + ': ' : '') + e.message;
    }
  });
  var trigger = el('button', {
    type: 'button',
    'data-trigger': group + '/' + h.hookId,
    text: 'Trigger…',
    onclick: function () {
      form.hidden = !form.hidden;
      if (!form.hidden) payload.focus();
    },
  });
  return el(
    'tr',
    { 'data-hook': group + '/' + h.hookId },
    el('td', null, el('a', { href: '#hook=' + enc(group) + '/' + enc(h.hookId), class: 'hook-link', text: h.hookId })),
    el('td', { text: h.metadata.name }),
    el('td', { text: (h.schedule || []).join(', ') }),
    el('td', {
      text: (h.bindings || [])
        .map(function (b) {
          return b.exchange.split('/').pop() + ' ' + b.routingKeyPattern;
        })
        .join('; '),
    }),
    timeCell(status.nextScheduledDate),
    el('td', { text: lastFireText(status.lastFire) }),
    el('td', null, fires),
    el('td', null, trigger, ' ', outcome, form),
  );
}

async function hooksView(group) {
  if (!group) {
    return [
      section(
        'Hook groups',
        el('p', null, el('a', { href: '#hook-new=', id: 'new-hook', text: 'Create a hook' })),
        await attempt(async function () {
          var r = await api('GET', '/hooks', undefined, HOOKS_API);
          return grid(
            ['group'],
            r.groups.map(function (g) {
              return el('tr', { 'data-group': g }, el('td', null, hookLink(g)));
            }),
            'no hooks yet',
          );
        }),
      ),
    ];
  }
  return [
    section(
      'Hooks of ' + group,
      el(
        'p',
        null,
        el('a', { href: '#hooks', text: 'all groups' }),
        ' · ',
        el('a', { href: '#hook-new=' + enc(group), id: 'new-hook', text: 'Create a hook in ' + group }),
        ' ',
        actionNotes('hooks=' + group),
      ),
      await attempt(async function () {
        var r = await api('GET', '/hooks/' + enc(group), undefined, HOOKS_API);
        var rows = await Promise.all(
          r.hooks.map(function (h) {
            return hookRow(group, h);
          }),
        );
        return grid(['hook', 'name', 'schedule', 'bindings', 'next fire', 'last fire', 'recent fires', ''], rows, 'no hooks in this group');
      }),
    ),
  ];
}
