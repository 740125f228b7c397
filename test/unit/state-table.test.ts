/**
 * The README's state machine table ("Concepts") says what each transition does in each state;
 * this runs every cell against shared/lifecycle/transitions.ts so the two cannot drift apart. Each
 * row is named for the record its transition returns (shared/lifecycle/records.ts): the names in the
 * table and the record names are the same list, and every cell's result carries its row's record.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as T from '../../shared/lifecycle/transitions';
import { TaskRecord, isResolved, taskState } from '../../shared/tasks/model';
import { TRANSITION_NAMES } from '../../shared/lifecycle/records';
import { taskDefinition } from '../helpers/task-fixture';

const NOW = new Date('2030-01-01T00:00:00.000Z');
const later = (s: number) => new Date(NOW.getTime() + s * 1000);
const W = { workerGroup: 'wg', workerId: 'w1' };
const CLAIM_S = 1200;

function created(dependencies: string[]): TaskRecord {
  const definition = taskDefinition(NOW, { dependencies });
  return T.create({ taskId: 'T1', definition, hintId: 'h0' }, NOW).next;
}
const next = (r: T.Result) => (r as T.Step).next;
const pending = () => created([]);
const running = () => next(T.claim(pending(), { runId: 0, worker: W, via: null, claimTimeoutS: CLAIM_S }, NOW));
const completed = () => next(T.report(running(), { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, NOW));
const FIXTURES: Record<string, () => TaskRecord> = { unscheduled: () => created(['D1']), pending, running, resolved: completed };

/** Each row's transition, with the inputs a typical call has. */
const lastRunId = (t: TaskRecord) => Math.max(0, t.runs.length - 1);
const ROWS: [RegExp, (t: TaskRecord) => T.Result][] = [
  [/^schedule/, (t) => T.scheduleTask(t, { hintId: 'hs' }, NOW)],
  [/^claim expired/, (t) => T.expireClaim(t, { runId: lastRunId(t), takenUntil: t.runs[lastRunId(t)]?.takenUntil ?? '', hintId: 'hx' }, later(CLAIM_S))],
  [/^claim/, (t) => T.claim(t, { runId: lastRunId(t), worker: W, via: null, claimTimeoutS: CLAIM_S }, later(5))],
  [/^reclaim/, (t) => T.reclaim(t, { runId: lastRunId(t), claimTimeoutS: CLAIM_S }, later(60))],
  [/^report/, (t) => T.report(t, { runId: lastRunId(t), outcome: { state: 'completed' }, hintId: 'hr' }, later(5))],
  [/^deadline/, (t) => T.deadline(t, { deadline: t.definition.deadline }, later(3600))],
  [/^cancel/, (t) => T.cancel(t, {}, NOW)],
  [/^rerun/, (t) => T.rerun(t, { hintId: 'hr' }, NOW)],
  [/^rehint/, (t) => T.rehint(t, { runId: lastRunId(t), staleHintId: t.runs[lastRunId(t)]?.hintId, hintId: 'hh' }, NOW)],
  [/^worker gone/, (t) => T.workerGone(t, { runId: lastRunId(t), worker: W, hintId: 'hg' }, later(5))],
  [/^suspend/, (t) => T.suspend(t, { runId: lastRunId(t), continuation: '{}', resumeAt: later(5).toJSON(), hintId: 'hz' }, later(5))],
  [/^change priority/, (t) => T.changePriority(t, { priority: 'high', hintId: 'hp' }, NOW)],
  [/^safety net/, (t) => T.safetyNet(t)],
];

/** The record names a row's label gives: before its parentheses, split at ` / `, spaces as `-`. */
const namesOf = (label: string) =>
  label
    .split('(')[0]
    .trim()
    .split(' / ')
    .map((n) => n.trim().replace(/ /g, '-'));

/** What a cell's alternative (e.g. "409", "=", "pending (retry run)", "resolved") of row `name` says of a result. */
function matches(alternative: string, name: string, task: TaskRecord, r: T.Result): boolean {
  const word = alternative.trim().split(/\s+/)[0];
  if (word === '409' || word === '404') return 'refused' in r && (r.refused === 'not-found' ? '404' : '409') === word;
  if (!('next' in r)) return false;
  if (word === '=') return r.next === task && r.record.name === 'repeat' && r.record.of === name;
  if (r.next === task || r.record.name !== name) return false;
  return word === 'resolved' ? isResolved(taskState(r.next)) : taskState(r.next) === word;
}

function readmeTable(): string[][] {
  const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
  const start = readme.indexOf('| transition \\ state |');
  if (start < 0) throw new Error('README has no state machine table');
  const lines = readme.slice(start).split('\n');
  const table = lines.slice(
    0,
    lines.findIndex((l) => !l.trim().startsWith('|')),
  );
  return table.map((l) =>
    l
      .trim()
      .replace(/^\||\|$/g, '')
      .split('|')
      .map((c) => c.trim().replace(/`/g, '')),
  );
}

test('the README table has the columns the fixtures cover', () => {
  const [header] = readmeTable();
  expect(header.slice(1)).toEqual(['unscheduled', 'pending', 'running', 'completed / failed / exception']);
});

const body = readmeTable().slice(2);
const checked = body.filter(([label]) => ROWS.some(([re]) => re.test(label)));

test('every transition row of the README table is checked', () => {
  expect(checked.map(([label]) => label.split(' ')[0])).toEqual([
    'schedule',
    'claim',
    'reclaim',
    'report',
    'claim',
    'deadline',
    'cancel',
    'rerun',
    'rehint',
    'worker',
    'suspend',
    'change',
    'safety',
  ]);
});

test('the table names every transition record, and only those', () => {
  expect(body.flatMap(([label]) => namesOf(label))).toEqual([...TRANSITION_NAMES]);
});

describe.each(checked)('%s', (label, ...cells) => {
  const run = ROWS.find(([re]) => re.test(label))![1];
  test.each(Object.keys(FIXTURES).map((state, i) => [state, cells[i]]))('in state %s: %s', (state, cell) => {
    const task = FIXTURES[state]();
    const result = run(task);
    const alternatives = cell.split(/, or | or | \/ /);
    const [name] = namesOf(label);
    expect({ cell, ok: alternatives.some((a) => matches(a, name, task, result)) }).toEqual({ cell, ok: true });
  });
});
