/*
 * The task view's actions (loaded before dashboard.js, whose helpers it uses when called), with
 * the queue's own calls and so its scopes: schedule (scheduleTask), rerun, cancel, retrigger (a new
 * task from this one's definition) and "edit and create" (the definition in an editor, checked
 * against the createTask request schema the service serves before it is sent).
 */
/* global api, el, enc, section, render, actionButton, actionNotes, noteAction, schemaErrors, isSlugid, newSlugid */
/* exported taskActions, freshTask */
'use strict';
/** Where the service serves createTask's request schema (shared/api/references.ts). */
var CREATE_TASK_SCHEMA = '/api/schemas/queue/v1/create-task-request.json';
var UNRESOLVED = ['unscheduled', 'pending', 'running'];
var schemaCache = null;

async function createTaskSchema() {
  if (!schemaCache) {
    var res = await fetch(CREATE_TASK_SCHEMA);
    if (!res.ok) throw new Error('the createTask schema did not load (HTTP ' + res.status + ')');
    schemaCache = await res.json();
  }
  return schemaCache;
}

/**
 * A copy of `definition` to create as a new task, as Taskcluster's UI retriggers: `created` now,
 * `deadline`, `expires` (and `notBefore`) as far from it as they were from the original's
 * `created`; without `dependencies` when `dropDependencies` (they have resolved already).
 */
function freshTask(definition, dropDependencies) {
  var t = JSON.parse(JSON.stringify(definition));
  var was = Date.parse(t.created);
  var now = Date.now();
  ['deadline', 'expires', 'notBefore'].forEach(function (k) {
    if (t[k]) t[k] = new Date(now + Date.parse(t[k]) - was).toJSON();
  });
  t.created = new Date(now).toJSON();
  if (dropDependencies) delete t.dependencies;
  return t;
}

/** Creates the task, then opens it with `note` shown. */
async function createTask(taskId, definition, note) {
  await api('PUT', '/task/' + enc(taskId), definition);
  noteAction('task=' + taskId, note);
  location.hash = 'task=' + enc(taskId);
}

/** A lifecycle call (schedule, rerun, cancel) whose answer is the task's status. */
function statusAction(taskId, verb) {
  return async function () {
    var r = await api('POST', '/task/' + enc(taskId) + '/' + verb, {});
    var last = r.status.runs[r.status.runs.length - 1];
    noteAction('task=' + taskId, verb + ': the task is ' + r.status.state + (last ? ' (run ' + last.runId + ')' : ''));
    render();
  };
}

/** The editor of "edit and create": the new taskId, the definition as JSON, and what is wrong with it. */
function editor(definitionId, definition) {
  var idInput = el('input', { name: 'taskId', size: '24', 'aria-label': 'new taskId' });
  idInput.value = newSlugid();
  var text = el('textarea', { name: 'definition', rows: '24', cols: '100', spellcheck: 'false', 'aria-label': 'task definition (JSON)' });
  text.value = JSON.stringify(freshTask(definition, false), null, 2);
  var problems = el('ul', { class: 'schema-errors', id: 'edit-errors' });
  var form = el(
    'form',
    { class: 'task-editor', 'data-keep': 'true', id: 'edit-form', hidden: 'hidden' },
    el(
      'p',
      null,
      'new taskId ',
      idInput,
      ' ',
      el('button', { type: 'submit', text: 'Create task' }),
      ' ',
      el('button', { type: 'button', class: 'cancel', text: 'Close', onclick: () => (form.hidden = true) }),
    ),
    text,
    problems,
  );
  var say = function (lines) {
    problems.textContent = '';
    lines.forEach(function (l) {
      problems.appendChild(el('li', { text: l }));
    });
  };
  form.addEventListener('submit', async function (ev) {
    ev.preventDefault();
    var body;
    try {
      body = JSON.parse(text.value);
    } catch (e) {
      return say(['not JSON: ' + e.message]);
    }
    try {
      var errors = schemaErrors(await createTaskSchema(), body);
      if (!isSlugid(idInput.value.trim())) errors.unshift('taskId: not a slugid');
      if (errors.length) return say(errors);
      say([]);
      await createTask(idInput.value.trim(), body, 'created from ' + definitionId);
    } catch (e) {
      say([(e.code ? e.code + ': ' : '') + e.message].concat(e.details ? [e.details] : []));
    }
  });
  return form;
}

/** The actions section of the task view. */
function taskActions(taskId, status, definition) {
  var unresolved = UNRESOLVED.indexOf(status.state) !== -1;
  var edit = definition.metadata ? editor(taskId, definition) : null;
  var bar = el(
    'p',
    { class: 'actions', id: 'task-actions' },
    actionButton('schedule', 'Schedule', statusAction(taskId, 'schedule'), {
      disabled: status.state === 'unscheduled' ? null : 'only an unscheduled task waits to be scheduled',
    }),
    actionButton('rerun', 'Rerun', statusAction(taskId, 'rerun'), {
      confirm: 'Add a new pending run to this task, with its retries reset?',
    }),
    actionButton('cancel', 'Cancel task', statusAction(taskId, 'cancel'), {
      confirm: 'Resolve this task as exception (canceled), stopping a running run?',
      disabled: unresolved ? null : 'the task is resolved already',
    }),
    actionButton(
      'retrigger',
      'Retrigger',
      async function () {
        await createTask(newSlugid(), freshTask(definition, true), 'retriggered from ' + taskId);
      },
      { confirm: 'Create a new task from this definition, with fresh dates and no dependencies?' },
    ),
    edit
      ? el('button', {
          type: 'button',
          'data-action': 'edit',
          text: 'Edit and create…',
          onclick: function () {
            edit.hidden = !edit.hidden;
          },
        })
      : null,
    ' ',
    actionNotes('task=' + taskId),
  );
  return section('Actions', bar, edit);
}
