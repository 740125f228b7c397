/*
 * The dashboard's log view (loaded before dashboard.js, whose helpers it uses when called):
 *   #log=<taskId>/<runId>   the run's log (`liveLog`, shared/artifacts/live-log.ts), followed while
 *                           the run is running: new lines are fetched every LOG_POLL_MS and the
 *                           view stays at the bottom unless the reader scrolled up.
 */
/* global api, el, enc, section, errorBox, taskLink, signedUrl */
/* exported logView, LOG_VIEW */
'use strict';
var LOG_POLL_MS = 1000;
/** A longer log shows its last LOG_TAIL_BYTES only (the whole one is a click away: raw log). */
var LOG_MAX_SHOWN_BYTES = 4 * 1024 * 1024;
var LOG_TAIL_BYTES = 1024 * 1024;
/** The prefix of the worker's own lines in a task log (worker/task-log.ts). */
var WORKER_PREFIX = '[taskcluster-worker]';
/** Marks the view that refreshes itself: the page's auto-refresh leaves it alone. */
var LOG_VIEW = 'log';
var following = 0;

function appendLines(pre, text, state) {
  if (state.dropFirstLine) {
    // A tail starts mid-line: from the first whole line.
    var nl = text.indexOf('\n');
    if (nl === -1) return;
    text = text.slice(nl + 1);
    state.dropFirstLine = false;
  }
  // The last line of the previous chunk may have been cut: continue it.
  var parts = (state.partial + text).split('\n');
  state.partial = parts.pop();
  parts.forEach(function (l) {
    pre.appendChild(el('span', { class: l.indexOf(WORKER_PREFIX) === 0 ? 'log-worker' : '' }, l + '\n'));
  });
  pre.querySelector('.log-partial').textContent = state.partial;
  pre.appendChild(pre.querySelector('.log-partial'));
}

async function logView(arg) {
  var slash = arg.lastIndexOf('/');
  var taskId = arg.slice(0, slash);
  var runId = Number(arg.slice(slash + 1));
  var run = ++following;
  var base = '/task/' + enc(taskId) + '/runs/' + runId + '/live-log';
  var first;
  try {
    first = await api('GET', base + '?offset=0');
    if (first.size > LOG_MAX_SHOWN_BYTES) first = await api('GET', base + '?offset=' + (first.size - LOG_TAIL_BYTES));
  } catch (e) {
    return [section('Log of ' + taskId + ' run ' + runId, errorBox(e))];
  }
  var pre = el('pre', { id: 'log', class: 'log' }, el('span', { class: 'log-partial' }));
  var status = el('span', { id: 'log-state', class: 'state state-' + first.state, text: first.state });
  var size = el('span', { class: 'muted', id: 'log-size' });
  var artifact = 'public/logs/live.log';
  var raw = el('a', { target: '_blank', rel: 'noopener', text: 'raw log' });
  signedUrl('/task/' + enc(taskId) + '/runs/' + runId + '/artifacts/' + enc(artifact)).then(function (u) {
    raw.href = u;
  });
  var head = el('p', { class: 'log-head' }, 'task ', taskLink(taskId), ' · run ' + runId + ' · ', status, ' · ', size, ' · ', raw);
  var state = { partial: '', dropFirstLine: first.offset > 0 };
  var skipped =
    first.offset > 0
      ? el('p', {
          class: 'muted',
          text: 'showing the last ' + LOG_TAIL_BYTES / 1048576 + ' MiB of ' + Math.round(first.size / 1048576) + ' MiB: the raw log has all of it',
        })
      : null;
  var show = function (chunk) {
    var atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    if (chunk.text) appendLines(pre, chunk.text, state);
    status.textContent = chunk.state;
    status.className = 'state state-' + chunk.state;
    size.textContent = chunk.size + ' bytes' + (chunk.state === 'running' ? ', following' : '') + (chunk.source === 'none' ? ' (no log yet)' : '');
    if (atBottom && chunk.text) window.scrollTo(0, document.body.scrollHeight);
  };
  show(first);
  var next = first.next;
  var poll = async function () {
    if (run !== following || location.hash.indexOf('#log=') !== 0) return;
    try {
      var c = await api('GET', base + '?offset=' + next);
      show(c);
      next = c.next;
      // Keep reading while there is more, or while the run may still write.
      if (c.next < c.size) return poll();
      if (c.state === 'running' || c.state === 'pending') setTimeout(poll, LOG_POLL_MS);
    } catch (e) {
      size.textContent = (e.code ? e.code + ': ' : '') + e.message;
      setTimeout(poll, LOG_POLL_MS * 5);
    }
  };
  if (first.next < first.size || first.state === 'running' || first.state === 'pending') setTimeout(poll, first.next < first.size ? 0 : LOG_POLL_MS);
  return [section('Log of ' + taskId + ' run ' + runId, head, skipped, pre)];
}
