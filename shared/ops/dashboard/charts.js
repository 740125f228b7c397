/*
 * The dashboard's charts (loaded before dashboard.js, whose helpers they use when called): per task
 * queue or for all of them, over the last hour or day, from the per-minute rollups
 * (`/minutes`, `/task-queues/<id>/minutes`; shared/ops/rollups.ts), drawn with uPlot
 * (vendor file, served as /api/dashboard/uPlot.iife.min.js).
 */
/* global api, el, enc, uPlot, duration */
/* exported chartsSection */
'use strict';
var CHART_WINDOWS = { 1: 'last hour', 24: 'last 24 h' };
/** The window the operator picked, kept for the session. */
var CHART_HOURS_KEY = 'tcq-dashboard-chart-hours';
/** The day's charts show 10-minute bins: 144 points read better than 1440. */
var DAY_BIN_MINUTES = 10;
var COLORS = { pending: '#b54708', running: '#2457c5', completed: '#067647', failed: '#b42318', exception: '#6941c6', p50: '#2457c5', p95: '#b54708' };

function chartHours() {
  var h = sessionStorage.getItem(CHART_HOURS_KEY);
  return h === '24' ? '24' : '1';
}

/** A line series; `fill` shades the area under it. */
function line(label, color, fill) {
  return { label: label, stroke: color, width: 2, fill: fill ? color + '22' : undefined, points: { show: false } };
}

function timeAxis() {
  return { stroke: '#667085', grid: { stroke: '#eef0f3' }, ticks: { stroke: '#e4e7ec' } };
}

function valueAxis(format) {
  var a = { stroke: '#667085', grid: { stroke: '#eef0f3' }, ticks: { stroke: '#e4e7ec' }, size: 60 };
  // Counts step by whole numbers.
  if (!format) a.incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000, 500000];
  if (format)
    a.values = function (u, splits) {
      return splits.map(format);
    };
  return a;
}

/** One uPlot chart in a titled box; `id` names it for tests. */
function chartBox(id, title, width, opts, data) {
  var box = el('div', { class: 'chart', 'data-chart': id }, el('h3', { text: title }));
  var plot = el('div', { class: 'plot' });
  box.appendChild(plot);
  var all = Object.assign({ width: width, height: 210, legend: { live: true }, cursor: { drag: { x: false, y: false } } }, opts);
  // uPlot measures fonts and sizes in the page: build it once the box is in the document.
  requestAnimationFrame(function () {
    new uPlot(all, data, plot);
    box.setAttribute('data-drawn', 'true');
  });
  return box;
}

/**
 * The charts of one task queue (or all, with `taskQueueId` undefined): pending and running at each
 * minute's end, the wait from scheduled to started (p50, p95), and resolutions per minute by state.
 */
async function chartsSection(taskQueueId) {
  var hours = chartHours();
  var path = taskQueueId ? '/task-queues/' + enc(taskQueueId) + '/minutes' : '/minutes';
  var r = await api('GET', path + '?hours=' + hours);
  var binned = hours === '24';
  var m = binned ? bins(r.minutes, DAY_BIN_MINUTES) : r.minutes;
  var xs = m.map(function (x) {
    return Date.parse(x.minute) / 1000;
  });
  var pick = function (k) {
    return m.map(function (x) {
      return x[k];
    });
  };
  var secs = function (k) {
    return m.map(function (x) {
      return x[k] === null ? null : x[k] / 1000;
    });
  };
  var toggle = el('span', { class: 'chart-windows' });
  Object.keys(CHART_WINDOWS).forEach(function (h) {
    toggle.appendChild(
      el('button', {
        type: 'button',
        class: h === hours ? 'active' : '',
        'data-hours': h,
        text: CHART_WINDOWS[h],
        onclick: function () {
          sessionStorage.setItem(CHART_HOURS_KEY, h);
          window.dispatchEvent(new Event('hashchange'));
        },
      }),
    );
  });
  var total = function (k) {
    return r.minutes.reduce(function (a, x) {
      return a + x[k];
    }, 0);
  };
  var summary = el(
    'span',
    { class: 'muted chart-summary' },
    total('started') + ' started, ' + total('completed') + ' completed, ' + total('failed') + ' failed, ' + total('exception') + ' exception',
  );
  var width = Math.max(320, Math.floor((Math.min(window.innerWidth, 1400) - 120) / 3));
  var row = el(
    'div',
    { class: 'charts' },
    chartBox(
      'depth',
      'Pending and running',
      width,
      {
        series: [{}, line('pending', COLORS.pending, true), line('running', COLORS.running, true)],
        axes: [timeAxis(), valueAxis()],
        scales: { y: { range: countRange } },
      },
      [xs, pick('pending'), pick('running')],
    ),
    chartBox(
      'wait',
      binned ? 'Wait, scheduled → started (worst minute of 10)' : 'Wait, scheduled → started',
      width,
      {
        series: [
          {},
          Object.assign(line('p50', COLORS.p50), { value: fmtSecs, points: { show: sparsePoints, size: 5 } }),
          Object.assign(line('p95', COLORS.p95), { value: fmtSecs, points: { show: sparsePoints, size: 5 } }),
        ],
        axes: [timeAxis(), valueAxis(fmtAxisSecs)],
        scales: { y: { range: countRange } },
      },
      [xs, secs('waitP50Ms'), secs('waitP95Ms')],
    ),
    chartBox(
      'resolutions',
      binned ? 'Resolved per minute (10-minute average)' : 'Resolved per minute',
      width,
      {
        series: [{}, line('completed', COLORS.completed, true), line('failed', COLORS.failed), line('exception', COLORS.exception)],
        axes: [timeAxis(), valueAxis()],
        scales: { y: { range: countRange } },
      },
      [xs, pick('completed'), pick('failed'), pick('exception')],
    ),
  );
  return el(
    'section',
    { class: 'charts-section' },
    el('h2', null, (taskQueueId ? 'Activity of ' + taskQueueId : 'Activity, all task queues') + ' ', toggle, ' ', summary),
    row,
  );
}

/**
 * Minutes merged `n` at a time: pending and running at the bin's end, resolutions per minute on
 * average, and the highest p50 and p95 wait of the bin (a bin shows its worst minute).
 */
function bins(minutes, n) {
  var out = [];
  for (var i = 0; i < minutes.length; i += n) {
    var part = minutes.slice(i, i + n);
    var lastOf = part[part.length - 1];
    var avg = function (k) {
      return (
        Math.round(
          (10 *
            part.reduce(function (a, x) {
              return a + x[k];
            }, 0)) /
            part.length,
        ) / 10
      );
    };
    var max = function (k) {
      var vals = part
        .map(function (x) {
          return x[k];
        })
        .filter(function (v) {
          return v !== null;
        });
      return vals.length ? Math.max.apply(null, vals) : null;
    };
    out.push({
      minute: lastOf.minute,
      pending: lastOf.pending,
      running: lastOf.running,
      completed: avg('completed'),
      failed: avg('failed'),
      exception: avg('exception'),
      started: part.reduce(function (a, x) {
        return a + x.started;
      }, 0),
      waitP50Ms: max('waitP50Ms'),
      waitP95Ms: max('waitP95Ms'),
    });
  }
  return out;
}

/** Counts from 0, with some headroom, and never a scale of fractions for a quiet minute. */
function countRange(u, min, max) {
  return [0, Math.max(4, Math.ceil((max || 0) * 1.1))];
}

/** Points only where a series has few values (else isolated minutes would not show at all). */
function sparsePoints(u, seriesIdx) {
  return (
    u.data[seriesIdx].filter(function (v) {
      return v !== null;
    }).length < 30
  );
}

function fmtSecs(u, v) {
  return v === null || v === undefined ? '–' : duration(v * 1000);
}
function fmtAxisSecs(v) {
  return v === null ? '' : v === 0 ? '0' : duration(v * 1000);
}
