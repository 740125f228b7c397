/*
 * A hook's own page, and creating, editing and deleting hooks (loaded before dashboard.js, whose
 * helpers it uses when called; HOOKS_API is index-hooks.js's):
 *   #hook=<hookGroupId>/<hookId>   definition, schedule with its next fires, status, recent fires;
 *                                  edit and delete
 *   #hook-new=<hookGroupId>        a new hook (the group may be changed)
 * Next fires are computed in the page with croner (vendor file croner.umd.js) and the options the
 * service fires with (shared/hooks/hooks.ts), so they are the fires the service will make. The
 * definition is checked against the createHook request schema the service serves, and each
 * schedule pattern parsed, before it is sent.
 */
/* global api, el, enc, qs, section, attempt, grid, timeCell, ago, taskLink, render, HOOKS_API, Cron,
   actionButton, actionNotes, noteAction, schemaErrors */
/* exported hookView, hookNewView, nextFires */
'use strict';
var CREATE_HOOK_SCHEMA = '/api/schemas/hooks/v1/create-hook-request.json';
/** Croner options of the service's schedules (HOOK_CRON in shared/hooks/hooks.ts). */
var HOOK_CRON = { timezone: 'UTC', mode: '5-or-6-parts', sloppyRanges: true, paused: true };
/** Next fires listed: enough to see the rhythm of a schedule. */
var NEXT_FIRES = 5;
/** Recent fires listed on a hook's page. */
var HOOK_PAGE_FIRES = 20;
var hookSchema = null;

/** The next `n` fires after `after` over all patterns, merged; throws naming a bad pattern. */
function nextFires(schedule, n, after) {
  var all = [];
  (schedule || []).forEach(function (p, i) {
    var runs;
    try {
      runs = new Cron(p, HOOK_CRON).nextRuns(n, after || new Date());
    } catch (e) {
      throw new Error('schedule[' + i + '] ' + JSON.stringify(p) + ': ' + String(e.message).replace(/^CronPattern: /, ''), { cause: e });
    }
    all = all.concat(runs);
  });
  all.sort(function (a, b) {
    return a - b;
  });
  return all
    .filter(function (d, i) {
      return i === 0 || d.getTime() !== all[i - 1].getTime();
    })
    .slice(0, n);
}

function firesList(dates, id) {
  var ul = el('ul', { class: 'next-fires', id: id });
  dates.forEach(function (d) {
    ul.appendChild(el('li', { title: d.toJSON(), 'data-fire': d.toJSON(), text: d.toJSON().replace('.000Z', 'Z') + ' (' + ago(d.toJSON()) + ')' }));
  });
  if (!dates.length) ul.appendChild(el('li', { class: 'muted', text: 'no schedule' }));
  return ul;
}

function hookPath(group, hookId) {
  return '/hooks/' + enc(group) + '/' + enc(hookId);
}

/** "<group>/<hookId>": the group has no slash, a hookId may. */
function splitHook(arg) {
  var slash = arg.indexOf('/');
  return slash === -1 ? [arg, ''] : [arg.slice(0, slash), arg.slice(slash + 1)];
}

/** A template for a new hook: a daily schedule and a task the service completes with its dates. */
function newHookTemplate() {
  return {
    metadata: { name: 'a new hook', description: 'what it does', owner: 'me@example.com', emailOnError: true },
    schedule: ['0 0 3 * * *'],
    bindings: [],
    triggerSchema: { type: 'object' },
    task: {
      taskQueueId: 'proj/linux',
      payload: { command: ['echo', { $eval: 'firedBy' }] },
      metadata: { name: 'from a hook', description: 'd', owner: 'me@example.com', source: 'https://example.com' },
    },
  };
}

/**
 * The hook editor: ids (fixed when editing), the definition as JSON with its next fires previewed
 * as it is typed, and the problems found before or by the service.
 */
function hookEditor(group, hookId, definition, isNew) {
  var groupInput = el('input', { name: 'hookGroupId', size: '20', 'aria-label': 'hookGroupId', placeholder: 'hookGroupId' });
  var idInput = el('input', { name: 'hookId', size: '24', 'aria-label': 'hookId', placeholder: 'hookId' });
  groupInput.value = group || '';
  idInput.value = hookId || '';
  if (!isNew) groupInput.readOnly = idInput.readOnly = true;
  var body = JSON.parse(JSON.stringify(definition));
  delete body.hookGroupId;
  delete body.hookId;
  var text = el('textarea', { name: 'definition', rows: '24', cols: '100', spellcheck: 'false', 'aria-label': 'hook definition (JSON)' });
  text.value = JSON.stringify(body, null, 2);
  var preview = el('div', { class: 'fires-preview' });
  var problems = el('ul', { class: 'schema-errors', id: 'hook-errors' });
  var attrs = { class: 'task-editor', 'data-keep': 'true', id: 'hook-form' };
  if (!isNew) attrs.hidden = 'hidden';
  var form = el(
    'form',
    attrs,
    el('p', null, groupInput, ' / ', idInput, ' ', el('button', { type: 'submit', text: isNew ? 'Create hook' : 'Save hook' })),
    text,
    el('h3', { text: 'Next fires of this schedule (UTC)' }),
    preview,
    problems,
  );
  var say = function (lines) {
    problems.textContent = '';
    lines.forEach(function (l) {
      problems.appendChild(el('li', { text: l }));
    });
  };
  var showPreview = function () {
    preview.textContent = '';
    try {
      preview.appendChild(firesList(nextFires(JSON.parse(text.value).schedule, NEXT_FIRES), 'preview-fires'));
    } catch (e) {
      preview.appendChild(el('p', { class: 'muted', text: e.message }));
    }
  };
  text.addEventListener('input', showPreview);
  showPreview();
  form.addEventListener('submit', async function (ev) {
    ev.preventDefault();
    var g = groupInput.value.trim();
    var id = idInput.value.trim();
    var def;
    try {
      def = JSON.parse(text.value);
    } catch (e) {
      return say(['not JSON: ' + e.message]);
    }
    try {
      if (!hookSchema) hookSchema = await api('GET', '', undefined, CREATE_HOOK_SCHEMA);
      var errors = schemaErrors(hookSchema, def);
      if (!g || !id) errors.unshift('hookGroupId and hookId are required');
      try {
        nextFires(def.schedule, 1);
      } catch (e) {
        errors.push(e.message);
      }
      if (errors.length) return say(errors);
      say([]);
      await api(isNew ? 'PUT' : 'POST', hookPath(g, id), def, HOOKS_API);
      noteAction('hook=' + g + '/' + id, isNew ? 'created' : 'saved');
      if (location.hash === '#hook=' + enc(g) + '/' + enc(id)) render();
      else location.hash = 'hook=' + enc(g) + '/' + enc(id);
    } catch (e) {
      say([(e.code ? e.code + ': ' : '') + e.message].concat(e.details ? [e.details] : []));
    }
  });
  return form;
}

async function hookNewView(group) {
  return [section('New hook', el('p', null, el('a', { href: '#hooks', text: 'all groups' })), hookEditor(group, '', newHookTemplate(), true))];
}

async function hookView(arg) {
  var ids = splitHook(arg);
  var group = ids[0];
  var hookId = ids[1];
  var base = hookPath(group, hookId);
  var h;
  try {
    h = await api('GET', base, undefined, HOOKS_API);
  } catch (e) {
    return [section('Hook ' + arg, await attempt(() => Promise.reject(e)))];
  }
  var status = await api('GET', base + '/status', undefined, HOOKS_API).catch(function () {
    return {};
  });
  var fires;
  try {
    fires = firesList(nextFires(h.schedule, NEXT_FIRES), 'next-fires');
  } catch (e) {
    fires = el('p', { class: 'error', text: e.message });
  }
  var edit = hookEditor(group, hookId, h, false);
  var key = 'hook=' + group + '/' + hookId;
  var actions = el(
    'p',
    { class: 'actions', id: 'hook-actions' },
    el('button', { type: 'button', 'data-action': 'edit-hook', text: 'Edit…', onclick: () => (edit.hidden = !edit.hidden) }),
    ' ',
    actionButton(
      'delete-hook',
      'Delete hook',
      async function () {
        await api('DELETE', base, undefined, HOOKS_API);
        noteAction('hooks=' + group, 'deleted ' + hookId);
        location.hash = 'hooks=' + enc(group);
      },
      { confirm: 'Delete ' + group + '/' + hookId + '? Its schedule stops; its past fires stay until they expire.' },
    ),
    actionNotes(key),
  );
  var info = el(
    'p',
    null,
    el('strong', { text: h.metadata.name + '  ' }),
    'owner ' + h.metadata.owner + '  next fire (service) ',
    el('span', { id: 'hook-next', title: status.nextScheduledDate || '', text: status.nextScheduledDate ? ago(status.nextScheduledDate) : 'none' }),
  );
  var last = await attempt(async function () {
    var r = await api('GET', base + '/last-fires' + qs({ limit: HOOK_PAGE_FIRES }), undefined, HOOKS_API);
    return grid(
      ['when', 'by', 'result', 'task'],
      r.lastFires.map(function (f) {
        return el(
          'tr',
          { title: f.error || '' },
          timeCell(f.taskCreateTime),
          el('td', { text: f.firedBy }),
          el('td', { class: f.result === 'success' ? 'state state-completed' : 'state state-failed', text: f.result }),
          el('td', null, taskLink(f.taskId)),
        );
      }),
      'never fired',
    );
  });
  return [
    section(
      'Hook ' + group + '/' + hookId,
      el('p', null, el('a', { href: '#hooks=' + enc(group), text: 'hooks of ' + group })),
      info,
      el('p', { class: 'muted', text: h.metadata.description }),
      actions,
      edit,
    ),
    section(
      'Schedule',
      el('p', { id: 'hook-schedule', text: h.schedule.length ? h.schedule.join(', ') : 'none (triggered only)' }),
      el('h3', { text: 'Next fires (UTC)' }),
      fires,
    ),
    section('Recent fires', last),
    section('Definition', el('pre', { text: JSON.stringify(h, null, 2) })),
  ];
}
