/*
 * The dashboard's task-group view (loaded before dashboard.js, whose helpers it uses when called):
 *   #group=<taskGroupId>   progress by state, and the dependency graph of the group's tasks, each
 *                          node a link to its task, then the tasks as a table; seal and cancel.
 * The graph is laid out in columns by dependency depth (a task right of everything it waits for).
 */
/* global api, el, enc, qs, section, attempt, taskLink, grid, stateCell, timeCell, ago, render, actionButton, actionNotes, noteAction */
/* exported groupView */
'use strict';
/** Members read at most (pages of 1000): enough for a graph anyone can read. */
var GROUP_MAX_TASKS = 2000;
/** Nodes drawn at most; a larger group shows progress and the table only. */
var GRAPH_MAX_NODES = 400;
var STATE_ORDER = ['completed', 'running', 'pending', 'unscheduled', 'failed', 'exception'];
var NODE_W = 190;
var NODE_H = 30;
var COL_GAP = 60;
var ROW_GAP = 12;
var SVG_NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  var e = document.createElementNS(SVG_NS, tag);
  Object.keys(attrs || {}).forEach(function (k) {
    if (k === 'text') e.textContent = attrs[k];
    else e.setAttribute(k, attrs[k]);
  });
  for (var i = 2; i < arguments.length; i++) e.appendChild(arguments[i]);
  return e;
}

async function groupMembers(taskGroupId) {
  var tasks = [];
  var token;
  do {
    var r = await api('GET', '/task-group/' + enc(taskGroupId) + '/list' + qs({ limit: 1000, continuationToken: token }));
    tasks = tasks.concat(r.tasks);
    token = r.continuationToken;
  } while (token && tasks.length < GROUP_MAX_TASKS);
  return { tasks: tasks, truncated: !!token };
}

/** A stacked bar of the group's tasks by state, with the counts beside it. */
function progress(tasks) {
  var counts = {};
  tasks.forEach(function (t) {
    counts[t.status.state] = (counts[t.status.state] || 0) + 1;
  });
  var bar = el('div', { class: 'progress', id: 'group-progress' });
  var legend = el('p', { class: 'progress-legend' });
  STATE_ORDER.forEach(function (s) {
    if (!counts[s]) return;
    var part = el('div', { class: 'bar-' + s, title: s + ': ' + counts[s], 'data-state': s });
    part.style.width = (100 * counts[s]) / tasks.length + '%';
    bar.appendChild(part);
    legend.appendChild(el('span', { class: 'state state-' + s, 'data-count': s, text: s + ' ' + counts[s] }));
  });
  var done = (counts.completed || 0) + (counts.failed || 0) + (counts.exception || 0);
  legend.appendChild(el('span', { class: 'muted', text: done + ' of ' + tasks.length + ' resolved' }));
  return el('div', null, bar, legend);
}

/** Columns by dependency depth within the group (dependencies outside it do not count). */
function layers(tasks) {
  var byId = {};
  tasks.forEach(function (t) {
    byId[t.status.taskId] = t;
  });
  var depth = {};
  var visiting = {};
  function d(id) {
    if (depth[id] !== undefined) return depth[id];
    if (visiting[id]) return 0; // a cycle cannot be created, but never loop
    visiting[id] = true;
    var deps = (byId[id].task.dependencies || []).filter(function (x) {
      return byId[x] && x !== id;
    });
    depth[id] = deps.length
      ? 1 +
        Math.max.apply(
          null,
          deps.map(function (x) {
            return d(x);
          }),
        )
      : 0;
    return depth[id];
  }
  var cols = [];
  tasks.forEach(function (t) {
    var k = d(t.status.taskId);
    (cols[k] = cols[k] || []).push(t);
  });
  var byName = function (a, b) {
    return a.task.metadata.name < b.task.metadata.name ? -1 : a.task.metadata.name > b.task.metadata.name ? 1 : 0;
  };
  // Fewer crossing edges: each column ordered by the mean row of what its tasks wait for (left to
  // right), then the first column by the mean row of what waits for its tasks.
  var row = {};
  var place = function (c) {
    c.forEach(function (t, j) {
      row[t.status.taskId] = j;
    });
  };
  var mean = function (list) {
    return list.length
      ? list.reduce(function (a, b) {
          return a + b;
        }, 0) / list.length
      : Infinity;
  };
  cols.forEach(function (c, i) {
    if (i === 0) c.sort(byName);
    else {
      var key = {};
      c.forEach(function (t) {
        key[t.status.taskId] = mean(
          (t.task.dependencies || [])
            .filter(function (x) {
              return row[x] !== undefined;
            })
            .map(function (x) {
              return row[x];
            }),
        );
      });
      c.sort(function (a, b) {
        return key[a.status.taskId] - key[b.status.taskId] || byName(a, b);
      });
    }
    place(c);
  });
  if (cols.length > 1) {
    var below = {};
    tasks.forEach(function (t) {
      (t.task.dependencies || []).forEach(function (x) {
        if (depth[x] === 0 && depth[t.status.taskId] === 1) (below[x] = below[x] || []).push(row[t.status.taskId]);
      });
    });
    cols[0].sort(function (a, b) {
      return mean(below[a.status.taskId] || []) - mean(below[b.status.taskId] || []) || byName(a, b);
    });
    place(cols[0]);
  }
  return { cols: cols, byId: byId };
}

function graph(tasks) {
  var l = layers(tasks);
  var pos = {};
  var height = 0;
  l.cols.forEach(function (c, i) {
    c.forEach(function (t, j) {
      pos[t.status.taskId] = { x: 10 + i * (NODE_W + COL_GAP), y: 10 + j * (NODE_H + ROW_GAP) };
    });
    height = Math.max(height, 20 + c.length * (NODE_H + ROW_GAP));
  });
  var width = 20 + l.cols.length * (NODE_W + COL_GAP) - COL_GAP;
  var root = svg('svg', { id: 'group-graph', width: width, height: height, viewBox: '0 0 ' + width + ' ' + height });
  var edges = svg('g', { class: 'edges' });
  var nodes = svg('g', { class: 'nodes' });
  root.appendChild(edges);
  root.appendChild(nodes);
  tasks.forEach(function (t) {
    var to = pos[t.status.taskId];
    (t.task.dependencies || []).forEach(function (dep) {
      var from = pos[dep];
      if (!from || dep === t.status.taskId) return;
      var x1 = from.x + NODE_W;
      var y1 = from.y + NODE_H / 2;
      var x2 = to.x;
      var y2 = to.y + NODE_H / 2;
      var mid = (x1 + x2) / 2;
      edges.appendChild(svg('path', { d: 'M' + x1 + ',' + y1 + ' C' + mid + ',' + y1 + ' ' + mid + ',' + y2 + ' ' + x2 + ',' + y2, class: 'edge' }));
    });
    var name = t.task.metadata.name || t.status.taskId;
    var label = name.length > 26 ? name.slice(0, 25) + '…' : name;
    nodes.appendChild(
      svg(
        'a',
        { href: '#task=' + enc(t.status.taskId), 'data-node': t.status.taskId },
        svg('title', { text: name + ' (' + t.status.state + ')' }),
        svg('rect', { x: to.x, y: to.y, width: NODE_W, height: NODE_H, rx: 6, class: 'node node-' + t.status.state }),
        svg('text', { x: to.x + 10, y: to.y + NODE_H / 2 + 4, class: 'node-label', text: label }),
      ),
    );
  });
  return el('div', { class: 'graph-wrap' }, root);
}

/**
 * Seal (sealTaskGroup) and cancel (cancelTaskGroup). This queue cancels only a sealed group, so
 * that no task added meanwhile escapes the cancel: "Cancel group" seals first.
 */
function groupActions(taskGroupId, info, tasks) {
  var base = '/task-group/' + enc(taskGroupId);
  var unresolved = tasks.filter(function (t) {
    return ['unscheduled', 'pending', 'running'].indexOf(t.status.state) !== -1;
  }).length;
  var key = 'group=' + taskGroupId;
  var sealed = info && info.sealed;
  return el(
    'p',
    { class: 'actions', id: 'group-actions' },
    sealed ? el('span', { id: 'group-sealed', title: sealed, text: 'sealed ' + ago(sealed) + '  ' }) : null,
    actionButton(
      'seal',
      'Seal group',
      async function () {
        await api('POST', base + '/seal', {});
        noteAction(key, 'sealed: no more tasks may join this group');
        render();
      },
      { confirm: 'Seal this group? No task can be added to it afterwards.', disabled: sealed ? 'sealed already' : null },
    ),
    actionButton(
      'cancel-group',
      'Cancel group',
      async function () {
        if (!sealed) await api('POST', base + '/seal', {});
        var r = await api('POST', base + '/cancel', {});
        noteAction(key, 'cancelled ' + r.cancelledCount + ' of ' + r.taskGroupSize + ' tasks');
        render();
      },
      {
        confirm: (sealed ? '' : 'Seal this group and ') + (sealed ? 'Cancel' : 'cancel') + ' its ' + unresolved + ' unresolved tasks?',
        disabled: unresolved ? null : 'no unresolved tasks',
      },
    ),
    actionNotes(key),
  );
}

async function groupView(taskGroupId) {
  var out = [];
  var members;
  try {
    members = await groupMembers(taskGroupId);
  } catch (e) {
    return [section('Task group ' + taskGroupId, await attempt(() => Promise.reject(e)))];
  }
  var tasks = members.tasks;
  var note = members.truncated ? el('p', { class: 'muted', text: 'showing the first ' + tasks.length + ' tasks' }) : null;
  var info = await api('GET', '/task-group/' + enc(taskGroupId)).catch(function () {
    return null;
  });
  out.push(section('Task group ' + taskGroupId, progress(tasks), note, groupActions(taskGroupId, info, tasks)));
  if (tasks.length && tasks.length <= GRAPH_MAX_NODES) out.push(section('Dependencies', graph(tasks)));
  else if (tasks.length) out.push(section('Dependencies', el('p', { class: 'muted', text: 'too many tasks to draw (' + tasks.length + ')' })));
  out.push(
    section(
      'Tasks',
      grid(
        ['task', 'name', 'state', 'runs', 'task queue', 'depends on', 'deadline'],
        layers(tasks)
          .cols.flat()
          .map(function (t) {
            return el(
              'tr',
              { 'data-member': t.status.taskId },
              el('td', null, taskLink(t.status.taskId)),
              el('td', { text: t.task.metadata.name }),
              stateCell(t.status.state),
              el('td', { class: 'num', text: t.status.runs.length }),
              el('td', { text: t.status.taskQueueId }),
              el('td', { class: 'num', text: (t.task.dependencies || []).length }),
              timeCell(t.status.deadline),
            );
          }),
        'no tasks in this group',
      ),
    ),
  );
  return out;
}
