/**
 * The task state machine (shared/lifecycle/transitions.ts), without storage: each transition's next
 * state, runs, reasons and retriesLeft, the effects it owes (and in which phase), and its refusals.
 */
import * as T from '../../shared/lifecycle/transitions';
import type { Effect } from '../../shared/lifecycle/effects';
import type { Replay, TransitionName } from '../../shared/lifecycle/records';
import type { TaskDefinition, TaskRecord } from '../../shared/tasks/model';
import { taskState } from '../../shared/tasks/model';
import { taskDefinition } from '../helpers/task-fixture';

const NOW = new Date('2030-01-01T00:00:00.000Z');
const later = (s: number) => new Date(NOW.getTime() + s * 1000);
const DEADLINE = later(3600).toJSON();
const W = { workerGroup: 'wg', workerId: 'w1' };
const CLAIM_S = 1200;
const ref = (id: string) => ({ messageId: id, popReceipt: `pr-${id}` });

const definition = (over: Partial<TaskDefinition> = {}) => taskDefinition(NOW, { taskGroupId: 'group', ...over });

function step(r: T.Result): T.Step {
  if (!('next' in r)) throw new Error(`expected a step, got ${JSON.stringify(r)}`);
  return r;
}
/** The table's `=`: the task unchanged, owing `effects` again. */
const repeat = (of: TransitionName, next: TaskRecord, effects: Effect[] = [], replay?: Replay) => ({
  record: { name: 'repeat', of, ...(replay ? { replay } : {}) },
  next,
  effects,
});
const kinds = (effects: Effect[]) => effects.map((e) => `${e.phase}:${e.kind}`);
const summary = (t: TaskRecord) => t.runs.map((r) => `${r.state}${r.reasonResolved ? `/${r.reasonResolved}` : ''}`);

/** A created task without dependencies: run 0 pending. */
function pendingTask(over: Partial<TaskDefinition> = {}): TaskRecord {
  const t = T.create({ taskId: 'T1', definition: definition(over), hintId: 'h0' }, NOW).next;
  t.deadlineTrigger = ref('deadline'); // the executor stores the put trigger's ref here
  return t;
}
/** A task whose last run is running (claimed by W), with its claim-expiry trigger stored. */
function runningTask(over: Partial<TaskDefinition> = {}, base = pendingTask(over)): TaskRecord {
  const t = step(T.claim(base, { runId: base.runs.length - 1, worker: W, via: null, claimTimeoutS: CLAIM_S }, NOW)).next;
  t.runs[t.runs.length - 1].claimTrigger = ref(`claim-${t.runs.length - 1}`);
  return t;
}
const report = (t: TaskRecord, outcome: T.Outcome, runId = t.runs.length - 1, now = NOW) => T.report(t, { runId, outcome, hintId: `h${runId + 1}` }, now);

describe('create', () => {
  test('without dependencies: run 0 pending, hint and deadline trigger before the row, pollers woken after', () => {
    const s = T.create({ taskId: 'T1', definition: definition(), hintId: 'h0' }, NOW);
    expect(s.record).toEqual({ name: 'create', scheduled: true });
    expect(taskState(s.next)).toBe('pending');
    expect(s.next.runs).toEqual([{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: NOW.toJSON(), hintId: 'h0' }]);
    expect(s.next.retriesLeft).toBe(2);
    expect(kinds(s.effects)).toEqual(['before:record-expiry', 'before:add-group-member', 'before:put-deadline-trigger', 'before:put-hint', 'after:wake']);
    expect(s.effects).toContainEqual(
      expect.objectContaining({ kind: 'put-hint', taskId: 'T1', runId: 0, hintId: 'h0', priority: 'lowest', taskQueueId: 'prov/wt' }),
    );
  });

  test('with dependencies: unscheduled, no hint', () => {
    const s = T.create({ taskId: 'T1', definition: definition({ dependencies: ['D1'] }), hintId: 'h0' }, NOW);
    expect(s.record).toEqual({ name: 'create', scheduled: false });
    expect(taskState(s.next)).toBe('unscheduled');
    expect(kinds(s.effects)).toEqual(['before:record-expiry', 'before:add-group-member', 'before:put-deadline-trigger']);
  });
});

describe('schedule', () => {
  const unscheduled = () => T.create({ taskId: 'T1', definition: definition({ dependencies: ['D1'] }), hintId: 'h0' }, NOW).next;

  test('adds pending run 0 with its hint', () => {
    const s = T.schedule(unscheduled(), { hintId: 'hx' }, NOW);
    expect(s.record).toEqual({ name: 'schedule', runId: 0 });
    expect(s.next.runs).toEqual([expect.objectContaining({ runId: 0, state: 'pending', reasonCreated: 'scheduled', hintId: 'hx' })]);
    expect(kinds(s.effects)).toEqual(['before:put-hint', 'after:wake']);
  });

  test('a scheduled task is unchanged; so is one past its deadline', () => {
    const t = pendingTask();
    expect(T.schedule(t, { hintId: 'hx' }, NOW)).toEqual(repeat('schedule', t));
    const u = unscheduled();
    expect(T.schedule(u, { hintId: 'hx' }, later(3600)).next).toBe(u);
  });

  test('scheduleTask refuses after the deadline', () => {
    expect(T.scheduleTask(unscheduled(), { hintId: 'hx' }, later(3601))).toEqual({ refused: 'conflict', message: 'task T1 has passed its deadline' });
  });
});

describe('claim', () => {
  const via = (hintId: string, replayWithinS = 150, messageId = 'm0') => ({ hintId, messageId, replayWithinS });

  test('through the scheduling hint: running, takenUntil, claim trigger owed before the write', () => {
    const s = step(T.claim(pendingTask(), { runId: 0, worker: W, via: via('h0'), claimTimeoutS: CLAIM_S }, NOW));
    const takenUntil = later(CLAIM_S).toJSON();
    expect(s.record).toEqual({ name: 'claim', runId: 0 });
    expect(s.next.runs[0]).toEqual(expect.objectContaining({ state: 'running', ...W, takenUntil, started: NOW.toJSON() }));
    expect(s.next.takenUntil).toBe(takenUntil);
    expect(s.effects).toEqual([{ phase: 'before', kind: 'put-claim-trigger', taskId: 'T1', runId: 0, takenUntil }]);
  });

  test('a stale hint (other hintId) is refused', () => {
    expect(T.claim(pendingTask(), { runId: 0, worker: W, via: via('old'), claimTimeoutS: CLAIM_S }, NOW)).toEqual({
      refused: 'conflict',
      message: 'run 0 is pending',
    });
  });

  test('through a hint, the run records the message that claimed it', () => {
    expect(step(T.claim(pendingTask(), { runId: 0, worker: W, via: via('h0', 150, 'm7'), claimTimeoutS: CLAIM_S }, NOW)).next.runs[0].claimedWith).toBe('m7');
  });

  test('replay: the same worker through the same hint message soon after gets the claim back unchanged', () => {
    const t = runningTask();
    Object.assign(t.runs[0], { hintId: 'h0', claimedWith: 'm0' });
    const input = { runId: 0, worker: W, via: via('h0'), claimTimeoutS: CLAIM_S };
    // Its events go again (the first answer, and its events, may have been lost).
    expect(T.claim(t, input, later(10))).toEqual(repeat('claim', t, [], { kind: 'run', runId: 0 }));
    // Another copy of the hint (a queue put repeated after its answer was lost) is another message.
    expect(T.claim(t, { ...input, via: via('h0', 150, 'm1') }, later(10))).toEqual({ refused: 'conflict', message: 'run 0 is running' });
    expect(T.claim(t, input, later(151))).toEqual({ refused: 'conflict', message: 'run 0 is running' });
    expect(T.claim(t, { ...input, worker: { ...W, workerId: 'w2' } }, later(10))).toEqual({ refused: 'conflict', message: 'run 0 is running' });
  });

  test('claimTask repeated by the same worker is idempotent; by another is refused', () => {
    const t = runningTask();
    expect(T.claim(t, { runId: 0, worker: W, via: null, claimTimeoutS: CLAIM_S }, later(500))).toEqual(repeat('claim', t, [], { kind: 'run', runId: 0 }));
    expect(T.claim(t, { runId: 0, worker: { ...W, workerId: 'w2' }, via: null, claimTimeoutS: CLAIM_S }, NOW)).toEqual({
      refused: 'conflict',
      message: 'run 0 is running',
    });
  });

  test('refusals: deadline passed, missing run, overtaken run', () => {
    const input = { runId: 0, worker: W, via: null, claimTimeoutS: CLAIM_S };
    expect(T.claim(pendingTask(), input, later(3600))).toEqual({ refused: 'conflict', message: 'the task deadline has passed' });
    expect(T.claim(pendingTask(), { ...input, runId: 3 }, NOW)).toEqual({ refused: 'conflict', message: 'run 3 does not exist' });
    const retried = step(report(runningTask(), { state: 'exception', reason: 'worker-shutdown' })).next;
    expect(T.claim(retried, input, NOW)).toEqual({ refused: 'conflict', message: 'run 0 is not the latest run' });
  });
});

describe('reclaim', () => {
  test('a later takenUntil; the new trigger before the write, the old one dropped after', () => {
    const t = runningTask();
    const s = step(T.reclaim(t, { runId: 0, claimTimeoutS: CLAIM_S }, later(60)));
    const takenUntil = later(60 + CLAIM_S).toJSON();
    expect(s.record).toEqual({ name: 'reclaim', runId: 0 });
    expect(s.next.runs[0].takenUntil).toBe(takenUntil);
    expect(s.next.takenUntil).toBe(takenUntil);
    expect(s.effects).toEqual([
      // The run's trigger is a message (it guards the run's events): so is the new one.
      { phase: 'before', kind: 'put-claim-trigger', taskId: 'T1', runId: 0, takenUntil, guard: true },
      { phase: 'after', kind: 'drop-trigger', trigger: 'claim', ref: ref('claim-0') },
    ]);
  });

  test('the same takenUntil again changes nothing', () => {
    const t = runningTask();
    expect(T.reclaim(t, { runId: 0, claimTimeoutS: CLAIM_S }, NOW)).toEqual(repeat('reclaim', t));
  });

  test('refusals: missing run (404), deadline, not running', () => {
    expect(T.reclaim(runningTask(), { runId: 1, claimTimeoutS: CLAIM_S }, NOW)).toEqual({ refused: 'not-found', message: 'run 1 of task T1 not found' });
    expect(T.reclaim(runningTask(), { runId: 0, claimTimeoutS: CLAIM_S }, later(3600))).toEqual({
      refused: 'conflict',
      message: 'task T1 has passed its deadline',
    });
    expect(T.reclaim(pendingTask(), { runId: 0, claimTimeoutS: CLAIM_S }, NOW)).toEqual({
      refused: 'conflict',
      message: 'run 0 of task T1 is not running (it was resolved, canceled or overtaken)',
    });
  });
});

describe('report', () => {
  const finals: [T.Outcome, string][] = [
    [{ state: 'completed' }, 'completed/completed'],
    [{ state: 'failed' }, 'failed/failed'],
    ...(['malformed-payload', 'resource-unavailable', 'internal-error'] as const).map((reason): [T.Outcome, string] => [
      { state: 'exception', reason },
      `exception/${reason}`,
    ]),
  ];
  test.each(finals)('%j resolves the task for good: triggers dropped, uploads committed', (outcome, summaryLine) => {
    const s = step(report(runningTask(), outcome));
    expect(s.record).toEqual({ name: 'report', runId: 0 });
    expect(summary(s.next)).toEqual([summaryLine]);
    expect(s.next.takenUntil).toBe('');
    expect(s.next.retriesLeft).toBe(2);
    expect(kinds(s.effects)).toEqual(['after:drop-trigger', 'after:close-group', 'after:drop-trigger', 'after:commit-uploads']);
    expect(s.effects.slice(0, 3)).toEqual([
      { phase: 'after', kind: 'drop-trigger', trigger: 'claim', ref: ref('claim-0') },
      { phase: 'after', kind: 'close-group', taskGroupId: 'group', schedulerId: '-', taskId: 'T1', runId: 0 },
      { phase: 'after', kind: 'drop-trigger', trigger: 'deadline', ref: ref('deadline') },
    ]);
  });

  test.each([
    ['worker-shutdown', 'retry'],
    ['intermittent-task', 'task-retry'],
  ] as const)('exception %s retries while retries are left (new run %s)', (reason, reasonCreated) => {
    const s = step(report(runningTask(), { state: 'exception', reason }));
    expect(s.record).toEqual({ name: 'report', runId: 0, retry: 1 });
    expect(summary(s.next)).toEqual([`exception/${reason}`, 'pending']);
    expect(s.next.runs[1]).toEqual({ runId: 1, state: 'pending', reasonCreated, scheduled: NOW.toJSON(), hintId: 'h1' });
    expect(s.next.retriesLeft).toBe(1);
    expect(taskState(s.next)).toBe('pending');
    // The retry's hint before the write; the deadline trigger stays (the task is unresolved).
    expect(kinds(s.effects)).toEqual(['before:put-hint', 'after:wake', 'after:drop-trigger', 'after:commit-uploads']);
    expect(s.effects[2]).toEqual(expect.objectContaining({ trigger: 'claim' }));
  });

  test('no retries left: the retrying reason resolves the task', () => {
    const s = step(report(runningTask({ retries: 0 }), { state: 'exception', reason: 'worker-shutdown' }));
    expect(summary(s.next)).toEqual(['exception/worker-shutdown']);
    expect(s.next.retriesLeft).toBe(0);
  });

  test('at MAX_RUNS no retry run is added even with retries left', () => {
    const t = runningTask();
    t.runs = Array.from({ length: T.MAX_RUNS }, (_, i) => ({ ...t.runs[0], runId: i }));
    t.retriesLeft = 5;
    const s = step(report(t, { state: 'exception', reason: 'worker-shutdown' }));
    expect(s.next.runs).toHaveLength(T.MAX_RUNS);
    expect(taskState(s.next)).toBe('exception');
  });

  test('a task with dependents puts the safety net first, propagates, then deletes the net', () => {
    const t = runningTask();
    t.hasDependents = true;
    const s = step(report(t, { state: 'completed' }));
    expect(kinds(s.effects)).toEqual([
      'before:put-safety-net',
      'after:drop-trigger',
      'after:close-group',
      'after:drop-trigger',
      'after:propagate',
      'after:commit-uploads',
      'after:delete-safety-net',
    ]);
  });

  test('the same report again is unchanged but still owes propagation and the upload commit', () => {
    const t = runningTask();
    t.hasDependents = true;
    const done = step(report(t, { state: 'completed' })).next;
    const again = step(report(done, { state: 'completed' }, 0, later(5)));
    expect(again.next).toBe(done);
    // The group's bookkeeping too: a crash may have cut it short (repeating it is harmless).
    expect(kinds(again.effects)).toEqual(['after:propagate', 'after:close-group', 'after:commit-uploads']);
    done.dependentsNotified = 0;
    expect(kinds(step(report(done, { state: 'completed' }, 0)).effects)).toEqual(['after:close-group', 'after:commit-uploads']);
  });

  test('a retrying report repeated after its retry was claimed is still accepted, and leaves the task alone', () => {
    const retried = step(report(runningTask(), { state: 'exception', reason: 'worker-shutdown' })).next;
    const claimed = runningTask({}, retried);
    const again = step(report(claimed, { state: 'exception', reason: 'worker-shutdown' }, 0));
    expect(again.next).toBe(claimed);
    expect(taskState(again.next)).toBe('running');
  });

  test('refusals: another outcome, a pending run, an overtaken run, a missing run', () => {
    const done = step(report(runningTask(), { state: 'completed' })).next;
    expect(report(done, { state: 'failed' }, 0)).toEqual({
      refused: 'conflict',
      message: 'run 0 of task T1 is completed (completed); cannot resolve it as failed',
    });
    expect(report(pendingTask(), { state: 'completed' }, 0)).toEqual({
      refused: 'conflict',
      message: 'run 0 of task T1 is pending; cannot resolve it as completed',
    });
    const rerun = step(T.rerun(done, { hintId: 'hr' }, NOW)).next;
    expect(report(rerun, { state: 'completed' }, 0)).toEqual({
      refused: 'conflict',
      message: 'run 0 of task T1 is completed (completed) and not the latest run; cannot resolve it as completed',
    });
    expect(report(done, { state: 'completed' }, 4)).toEqual({ refused: 'not-found', message: 'run 4 of task T1 not found' });
  });
});

describe('claim expiry', () => {
  const input = (t: TaskRecord) => ({ runId: 0, takenUntil: t.runs[0].takenUntil!, hintId: 'h1' });

  test('retries with a new run (reason retry) while retries are left', () => {
    const t = runningTask();
    const s = step(T.expireClaim(t, input(t), later(CLAIM_S)));
    expect(s.record).toEqual({ name: 'claim-expired', runId: 0, retry: 1 });
    expect(summary(s.next)).toEqual(['exception/claim-expired', 'pending']);
    expect(s.next.runs[1].reasonCreated).toBe('retry');
    expect(s.next.retriesLeft).toBe(1);
    // The run keeps its takenUntil, so a re-delivered trigger recognises its own work.
    expect(s.next.runs[0].takenUntil).toBe(t.runs[0].takenUntil);
    expect(kinds(s.effects)).toEqual(['before:put-hint', 'after:log', 'after:wake', 'after:commit-uploads']);
  });

  test('without retries it resolves the task and drops the deadline trigger', () => {
    const t = runningTask({ retries: 0 });
    const s = step(T.expireClaim(t, input(t), later(CLAIM_S)));
    expect(s.record).toEqual({ name: 'claim-expired', runId: 0 });
    expect(summary(s.next)).toEqual(['exception/claim-expired']);
    expect(kinds(s.effects)).toEqual(['after:log', 'after:close-group', 'after:drop-trigger', 'after:commit-uploads']);
  });

  test('early (clock skew): later; stale takenUntil or after the deadline: nothing', () => {
    const t = runningTask();
    expect(T.expireClaim(t, input(t), later(CLAIM_S - 30))).toEqual({ retryAfterS: 30 });
    expect(T.expireClaim(t, { ...input(t), takenUntil: NOW.toJSON() }, later(CLAIM_S))).toEqual(repeat('claim-expired', t));
    const short = runningTask({ deadline: later(60).toJSON() });
    expect(T.expireClaim(short, input(short), later(CLAIM_S))).toEqual(repeat('claim-expired', short));
  });

  test('a re-delivered trigger after its own write owes only the propagation and the group bookkeeping', () => {
    const t = runningTask({ retries: 0 });
    t.hasDependents = true;
    const expired = step(T.expireClaim(t, input(t), later(CLAIM_S))).next;
    expect(kinds(step(T.expireClaim(expired, input(t), later(CLAIM_S + 5))).effects)).toEqual(['after:propagate', 'after:close-group']);
  });

  test("found after the run's end, a message delivers the run's events again; an expiry-index row (it guards none) does not", () => {
    const done = step(report(runningTask(), { state: 'completed' })).next;
    expect(T.expireClaim(done, input(done), later(CLAIM_S))).toEqual(repeat('claim-expired', done, [], { kind: 'run', runId: 0 }));
    expect(T.expireClaim(done, { ...input(done), indexed: true }, later(CLAIM_S))).toEqual(repeat('claim-expired', done));
  });

  test("an expiry-index row resolves a lapsed claim as a message does; a message of the same claim (an early row's twin) it drops", () => {
    const t = runningTask({ retries: 0 });
    const byRow = step(T.expireClaim(t, { ...input(t), indexed: true }, later(CLAIM_S)));
    const byMessage = step(T.expireClaim(t, input(t), later(CLAIM_S)));
    expect(byRow.next).toEqual(byMessage.next);
    expect(summary(byRow.next)).toEqual(['exception/claim-expired']);
    expect(byRow.effects.filter((e) => e.kind !== 'drop-trigger' || e.trigger !== 'claim')).toEqual(byMessage.effects);
    expect(byRow.effects).toContainEqual({ phase: 'after', kind: 'drop-trigger', trigger: 'claim', ref: ref('claim-0') });
    // The run's own trigger a row: nothing to drop (the sweep removes the row that fired).
    const rowRun = runningTask({ retries: 0 });
    rowRun.runs[0].claimTrigger = { partitionKey: 't~2030-01-01~3', rowKey: `${input(rowRun).takenUntil}~claim~T1` };
    expect(
      step(T.expireClaim(rowRun, { ...input(rowRun), indexed: true }, later(CLAIM_S))).effects.some((e) => e.kind === 'drop-trigger' && e.trigger === 'claim'),
    ).toBe(false);
  });
});

describe('claim-expiry triggers kept in the expiry index', () => {
  const row = { partitionKey: '2030-01-01~3', rowKey: '2030-01-01T00:20:00.000Z~claim~T1' };

  test('a reclaim records a new row (not a message) and drops the old row', () => {
    const t = runningTask();
    t.runs[0].claimTrigger = row;
    const s = step(T.reclaim(t, { runId: 0, claimTimeoutS: CLAIM_S }, later(60)));
    expect(s.effects).toEqual([
      {
        phase: 'before',
        kind: 'put-claim-trigger',
        taskId: 'T1',
        runId: 0,
        takenUntil: later(60 + CLAIM_S).toJSON(),
      },
      { phase: 'after', kind: 'drop-trigger', trigger: 'claim', ref: row },
    ]);
  });

  test("the run's end drops the row", () => {
    const t = runningTask();
    t.runs[0].claimTrigger = row;
    expect(step(report(t, { state: 'completed' })).effects).toContainEqual({ phase: 'after', kind: 'drop-trigger', trigger: 'claim', ref: row });
  });
});

describe('deadline', () => {
  const at = later(3600);

  test('resolves pending and running runs as deadline-exceeded, dropping claim triggers and committing uploads', () => {
    const t = runningTask();
    const s = step(T.deadline(t, { deadline: DEADLINE }, at));
    expect(s.record).toEqual({ name: 'deadline', ended: [{ runId: 0, from: 'running' }] });
    expect(summary(s.next)).toEqual(['exception/deadline-exceeded']);
    expect(kinds(s.effects)).toEqual(['after:log', 'after:drop-trigger', 'after:close-group', 'after:commit-uploads']);
    const p = step(T.deadline(pendingTask(), { deadline: DEADLINE }, at));
    expect(p.record).toEqual({ name: 'deadline', ended: [{ runId: 0, from: 'pending' }] });
    expect(summary(p.next)).toEqual(['exception/deadline-exceeded']);
  });

  test('an unscheduled task gets an exception run', () => {
    const u = T.create({ taskId: 'T1', definition: definition({ dependencies: ['D1'] }), hintId: 'h0' }, NOW).next;
    const s = step(T.deadline(u, { deadline: DEADLINE }, at));
    expect(s.record).toEqual({ name: 'deadline', ended: [{ runId: 0, from: null }] });
    expect(s.next.runs).toEqual([
      { runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'deadline-exceeded', scheduled: at.toJSON(), resolved: at.toJSON() },
    ]);
  });

  test('early: later; another deadline: nothing; resolved: only owed propagation and group bookkeeping', () => {
    const t = runningTask();
    expect(T.deadline(t, { deadline: DEADLINE }, later(3590))).toEqual({ retryAfterS: 10 });
    expect(T.deadline(t, { deadline: NOW.toJSON() }, at)).toEqual(repeat('deadline', t));
    const done = step(report(t, { state: 'completed' })).next;
    // A deadline trigger outlives a resolution only when the group's bookkeeping did not finish.
    expect(kinds(step(T.deadline(done, { deadline: DEADLINE }, at)).effects)).toEqual(['after:close-group']);
    done.hasDependents = true;
    expect(kinds(step(T.deadline(done, { deadline: DEADLINE }, at)).effects)).toEqual(['after:propagate', 'after:close-group']);
  });
});

describe('cancel', () => {
  test('a running run becomes exception/canceled; triggers dropped, uploads committed', () => {
    const s = step(T.cancel(runningTask(), {}, NOW));
    expect(s.record).toEqual({ name: 'cancel', ended: { runId: 0, from: 'running' } });
    expect(summary(s.next)).toEqual(['exception/canceled']);
    expect(kinds(s.effects)).toEqual(['after:drop-trigger', 'after:close-group', 'after:drop-trigger', 'after:commit-uploads']);
  });

  test('a pending run is canceled without an upload commit; an unscheduled task gets a canceled run', () => {
    const s = step(T.cancel(pendingTask(), {}, NOW));
    expect(s.record).toEqual({ name: 'cancel', ended: { runId: 0, from: 'pending' } });
    expect(summary(s.next)).toEqual(['exception/canceled']);
    expect(kinds(s.effects)).toEqual(['after:close-group', 'after:drop-trigger']);
    const u = T.create({ taskId: 'T1', definition: definition({ dependencies: ['D1'] }), hintId: 'h0' }, NOW).next;
    const c = step(T.cancel(u, {}, NOW));
    expect(c.record).toEqual({ name: 'cancel', ended: { runId: 0, from: null } });
    expect(c.next.runs).toEqual([expect.objectContaining({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'canceled' })]);
  });

  test('with dependents: safety net around the propagation', () => {
    const t = pendingTask();
    t.hasDependents = true;
    expect(kinds(step(T.cancel(t, {}, NOW)).effects)).toEqual([
      'before:put-safety-net',
      'after:close-group',
      'after:drop-trigger',
      'after:propagate',
      'after:delete-safety-net',
    ]);
  });

  test('a resolved task is unchanged; after the deadline cancel is refused', () => {
    const done = step(report(runningTask(), { state: 'failed' })).next;
    expect(T.cancel(done, {}, NOW)).toEqual(repeat('cancel', done));
    expect(T.cancel(pendingTask(), {}, later(3600))).toEqual({ refused: 'conflict', message: 'task T1 has passed its deadline' });
  });
});

describe('rerun', () => {
  test('a resolved task gets a pending run (rerun), fresh retries and a new deadline trigger', () => {
    const t = runningTask();
    t.retriesLeft = 0;
    const done = step(report(t, { state: 'failed' })).next;
    const s = step(T.rerun(done, { hintId: 'hr' }, NOW));
    expect(s.record).toEqual({ name: 'rerun', runId: 1 });
    expect(summary(s.next)).toEqual(['failed/failed', 'pending']);
    expect(s.next.runs[1]).toEqual(expect.objectContaining({ reasonCreated: 'rerun', hintId: 'hr' }));
    expect(s.next.retriesLeft).toBe(2);
    // Unresolved again: the group's open row is back before the row says so.
    expect(kinds(s.effects)).toEqual(['before:put-deadline-trigger', 'before:reopen-group', 'before:put-hint', 'after:wake']);
  });

  test('retriesLeft never exceeds the runs left', () => {
    const done = step(report(runningTask(), { state: 'failed' })).next;
    done.runs = Array.from({ length: T.MAX_RUNS - 1 }, (_, i) => ({ ...done.runs[0], runId: i }));
    expect(step(T.rerun(done, { hintId: 'hr' }, NOW)).next.retriesLeft).toBe(0);
  });

  test('pending or running: unchanged; MAX_RUNS and the deadline refuse', () => {
    const t = runningTask();
    expect(T.rerun(t, { hintId: 'hr' }, NOW)).toEqual(repeat('rerun', t));
    const done = step(report(t, { state: 'failed' })).next;
    done.runs = Array.from({ length: T.MAX_RUNS }, (_, i) => ({ ...done.runs[0], runId: i }));
    expect(T.rerun(done, { hintId: 'hr' }, NOW)).toEqual({ refused: 'conflict', message: `Maximum number of runs reached (${T.MAX_RUNS})` });
    expect(T.rerun(done, { hintId: 'hr' }, later(3600))).toEqual({ refused: 'conflict', message: 'task T1 has passed its deadline' });
  });
});

describe('dependency bookkeeping', () => {
  test('dependentAdded flags the task once', () => {
    const t = pendingTask();
    const s = T.dependentAdded(t);
    expect(s.record).toEqual({ name: 'dependent-added' });
    expect(s.next.hasDependents).toBe(true);
    expect(T.dependentAdded(s.next)).toEqual(repeat('dependent-added', s.next));
  });

  test('propagated records the last run once, and only if it is still the last', () => {
    const done = step(report(runningTask(), { state: 'completed' })).next;
    done.hasDependents = true;
    const s = T.propagated(done, { last: 0 });
    expect(s.record).toEqual({ name: 'propagated', last: 0 });
    expect(s.next.dependentsNotified).toBe(0);
    expect(T.propagated(s.next, { last: 0 })).toEqual(repeat('propagated', s.next));
    expect(T.propagated(done, { last: 1 })).toEqual(repeat('propagated', done));
    // Once recorded, a resolved task owes no more propagation (the group's bookkeeping is repeated, harmlessly).
    expect(T.safetyNet(s.next).record).toEqual({ name: 'repeat', of: 'safety-net' });
    expect(kinds(T.safetyNet(s.next).effects)).toEqual(['after:close-group']);
    expect(kinds(T.safetyNet(done).effects)).toEqual(['after:propagate', 'after:close-group']);
  });
});

test('transitions never mutate the task they are given', () => {
  const t = runningTask();
  const before = structuredClone(t);
  report(t, { state: 'exception', reason: 'worker-shutdown' });
  T.cancel(t, {}, NOW);
  T.deadline(t, { deadline: DEADLINE }, later(3600));
  T.expireClaim(t, { runId: 0, takenUntil: t.runs[0].takenUntil!, hintId: 'h' }, later(CLAIM_S));
  expect(t).toEqual(before);
});

describe('rehint (a lost or hidden hint)', () => {
  const base = () => pendingTask({ priority: 'high' });

  test('a pending run with the stale hint gets the fresh one, put before the write, and pollers are woken', () => {
    const r = T.rehint(base(), { runId: 0, staleHintId: 'h0', hintId: 'new' }, NOW);
    expect(r.record).toEqual({ name: 'rehint', runId: 0 });
    expect(r.next.runs[0]).toMatchObject({ state: 'pending', hintId: 'new' });
    expect(kinds(r.effects)).toEqual(['before:put-hint', 'after:wake']);
    expect(r.effects[0]).toMatchObject({ taskId: 'T1', runId: 0, hintId: 'new', priority: 'high' });
  });

  test('nothing changes once the run moved on, got another hint, or passed its deadline', () => {
    const t = base();
    expect(T.rehint(t, { runId: 0, staleHintId: 'other', hintId: 'new' }, NOW)).toEqual(repeat('rehint', t));
    expect(T.rehint(t, { runId: 0, staleHintId: 'h0', hintId: 'new' }, later(3600)).next).toBe(t);
    const claimed = runningTask({ priority: 'high' });
    expect(T.rehint(claimed, { runId: 0, staleHintId: 'h0', hintId: 'new' }, NOW).next).toBe(claimed);
  });
});
