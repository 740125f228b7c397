/*
 * The dashboard's actions (loaded before dashboard.js, whose helpers it uses when called): a button
 * that, for what cannot be undone, first opens a confirmation in the page (not a browser prompt,
 * which auto-refresh and clickjacking defences handle badly), and a line that says what happened.
 * Every call is signed with the signed-in user's credentials, so the queue checks their scopes.
 */
/* global el */
/* exported actionButton, actionNotes, noteAction */
'use strict';
/** What the last action said, per page, shown once after the re-render it caused. */
var actionNote = {};

/** Remembers `text` (and how it went) for the view `key`, to show after the next render. */
function noteAction(key, text, bad) {
  actionNote[key] = { text: text, bad: !!bad };
}

/** The note left for `key` (consumed), as an element; an empty span when there is none. */
function actionNotes(key) {
  var n = actionNote[key];
  delete actionNote[key];
  return el('span', { class: 'action-note' + (n && n.bad ? ' error' : ''), id: 'action-note', text: n ? n.text : '' });
}

/**
 * A button doing `act` (async, returns the note to show, or nothing). With `confirm`, the first
 * click opens a confirmation saying `confirm` with a "Yes, <label>" button; the form pauses
 * auto-refresh (data-keep) while open. `name` marks the button and its form for tests.
 */
function actionButton(name, label, act, opts) {
  var o = opts || {};
  var outcome = el('span', { class: 'action-outcome', 'data-outcome': name });
  var run = async function () {
    outcome.textContent = label + '…';
    outcome.className = 'action-outcome muted';
    try {
      await act();
      outcome.textContent = '';
    } catch (e) {
      outcome.textContent = label + ': ' + (e.code ? e.code + ': ' : '') + e.message;
      outcome.className = 'action-outcome error';
    }
  };
  var button = el('button', { type: 'button', 'data-action': name, text: label + (o.confirm ? '…' : '') });
  if (o.disabled) {
    button.disabled = true;
    button.title = o.disabled;
  }
  if (!o.confirm) {
    button.addEventListener('click', run);
    return el('span', { class: 'action' }, button, outcome);
  }
  var form = el(
    'form',
    { class: 'confirm-form', 'data-keep': 'true', 'data-confirm': name, hidden: 'hidden' },
    el('span', { text: o.confirm + ' ' }),
    el('button', { type: 'submit', class: 'danger', text: 'Yes, ' + label.toLowerCase() }),
    el('button', { type: 'button', class: 'cancel', text: 'No', onclick: () => (form.hidden = true) }),
  );
  form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    form.hidden = true;
    run();
  });
  button.addEventListener('click', function () {
    form.hidden = !form.hidden;
  });
  return el('span', { class: 'action' }, button, form, outcome);
}
