/*
 * The dashboard's log view (loaded before dashboard.js, whose helpers it uses when called):
 *   #log=<taskId>/<runId>        the run's log (`liveLog`, shared/artifacts/live-log.ts), opened at
 *                                its end and followed while the run is running: new lines are
 *                                fetched every LOG_POLL_MS and the view stays at the end until the
 *                                reader scrolls up ("Follow" resumes), as Taskcluster's viewer does.
 *   #log=<taskId>/<runId>/L<n>   the same, at line n (highlighted, not followed). Each line's number
 *                                links there; it is drawn by CSS from data-line, so copying the log
 *                                copies the log only.
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
/** How close to the end (px) still counts as at the end: a wheel step short of it stops following. */
var AT_END_PX = 40;

function atEnd() {
  return window.innerHeight + window.scrollY >= document.body.scrollHeight - AT_END_PX;
}

/** Marks line `n` as the one linked to, and scrolls it into view. */
function showLine(pre, n) {
  var old = pre.querySelector('.log-target');
  if (old) old.classList.remove('log-target');
  var line = document.getElementById('L' + n);
  if (!line) return false;
  line.classList.add('log-target');
  line.scrollIntoView({ block: 'center' });
  return true;
}

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
    var n = ++state.lines;
    var number = el('a', { class: 'ln', 'data-line': n, href: '#' + state.hash + '/L' + n, 'aria-label': 'line ' + n });
    pre.appendChild(el('span', { id: 'L' + n, class: 'log-line' + (l.indexOf(WORKER_PREFIX) === 0 ? ' log-worker' : '') }, number, l + '\n'));
  });
  pre.querySelector('.log-partial').textContent = state.partial;
  pre.appendChild(pre.querySelector('.log-partial'));
}

async function logView(arg) {
  var m = /^(.*)\/(\d+)(?:\/L(\d+))?$/.exec(arg) || [arg, arg, '0'];
  var taskId = m[1];
  var runId = Number(m[2]);
  var target = m[3] ? Number(m[3]) : null;
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
  // A tail's first line is not the log's first: numbers then count from the tail.
  var state = { partial: '', dropFirstLine: first.offset > 0, lines: 0, hash: LOG_VIEW + '=' + taskId + '/' + runId };
  var follow = target === null;
  var followButton = el('button', { type: 'button', id: 'log-follow' });
  var showFollow = function () {
    followButton.textContent = follow ? 'following the end' : 'Follow';
    followButton.disabled = follow;
  };
  followButton.addEventListener('click', function () {
    follow = true;
    showFollow();
    window.scrollTo(0, document.body.scrollHeight);
  });
  showFollow();
  var head = el('p', { class: 'log-head' }, 'task ', taskLink(taskId), ' · run ' + runId + ' · ', status, ' · ', size, ' · ', raw, ' ', followButton);
  // Scrolling up stops following; scrolling back to the end resumes it. Only an upward scroll
  // stops it, so lines that arrive while the view scrolls itself down never do.
  var lastY = window.scrollY;
  var onScroll = function () {
    if (run !== following) return window.removeEventListener('scroll', onScroll);
    var up = window.scrollY < lastY;
    lastY = window.scrollY;
    var next = atEnd() ? true : up ? false : follow;
    if (next !== follow) {
      follow = next;
      showFollow();
    }
  };
  // A line number opens that line without reloading the log (no hashchange, so no re-render).
  pre.addEventListener('click', function (ev) {
    var a = ev.target.closest && ev.target.closest('a.ln');
    if (!a) return;
    ev.preventDefault();
    history.replaceState(null, '', a.getAttribute('href'));
    follow = false;
    showFollow();
    showLine(pre, a.getAttribute('data-line'));
  });
  var skipped =
    first.offset > 0
      ? el('p', {
          class: 'muted',
          text: 'showing the last ' + LOG_TAIL_BYTES / 1048576 + ' MiB of ' + Math.round(first.size / 1048576) + ' MiB: the raw log has all of it',
        })
      : null;
  var show = function (chunk) {
    if (chunk.text) appendLines(pre, chunk.text, state);
    status.textContent = chunk.state;
    status.className = 'state state-' + chunk.state;
    size.textContent = chunk.size + ' bytes' + (chunk.state === 'running' ? ', following' : '') + (chunk.source === 'none' ? ' (no log yet)' : '');
    if (follow && chunk.text && pre.isConnected) window.scrollTo(0, document.body.scrollHeight);
  };
  show(first);
  // Once the view is in the page: at the end (following), or at the linked line.
  setTimeout(function () {
    if (run !== following) return;
    follow = !(target !== null && showLine(pre, target));
    if (follow) window.scrollTo(0, document.body.scrollHeight);
    showFollow();
    lastY = window.scrollY;
    window.addEventListener('scroll', onScroll);
  }, 0);
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
