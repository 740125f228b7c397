/*
 * The operator dashboard's script (see shared/ops/dashboard.ts). Plain browser JavaScript, no build
 * step: it signs API requests with Hawk through WebCrypto and builds all DOM with textContent.
 */
/* global indexView, hooksView, secretsView, chartsSection, groupView, logView, LOG_VIEW, taskActions, hookView, hookNewView */
/* exported stateCell, signedUrl, duration */
'use strict';
/** The queue's public root URL (what Hawk signatures name), from /api/dashboard/config.json. */
var ROOT_URL = null;
var API = '/api/queue/v1';
var REFRESH_MS = 5000;
var CREDS_KEY = 'tcq-dashboard-credentials';

// ---- credentials (sessionStorage only) ----
function creds() {
  try {
    return JSON.parse(sessionStorage.getItem(CREDS_KEY) || 'null');
  } catch (e) {
    return null;
  }
}

// ---- Hawk request signing (WebCrypto HMAC-SHA256) ----
function b64(bytes) {
  var s = '';
  var a = new Uint8Array(bytes);
  for (var i = 0; i < a.length; i++) s += String.fromCharCode(a[i]);
  return btoa(s);
}
function utf8b64(text) {
  return b64(new TextEncoder().encode(text));
}
function nonce() {
  var a = new Uint8Array(6);
  crypto.getRandomValues(a);
  return b64(a).replace(/[+/=]/g, 'x');
}
async function hawkHeader(method, resource, c) {
  var root = new URL(ROOT_URL);
  var port = root.port || (root.protocol === 'https:' ? '443' : '80');
  var ts = Math.floor(Date.now() / 1000);
  var n = nonce();
  var ext = '';
  if (c.certificate) ext = utf8b64(JSON.stringify({ certificate: JSON.parse(c.certificate) }));
  var normalized = ['hawk.1.header', ts, n, method.toUpperCase(), resource, root.hostname.toLowerCase(), port, '', ext, ''].join('\n');
  var key = await crypto.subtle.importKey('raw', new TextEncoder().encode(c.accessToken), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  var mac = b64(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(normalized)));
  return 'Hawk id="' + c.clientId + '", ts="' + ts + '", nonce="' + n + '"' + (ext ? ', ext="' + ext + '"' : '') + ', mac="' + mac + '"';
}

/** How long a signed artifact link works: Taskcluster's UI signs for 15 minutes too. */
var SIGNED_URL_S = 15 * 60;

/**
 * A link to a GET of this API that carries its own signature (a Hawk bewit, as
 * taskcluster-client's buildSignedUrl makes), so the browser can open or download it directly; the
 * queue then redirects to the storage's own signed URL. Unsigned when nobody is signed in.
 */
async function signedUrl(path, base) {
  var resource = (base || API) + path;
  var c = creds();
  if (!c) return resource;
  var root = new URL(ROOT_URL);
  var port = root.port || (root.protocol === 'https:' ? '443' : '80');
  var exp = Math.floor(Date.now() / 1000) + SIGNED_URL_S;
  var ext = c.certificate ? utf8b64(JSON.stringify({ certificate: JSON.parse(c.certificate) })) : '';
  var normalized = ['hawk.1.bewit', exp, '', 'GET', resource, root.hostname.toLowerCase(), port, '', ext, ''].join('\n');
  var key = await crypto.subtle.importKey('raw', new TextEncoder().encode(c.accessToken), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  var mac = b64(await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(normalized)));
  var bewit = utf8b64(c.clientId + '\\' + exp + '\\' + mac + '\\' + ext)
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '');
  return resource + (resource.indexOf('?') === -1 ? '?' : '&') + 'bewit=' + bewit;
}

async function api(method, path, body, base) {
  var resource = (base || API) + path;
  var headers = { accept: 'application/json' };
  var c = creds();
  if (c) headers.authorization = await hawkHeader(method, resource, c);
  if (body !== undefined) headers['content-type'] = 'application/json';
  var res = await fetch(resource, { method: method, headers: headers, body: body === undefined ? undefined : JSON.stringify(body) });
  var data;
  try {
    data = await res.json();
  } catch (e) {
    data = null;
  }
  if (!res.ok) {
    var err = new Error(data && data.message ? String(data.message).split('\n')[0] : 'HTTP ' + res.status);
    if (data && data.message && String(data.message).indexOf('\n') !== -1) err.details = String(data.message);
    err.status = res.status;
    err.code = data && data.code;
    throw err;
  }
  return data;
}
var enc = encodeURIComponent;
function qs(o) {
  var parts = [];
  Object.keys(o).forEach(function (k) {
    if (o[k] !== undefined) parts.push(enc(k) + '=' + enc(o[k]));
  });
  return parts.length ? '?' + parts.join('&') : '';
}

// ---- DOM helpers (textContent only: nothing from the API is parsed as HTML) ----
function el(tag, attrs) {
  var e = document.createElement(tag);
  if (attrs)
    Object.keys(attrs).forEach(function (k) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'onclick') e.addEventListener('click', attrs[k]);
      else e.setAttribute(k, attrs[k]);
    });
  for (var i = 2; i < arguments.length; i++) {
    var ch = arguments[i];
    if (ch === null || ch === undefined) continue;
    e.appendChild(typeof ch === 'string' || typeof ch === 'number' ? document.createTextNode(String(ch)) : ch);
  }
  return e;
}
function grid(columns, rows, empty) {
  if (!rows.length) return el('p', { class: 'muted', text: empty || 'none' });
  var head = el('tr');
  columns.forEach(function (c) {
    head.appendChild(el('th', { text: c }));
  });
  var body = el('tbody');
  rows.forEach(function (r) {
    body.appendChild(r);
  });
  return el('table', null, el('thead', null, head), body);
}
function stateCell(s, attrs) {
  var a = attrs || {};
  a['class'] = 'state state-' + s;
  a.text = s;
  return el('td', a);
}
function taskLink(taskId) {
  return el('a', { href: '#task=' + enc(taskId), text: taskId });
}
function queueLink(q) {
  return el('a', { href: '#queue=' + enc(q), text: q });
}
function keyLink(k) {
  return el('a', { href: '#key=' + enc(k), text: k });
}
/** A span of time as people say it: "850 ms", "42 s", "59 min", "3 h 20 min", "2 d 4 h". */
function duration(ms) {
  var a = Math.abs(ms);
  if (a < 1000) return Math.round(a) + ' ms';
  if (a < 10000) return Math.round(a / 100) / 10 + ' s';
  var s = Math.round(a / 1000);
  if (s < 60) return s + ' s';
  var min = Math.round(a / 60000);
  if (min < 60) return min + ' min';
  if (min < 48 * 60) return min % 60 ? Math.floor(min / 60) + ' h ' + (min % 60) + ' min' : min / 60 + ' h';
  var h = Math.round(a / 3600000);
  return h % 24 ? Math.floor(h / 24) + ' d ' + (h % 24) + ' h' : h / 24 + ' d';
}
/** "in 59 min", "3 h ago", "just now" (the exact time is in the cell's tooltip). */
function ago(iso) {
  if (!iso) return '';
  var ms = Date.now() - Date.parse(iso);
  if (Math.abs(ms) < 1500) return 'just now';
  // Whole seconds: "9 s ago" (tenths are for measured durations, not for when).
  var span = Math.abs(ms) < 60000 ? Math.round(Math.abs(ms) / 1000) + ' s' : duration(ms);
  return ms < 0 ? 'in ' + span : span + ' ago';
}
/**
 * Who made a change: a worker's temporary credentials (`task-client/<taskId>/<runId>/on/<group>/<id>/until/<t>`)
 * show as the worker, anything else as the clientId.
 */
function actorText(actor) {
  var m = /^task-client\/[^/]+\/\d+\/on\/([^/]+)\/([^/]+)\/until\//.exec(actor || '');
  return m ? 'worker ' + m[1] + '/' + m[2] : actor || '';
}
function actorCell(actor) {
  return el('td', { title: actor || '', text: actorText(actor) });
}
function timeCell(iso) {
  return el('td', { title: iso || '', text: ago(iso) });
}
/** An API error as the operator can act on it: sign in, fix the token, or what the queue said. */
function errorBox(e) {
  var c = creds();
  if (e.status === 401 && c) return el('p', { class: 'hint bad-token', text: 'Not shown: the access token for ' + c.clientId + ' was refused.' });
  if ((e.status === 403 || e.status === 401) && !c) return el('p', { class: 'hint signin-hint', text: 'Sign in to see this.' });
  var box = el('div', { class: 'error' }, el('p', { text: (e.code ? e.code + ': ' : '') + e.message }));
  if (e.details) box.appendChild(el('details', null, el('summary', { text: 'details' }), el('pre', { text: e.details })));
  return box;
}
function section(title) {
  var s = el('section', null, el('h2', { text: title }));
  for (var i = 1; i < arguments.length; i++) if (arguments[i]) s.appendChild(arguments[i]);
  return s;
}
async function attempt(fn) {
  try {
    return await fn();
  } catch (e) {
    return errorBox(e);
  }
}

// ---- views ----
async function overview() {
  var out = [];
  out.push(await attempt(() => chartsSection(undefined)).then((n) => (n.tagName === 'SECTION' ? n : section('Activity', n))));
  out.push(
    section(
      'Task queues',
      await attempt(async function () {
        var r = await api('GET', '/task-queues' + qs({ limit: 200 }));
        var rows = await Promise.all(
          r.taskQueues.map(async function (q) {
            var id = q.taskQueueId;
            var counts = await api('GET', '/task-queues/' + enc(id) + '/counts').catch(function () {
              return {};
            });
            var states = await api('GET', '/task-queues/' + enc(id) + '/state-counts').catch(function () {
              return { counts: {} };
            });
            var tr = el('tr', { 'data-queue': id });
            tr.appendChild(el('td', null, queueLink(id)));
            tr.appendChild(el('td', { class: 'num pending', text: counts.pendingTasks === undefined ? '?' : counts.pendingTasks }));
            tr.appendChild(el('td', { class: 'num claimed', text: counts.claimedTasks === undefined ? '?' : counts.claimedTasks }));
            tr.appendChild(el('td', { class: 'num', text: states.counts.unscheduled === undefined ? '?' : states.counts.unscheduled }));
            tr.appendChild(el('td', { class: 'num delayed', text: states.counts.delayed === undefined ? '?' : states.counts.delayed }));
            tr.appendChild(el('td', { class: 'num suspended', text: states.counts.suspended === undefined ? '?' : states.counts.suspended }));
            tr.appendChild(el('td', { class: 'num', text: states.counts.completed === undefined ? '?' : states.counts.completed }));
            tr.appendChild(el('td', { class: 'num', text: states.counts.failed === undefined ? '?' : states.counts.failed }));
            tr.appendChild(el('td', { class: 'num', text: states.counts.exception === undefined ? '?' : states.counts.exception }));
            tr.appendChild(timeCell(q.lastDateActive));
            return tr;
          }),
        );
        return grid(
          ['task queue', 'pending', 'claimed', 'unscheduled', 'delayed', 'suspended', 'completed 24h', 'failed 24h', 'exception 24h', 'last active'],
          rows,
          'no task queues yet',
        );
      }),
    ),
  );
  out.push(
    section(
      'Concurrency keys held',
      await attempt(async function () {
        var r = await api('GET', '/concurrency-keys' + qs({ limit: 50 }));
        return grid(
          ['key', 'holder', 'run', 'since'],
          r.concurrencyKeys.map(function (k) {
            return el(
              'tr',
              { 'data-key': k.concurrencyKey },
              el('td', null, keyLink(k.concurrencyKey)),
              el('td', null, taskLink(k.holder.taskId)),
              el('td', { text: k.holder.runId }),
              timeCell(k.holder.since),
            );
          }),
          'no key is held',
        );
      }),
    ),
  );
  out.push(
    section(
      'Recent failures and exceptions',
      await attempt(async function () {
        var lists = await Promise.all(
          ['failed', 'exception'].map(function (s) {
            return api('GET', '/resolved-tasks' + qs({ state: s, limit: 25 }));
          }),
        );
        var all = lists[0].tasks
          .concat(lists[1].tasks)
          .sort(function (a, b) {
            return a.at < b.at ? 1 : -1;
          })
          .slice(0, 25);
        return grid(
          ['resolved', 'task', 'name', 'run', 'state', 'reason', 'task queue', 'worker'],
          all.map(function (t) {
            return el(
              'tr',
              null,
              timeCell(t.at),
              el('td', null, taskLink(t.taskId)),
              el('td', { text: t.name || '' }),
              el('td', { text: t.runId }),
              stateCell(t.state),
              el('td', { text: t.reasonResolved || '' }),
              el('td', null, queueLink(t.taskQueueId)),
              el('td', { text: t.workerGroup ? t.workerGroup + '/' + t.workerId : '' }),
            );
          }),
          'no failures or exceptions',
        );
      }),
    ),
  );
  return out;
}

function activeRows(tasks) {
  return tasks.map(function (t) {
    return el(
      'tr',
      null,
      el('td', null, taskLink(t.taskId)),
      el('td', { text: t.name || '' }),
      el('td', { text: t.runId === undefined ? '' : t.runId }),
      stateCell(t.state),
      timeCell(t.at),
      el('td', { text: t.workerGroup ? t.workerGroup + '/' + t.workerId : '' }),
      el('td', { text: t.reasonResolved || (t.reasonCreated && t.reasonCreated !== 'scheduled' ? t.reasonCreated : '') }),
    );
  });
}

/** Who holds a concurrency key, and who waits for it, next first. */
async function keyView(key) {
  return [
    section(
      'Concurrency key ' + key,
      await attempt(async function () {
        var k = await api('GET', '/concurrency-keys/' + enc(key));
        var h = k.holder;
        var holder = h
          ? el(
              'p',
              { id: 'key-holder' },
              'held by ',
              taskLink(h.taskId),
              ' run ' + h.runId + ' (' + (h.state || 'gone') + (h.workerGroup ? ' on ' + h.workerGroup + '/' + h.workerId : '') + ') since ' + h.since,
            )
          : el('p', { id: 'key-holder', class: 'muted', text: 'free' });
        var waiting = grid(
          ['#', 'task', 'run', 'priority', 'created'],
          k.waiting.map(function (w, i) {
            return el(
              'tr',
              { 'data-waiter': w.taskId },
              el('td', { text: i + 1 }),
              el('td', null, taskLink(w.taskId)),
              el('td', { text: w.runId }),
              el('td', { text: w.priority }),
              timeCell(w.created),
            );
          }),
          'nobody waits',
        );
        return el('div', null, holder, el('h3', { text: 'Waiting (next first)' }), waiting);
      }),
    ),
  ];
}

async function queueView(id) {
  var parts = id.split('/');
  var base = '/provisioners/' + enc(parts[0]) + '/worker-types/' + enc(parts[1]) + '/workers';
  var head = section(
    'Task queue ' + id,
    await attempt(async function () {
      var c = await api('GET', '/task-queues/' + enc(id) + '/state-counts');
      var p = el('p', { id: 'queue-counts' });
      Object.keys(c.counts).forEach(function (k) {
        p.appendChild(el('span', { class: 'state state-' + k, text: k + ': ' + c.counts[k] + '   ' }));
      });
      p.appendChild(el('span', { class: 'muted', title: c.since, text: '(resolved in the last ' + duration(Date.now() - Date.parse(c.since)) + ')' }));
      return p;
    }),
  );
  var lists = el('div', { class: 'row' });
  for (const s of ['pending', 'running', 'unscheduled', 'failed', 'exception', 'completed']) {
    lists.appendChild(
      el(
        'div',
        null,
        section(
          s,
          await attempt(async function () {
            var r = await api('GET', '/task-queues/' + enc(id) + '/tasks' + qs({ state: s, limit: 25 }));
            return grid(['task', 'name', 'run', 'state', 'since', 'worker', 'reason'], activeRows(r.tasks), 'none');
          }),
        ),
      ),
    );
  }
  var workers = section(
    'Workers',
    await attempt(async function () {
      var r = await api('GET', base + qs({ limit: 200 }));
      return grid(
        ['worker', 'first claim', 'last active', 'latest task', 'quarantined until', ''],
        r.workers.map(function (w) {
          var path = base + '/' + enc(w.workerGroup) + '/' + enc(w.workerId);
          var q = !!w.quarantineUntil && Date.parse(w.quarantineUntil) > Date.now();
          var outcome = el('span', { class: 'error' });
          var put = async function (until, info) {
            try {
              await api('PUT', path, { quarantineUntil: until.toJSON(), quarantineInfo: info });
              render();
            } catch (e) {
              outcome.textContent = (e.code ? e.code + ': ' : '') + e.message;
            }
          };
          var hours = el('input', { type: 'number', min: '1', value: '24', size: '4', name: 'hours', 'aria-label': 'hours' });
          var reason = el('input', { name: 'reason', placeholder: 'reason (recorded with your clientId)', size: '28' });
          var form = el(
            'form',
            { class: 'inline-form', 'data-keep': 'true', 'data-quarantine': w.workerGroup + '/' + w.workerId, hidden: 'hidden' },
            'for ',
            hours,
            ' h ',
            reason,
            ' ',
            el('button', { type: 'submit', text: 'Quarantine' }),
          );
          form.addEventListener('submit', function (ev) {
            ev.preventDefault();
            put(new Date(Date.now() + Number(hours.value) * 3600000), reason.value);
          });
          var btn = el('button', {
            type: 'button',
            'data-worker': w.workerGroup + '/' + w.workerId,
            text: q ? 'Lift quarantine' : 'Quarantine…',
            onclick: function () {
              if (q) put(new Date(), '');
              else form.hidden = !form.hidden;
            },
          });
          return el(
            'tr',
            null,
            el('td', { text: w.workerGroup + '/' + w.workerId }),
            timeCell(w.firstClaim),
            timeCell(w.lastDateActive),
            el('td', null, w.latestTask ? taskLink(w.latestTask.taskId) : ''),
            q ? timeCell(w.quarantineUntil) : el('td', { class: 'muted', text: 'no' }),
            el('td', null, btn, ' ', form, outcome),
          );
        }),
        'no workers have called claimWork',
      );
    }),
  );
  var charts = await attempt(() => chartsSection(id));
  return [head, charts.tagName === 'SECTION' ? charts : section('Activity', charts), lists, workers];
}

async function taskView(taskId) {
  var out = [];
  var status;
  try {
    status = (await api('GET', '/task/' + enc(taskId) + '/status')).status;
  } catch (e) {
    return [section('Task ' + taskId, errorBox(e))];
  }
  var definition = await api('GET', '/task/' + enc(taskId)).catch(function () {
    return {};
  });
  var summary = el(
    'p',
    null,
    definition.metadata ? el('strong', { text: definition.metadata.name + '  ' }) : null,
    'state ',
    el('span', { id: 'task-state', class: 'state state-' + status.state, text: status.state }),
    '  queue ',
    queueLink(status.taskQueueId),
    '  group ',
    el('a', { href: '#group=' + enc(status.taskGroupId), id: 'task-group', text: status.taskGroupId }),
    '  retries left ' + status.retriesLeft + '  deadline ',
    el('span', { title: status.deadline, text: ago(status.deadline) }),
  );
  var scheduling = schedulingSummary(status, definition);
  if (scheduling) summary.appendChild(scheduling);
  var runs = grid(
    ['run', 'state', 'created', 'resolved as', 'worker', 'scheduled', 'waited', 'ran', 'taken until', 'log'],
    status.runs.map(function (r) {
      var waited = r.started ? duration(Date.parse(r.started) - Date.parse(r.scheduled)) : '';
      var ran = r.started ? duration((r.resolved ? Date.parse(r.resolved) : Date.now()) - Date.parse(r.started)) : '';
      return el(
        'tr',
        { 'data-run': r.runId },
        el('td', { text: r.runId }),
        stateCell(r.state),
        el('td', { text: r.reasonCreated }),
        el('td', { text: r.reasonResolved || '' }),
        el('td', { text: r.workerGroup ? r.workerGroup + '/' + r.workerId : '' }),
        timeCell(r.scheduled),
        el('td', { title: r.started || '', text: waited }),
        el('td', { title: r.resolved || '', text: ran + (r.state === 'running' ? ' so far' : '') }),
        r.state === 'running' ? timeCell(r.takenUntil) : el('td'),
        el(
          'td',
          null,
          r.started ? el('a', { href: '#log=' + enc(taskId) + '/' + r.runId, class: 'log-link', text: r.state === 'running' ? 'live log' : 'log' }) : '',
        ),
      );
    }),
    'no runs (unscheduled)',
  );
  out.push(section('Task ' + taskId, summary, runs));
  out.push(taskActions(taskId, status, definition)); // task-actions.js
  out.push(
    section(
      'History (newest first)',
      await attempt(async function () {
        var h = await api('GET', '/task/' + enc(taskId) + '/history' + qs({ limit: 100 }));
        return grid(
          ['#', 'when', 'event', 'run', 'from', 'to', 'reason', 'by', 'worker'],
          h.history.map(function (e) {
            return el(
              'tr',
              null,
              el('td', { text: e.seq }),
              timeCell(e.time),
              el('td', { text: e.event }),
              el('td', { text: e.runId === undefined ? '' : e.runId }),
              el('td', { text: e.from || '' }),
              stateCell(e.to),
              el('td', { text: e.reason }),
              actorCell(e.actor),
              el('td', { text: e.workerGroup ? e.workerGroup + '/' + e.workerId : '' }),
            );
          }),
          'no history',
        );
      }),
    ),
  );
  out.push(
    section(
      'Events (newest first)',
      await attempt(async function () {
        var v = await api('GET', '/task/' + enc(taskId) + '/events' + qs({ limit: 100 }));
        return grid(
          ['#', 'exchange', 'run', 'routing key', 'CCs'],
          v.events.map(function (e) {
            return el(
              'tr',
              null,
              el('td', { text: e.seq }),
              el('td', { text: e.exchange.split('/').pop() }),
              el('td', { text: e.payload.runId === undefined ? '' : e.payload.runId }),
              el('td', { text: e.routingKey }),
              el('td', { text: e.routes.join(' ') }),
            );
          }),
          'no events',
        );
      }),
    ),
  );
  out.push(
    section(
      'Artifacts (latest run)',
      await attempt(async function () {
        try {
          var a = await api('GET', '/task/' + enc(taskId) + '/artifacts' + qs({ limit: 100 }));
          var runId = status.runs.length - 1;
          var rows = await Promise.all(
            a.artifacts.map(async function (x) {
              var url = await signedUrl('/task/' + enc(taskId) + '/runs/' + runId + '/artifacts/' + enc(x.name));
              var file = x.name.split('/').pop();
              return el(
                'tr',
                { 'data-artifact': x.name },
                el('td', { text: x.name }),
                el('td', { text: x.storageType }),
                el('td', { text: x.contentType || '' }),
                timeCell(x.expires),
                el(
                  'td',
                  null,
                  el('a', { href: url, target: '_blank', rel: 'noopener', class: 'open', text: 'open' }),
                  ' · ',
                  el('a', { href: url, download: file, class: 'download', text: 'download' }),
                  x.name === 'public/logs/live.log' ? el('span', null, ' · ', el('a', { href: '#log=' + enc(taskId) + '/' + runId, text: 'view log' })) : null,
                ),
              );
            }),
          );
          return grid(['name', 'type', 'content type', 'expires', ''], rows, 'no artifacts');
        } catch (e) {
          if (e.status === 404) return el('p', { class: 'muted', text: 'no artifacts (or this queue does not list them yet)' });
          throw e;
        }
      }),
    ),
  );
  out.push(
    section(
      'Definition',
      await attempt(async function () {
        var d = await api('GET', '/task/' + enc(taskId));
        return el('pre', { text: JSON.stringify(d, null, 2) });
      }),
    ),
  );
  return out;
}

/** The scheduling controls a task uses: its concurrency key, suspensions, a later start or resumption. */
function schedulingSummary(status, definition) {
  var parts = [];
  var suspensions = status.runs.filter(function (r) {
    return r.reasonResolved === 'suspended';
  }).length;
  var last = status.runs[status.runs.length - 1];
  if (suspensions)
    parts.push(
      el('span', { id: 'task-suspensions', class: 'state state-suspended', text: 'suspended ' + suspensions + (suspensions === 1 ? ' time' : ' times') }),
    );
  if (last && last.state === 'pending' && Date.parse(last.scheduled) > Date.now()) {
    var what = last.reasonCreated === 'resumed' ? 'resumes at ' : 'starts no earlier than ';
    parts.push(el('span', { id: 'task-resume-at', title: last.scheduled, text: what + last.scheduled + ' (' + ago(last.scheduled) + ')' }));
  }
  if (definition.concurrencyKey) parts.push(el('span', null, 'concurrency key ', keyLink(definition.concurrencyKey)));
  if (!parts.length) return null;
  var p = el('span', { class: 'scheduling' });
  parts.forEach(function (x) {
    p.appendChild(document.createTextNode('  '));
    p.appendChild(x);
  });
  return p;
}

// ---- frame ----
/** What the queue said of the stored credentials: 'ok', 'bad' (401) or unknown (not checked yet). */
var credsChecked = { clientId: null, result: null };

/** Shows who is signed in; checks new credentials once with a signed request (401 = wrong token). */
async function showSignIn() {
  var c = creds();
  var who = document.getElementById('who');
  var form = document.getElementById('login');
  if (!c) {
    who.className = 'signin signed-out';
    who.textContent = 'not signed in';
    who.title = 'Public data only. Sign in with a clientId and accessToken (npm start prints the root ones).';
    form.hidden = false;
    document.getElementById('logout').hidden = true;
    return;
  }
  if (credsChecked.clientId !== c.clientId + c.accessToken) {
    credsChecked = { clientId: c.clientId + c.accessToken, result: null };
    try {
      await api('GET', '/scopes/current', undefined, '/api/auth/v1');
      credsChecked.result = 'ok';
    } catch (e) {
      credsChecked.result = e.status === 401 ? 'bad' : 'ok'; // 403: valid credentials without auth:current-scopes
    }
  }
  form.hidden = credsChecked.result === 'ok';
  document.getElementById('logout').hidden = false;
  if (credsChecked.result === 'bad') {
    who.className = 'signin bad-creds';
    who.textContent = 'wrong access token for ' + c.clientId;
    who.title = 'The queue refused the signature: check the accessToken (and certificate) and sign in again.';
  } else {
    who.className = 'signin signed-in';
    who.textContent = 'signed in as ' + c.clientId;
    who.title = '';
  }
}

/** Whether the operator is typing in the page, reads past a listing's first page, or the view refreshes itself: auto-refresh waits. */
function busy() {
  var a = document.activeElement;
  if (a && document.getElementById('main').contains(a) && (a.tagName === 'INPUT' || a.tagName === 'TEXTAREA')) return true;
  if (document.querySelector('main form[data-keep]:not([hidden])')) return true;
  // A listing read past its first page: a refresh would fold it back to that page.
  if (document.querySelector('main [data-expanded]')) return true;
  return location.hash.indexOf('#' + LOG_VIEW + '=') === 0;
}

var rendering = false;
/** A render asked for while one ran (a link clicked during an auto-refresh): it runs right after. */
var renderAgain = false;
async function render() {
  if (!ROOT_URL) return;
  if (rendering) {
    renderAgain = true;
    return;
  }
  rendering = true;
  try {
    await showSignIn();
    api('GET', '/__heartbeat__').then(
      function () {
        var h = document.getElementById('health');
        h.textContent = 'healthy';
        h.className = 'badge ok';
      },
      function (e) {
        var h = document.getElementById('health');
        h.textContent = 'unhealthy';
        h.title = e.message;
        h.className = 'badge bad';
      },
    );
    var hash = decodeURIComponent(location.hash.slice(1));
    var nodes;
    if (hash.indexOf('task=') === 0) nodes = await taskView(hash.slice(5));
    else if (hash.indexOf('queue=') === 0) nodes = await queueView(hash.slice(6));
    else if (hash.indexOf('key=') === 0) nodes = await keyView(hash.slice(4));
    else if (hash.indexOf('group=') === 0)
      nodes = await groupView(hash.slice(6)); // group.js
    else if (hash.indexOf('log=') === 0)
      nodes = await logView(hash.slice(4)); // log.js
    else if (hash === 'index' || hash.indexOf('index=') === 0)
      nodes = await indexView(hash.slice(6)); // index-hooks.js
    else if (hash === 'hooks' || hash.indexOf('hooks=') === 0) nodes = await hooksView(hash.slice(6));
    else if (hash.indexOf('hook=') === 0)
      nodes = await hookView(hash.slice(5)); // hook-edit.js
    else if (hash.indexOf('hook-new') === 0) nodes = await hookNewView(hash.slice(9));
    else if (hash === 'secrets')
      nodes = await secretsView(); // secrets.js
    else nodes = await overview();
    if (!creds())
      nodes.unshift(
        el(
          'p',
          { class: 'banner', id: 'signin-banner' },
          el('strong', { text: 'Not signed in. ' }),
          'Enter a clientId and accessToken in the header to see task queues, tasks and logs (',
          el('code', { text: 'npm start' }),
          ' prints the root credentials). Without them, only what the anonymous role grants shows.',
        ),
      );
    if (creds() && credsChecked.result === 'bad')
      nodes.unshift(
        el(
          'p',
          { class: 'banner banner-bad', id: 'signin-banner' },
          el('strong', { text: 'Wrong access token for ' + creds().clientId + '. ' }),
          'The queue refused its signature: check the accessToken (and the certificate, for temporary credentials) and sign in again.',
        ),
      );
    var main = document.getElementById('main');
    main.textContent = '';
    nodes.forEach(function (n) {
      main.appendChild(n);
    });
    main.appendChild(el('p', { class: 'muted', id: 'rendered', text: 'updated ' + new Date().toLocaleTimeString() }));
  } finally {
    rendering = false;
    if (renderAgain) {
      renderAgain = false;
      render();
    }
  }
}

document.getElementById('login').addEventListener('submit', function (ev) {
  ev.preventDefault();
  var c = { clientId: document.getElementById('clientId').value.trim(), accessToken: document.getElementById('accessToken').value.trim() };
  var cert = document.getElementById('certificate').value.trim();
  if (cert) c.certificate = cert;
  if (c.clientId && c.accessToken) sessionStorage.setItem(CREDS_KEY, JSON.stringify(c));
  document.getElementById('accessToken').value = '';
  document.getElementById('certificate').value = '';
  render();
});
document.getElementById('logout').addEventListener('click', function () {
  sessionStorage.removeItem(CREDS_KEY);
  render();
});
document.getElementById('open').addEventListener('submit', function (ev) {
  ev.preventDefault();
  location.hash = 'task=' + enc(document.getElementById('taskId').value.trim());
});
document.getElementById('open-group').addEventListener('submit', function (ev) {
  ev.preventDefault();
  location.hash = 'group=' + enc(document.getElementById('taskGroupId').value.trim());
});
window.addEventListener('hashchange', render);

fetch('/api/dashboard/config.json')
  .then(function (res) {
    return res.json();
  })
  .then(function (config) {
    ROOT_URL = config.rootUrl;
    setInterval(function () {
      if (document.getElementById('auto').checked && !busy() && !rendering) render();
    }, REFRESH_MS);
    render();
  });
