/**
 * Plans (shared/lifecycle/planner.ts): what one task write does, from the transition's named record (and
 * the row it wrote), without storage. History rows, the events on them (the outbox) and their
 * guard, operator index writes, the chart tally and log lines are all derived here, and only here:
 * each record name is checked below for what its plan derives.
 */
import * as T from '../../shared/lifecycle/transitions';
import type { Effect } from '../../shared/lifecycle/effects';
import { createOwnGroup, type Plan } from '../../shared/lifecycle/plan';
import type { RecordName, TransitionRecord } from '../../shared/lifecycle/records';
import type { TaskDefinition, TaskRecord } from '../../shared/tasks/model';
import { planDeletion, planWrite } from '../../shared/lifecycle/planner';
import { HELD_MAX_ENTRIES, heldEntries, historyKeys, historyRowKey, type HistoryEntry } from '../../shared/ops/history';
import type { ReadModelPlan } from '../../shared/ops/read-models';
import type { TaskEventPlan } from '../../shared/lifecycle/events';
import { EXCHANGE_PREFIX, type QueueEvent } from '../../shared/events/exchanges';
import { outboxEvent } from '../../shared/events/outbox';
import { taskDefinition } from '../helpers/task-fixture';

/**
 * The history entries a write recorded (those its log lines name), with their events: held in its
 * row, or as history rows when they did not fit there.
 */
function written(p: Plan): { entry: HistoryEntry; event?: QueueEvent }[] {
  const seqs = new Set(p.log.filter((l) => l.event === 'task-transition').map((l) => (l.fields as { seq: number }).seq));
  const fromRows = p.rows.map((r) => ({ entry: JSON.parse(r.entry as string) as HistoryEntry, event: outboxEvent(r) }));
  const held = heldEntries<QueueEvent>(p.task ?? {}).filter((h) => !fromRows.some((r) => r.entry.seq === h.entry.seq));
  return [...fromRows, ...held].filter((w) => seqs.has(w.entry.seq));
}

const NOW = new Date('2030-01-01T00:00:00.000Z');
const LATER = new Date(NOW.getTime() + 60_000);
const W = { workerGroup: 'wg', workerId: 'w1' };
const ref = (id: string) => ({ messageId: id, popReceipt: `pr-${id}` });

const definition = (over: Partial<TaskDefinition> = {}) =>
  taskDefinition(NOW, {
    retries: 1,
    routes: ['index.x'],
    metadata: { name: 'build', description: 'd', owner: 'o@example.com', source: 'https://example.com' },
    ...over,
  });

const asStep = (r: T.Result): T.Step => {
  if (!('next' in r)) throw new Error(`expected a step, got ${JSON.stringify(r)}`);
  return r;
};
const events = (p: Plan) => p.events as TaskEventPlan;
const readModel = (p: Plan) => p.readModel as ReadModelPlan;
const exchanges = (list: QueueEvent[]) => list.map((e) => e.exchange.slice(EXCHANGE_PREFIX.length));
const kinds = (effects: Effect[]) => effects.map((e) => e.kind);
/** Index changes as `op rowKey-prefix`. */
const indexChanges = (p: Plan) => [...readModel(p).index.values()].flat().map((o) => `${o.op} ${o.row.rowKey.split('~')[0]}`);

/** A created task as its create wrote it (history counted), run 0 pending. */
function created(over: Partial<TaskDefinition> = {}): TaskRecord {
  const p = planWrite(T.create({ taskId: 'T1', definition: definition(over), hintId: 'h0' }, NOW), NOW, 'client');
  return { ...p.task!, deadlineTrigger: ref('deadline') };
}
function claimed(base = created()): TaskRecord {
  const p = planWrite(asStep(T.claim(base, { runId: 0, worker: W, via: null, claimTimeoutS: 1200 }, NOW)), NOW, 'worker');
  p.task!.runs[0].claimTrigger = ref('claim-0');
  return p.task!;
}
const completed = () => planWrite(asStep(T.report(claimed(), { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, LATER)), LATER, 'worker').task!;

/** Each record name: a transition that returns it, the record, and what its plan derives from it. */
interface Case {
  step: () => T.Result;
  record: TransitionRecord;
  /** History entries as `event runId` (`event` for task-level entries). */
  history: string[];
  exchanges: string[];
  index: string[];
  claimGuard?: TaskEventPlan['claim'];
}
const claimExpiry = () => new Date(Date.parse(claimed().takenUntil) + 1000);
const CASES: Record<RecordName, Case> = {
  create: {
    step: () => T.create({ taskId: 'T1', definition: definition(), hintId: 'h0' }, NOW),
    record: { name: 'create', scheduled: true },
    history: ['created', 'scheduled 0'],
    exchanges: ['task-defined', 'task-pending'],
    index: ['upsert n', 'create p'],
  },
  schedule: {
    step: () => T.schedule(created({ dependencies: ['D'] }), { hintId: 'h1' }, NOW),
    record: { name: 'schedule', runId: 0 },
    history: ['scheduled 0'],
    exchanges: ['task-pending'],
    index: ['remove u', 'create p'],
  },
  claim: {
    step: () => T.claim(created(), { runId: 0, worker: W, via: null, claimTimeoutS: 1200 }, NOW),
    record: { name: 'claim', runId: 0 },
    history: ['claimed 0'],
    exchanges: ['task-running'],
    index: ['remove p', 'create c', 'create w'],
    claimGuard: { runId: 0 },
  },
  reclaim: {
    step: () => T.reclaim(claimed(), { runId: 0, claimTimeoutS: 1200 }, LATER),
    record: { name: 'reclaim', runId: 0 },
    history: ['reclaimed 0'],
    exchanges: [],
    index: [],
  },
  report: {
    step: () => T.report(claimed(), { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, LATER),
    record: { name: 'report', runId: 0 },
    history: ['resolved 0'],
    exchanges: ['task-completed'],
    index: ['remove c', 'upsert r', 'upsert w'],
    claimGuard: { runId: 0 },
  },
  'claim-expired': {
    step: () => T.expireClaim(claimed(), { runId: 0, takenUntil: claimed().takenUntil, hintId: 'h1' }, claimExpiry()),
    record: { name: 'claim-expired', runId: 0, retry: 1 },
    history: ['resolved 0', 'scheduled 1'],
    exchanges: ['task-exception', 'task-pending'],
    index: ['remove c', 'upsert r', 'upsert w', 'create p'],
    claimGuard: { runId: 0, alsoClaimOf: 0 },
  },
  'worker-gone': {
    step: () => T.workerGone(claimed(), { runId: 0, worker: W, hintId: 'h1' }, LATER),
    record: { name: 'worker-gone', runId: 0, retry: 1 },
    history: ['resolved 0', 'scheduled 1'],
    exchanges: ['task-exception', 'task-pending'],
    index: ['remove c', 'upsert r', 'upsert w', 'create p'],
    // Nothing proves the worker got its claim: its event goes again with the end.
    claimGuard: { runId: 0, alsoClaimOf: 0 },
  },
  deadline: {
    step: () => T.deadline(created(), { deadline: definition().deadline }, new Date(definition().deadline)),
    record: { name: 'deadline', ended: [{ runId: 0, from: 'pending' }] },
    history: ['resolved 0'],
    exchanges: ['task-exception'],
    index: ['remove p', 'upsert r'],
  },
  cancel: {
    step: () => T.cancel(claimed(), {}, LATER),
    record: { name: 'cancel', ended: { runId: 0, from: 'running' } },
    history: ['resolved 0'],
    exchanges: ['task-exception'],
    index: ['remove c', 'upsert r', 'upsert w'],
    claimGuard: { runId: 0, alsoClaimOf: 0 },
  },
  rerun: {
    step: () => T.rerun(completed(), { hintId: 'h2' }, LATER),
    record: { name: 'rerun', runId: 1 },
    history: ['scheduled 1'],
    exchanges: ['task-pending'],
    index: ['create p'],
  },
  rehint: {
    step: () => T.rehint(created(), { runId: 0, staleHintId: 'h0', hintId: 'h1' }, LATER),
    record: { name: 'rehint', runId: 0 },
    history: [],
    exchanges: [],
    index: [],
  },
  suspend: {
    step: () => T.suspend(claimed(), { runId: 0, continuation: '{}', resumeAt: LATER.toJSON(), hintId: 'h1' }, LATER),
    record: { name: 'suspend', runId: 0, resumed: 1 },
    history: ['resolved 0', 'scheduled 1'],
    exchanges: ['task-exception', 'task-pending'],
    index: ['remove c', 'upsert r', 'upsert w', 'create p'],
    claimGuard: { runId: 0 },
  },
  'change-priority': {
    step: () => T.changePriority(created(), { priority: 'high', hintId: 'h1' }, NOW),
    record: { name: 'change-priority', from: 'lowest', to: 'high' },
    history: ['prioritized'],
    exchanges: ['task-priority-changed'],
    index: [],
  },
  propagated: {
    step: () => T.propagated(completed(), { last: 0 }),
    record: { name: 'propagated', last: 0 },
    history: [],
    exchanges: [],
    index: [],
  },
  'dependent-added': {
    step: () => T.dependentAdded(created()),
    record: { name: 'dependent-added' },
    history: [],
    exchanges: [],
    index: [],
  },
  'mark-uploads': {
    step: () => T.markUploads(claimed(), { runId: 0 }),
    record: { name: 'mark-uploads', runId: 0 },
    history: [],
    exchanges: [],
    index: [],
  },
  repeat: {
    step: () => T.claim(claimed(), { runId: 0, worker: W, via: null, claimTimeoutS: 1200 }, NOW),
    record: { name: 'repeat', of: 'claim', replay: { kind: 'run', runId: 0 } },
    history: [],
    exchanges: [],
    index: [],
  },
};

describe.each(Object.entries(CASES))('record %s', (name, c) => {
  const step = asStep(c.step());
  const p = planWrite(step, LATER, 'actor');

  test('the transition returns it', () => {
    expect(step.record).toEqual(c.record);
  });

  test('its plan: history, events and their guard, index writes, all from the record', () => {
    const entries = written(p).map((w) => w.entry);
    expect(entries.map((e) => (e.runId === undefined ? e.event : `${e.event} ${e.runId}`))).toEqual(c.history);
    expect(exchanges(p.events ? events(p).events : [])).toEqual(c.exchanges);
    expect(p.events ? events(p).claim : undefined).toEqual(c.claimGuard);
    expect(p.readModel ? indexChanges(p) : []).toEqual(c.index);
    // A repeat writes no row; every other record writes one, numbered on from the row's history.
    expect(p.task === undefined).toBe(name === 'repeat');
    expect(p.log.filter((l) => l.event === 'task-transition')).toHaveLength(c.history.length);
  });
});

describe('createTask', () => {
  const step = T.create({ taskId: 'T1', definition: definition(), hintId: 'h0' }, NOW);
  const p = planWrite(step, NOW, 'client');

  test('before: expiry, group, deadline trigger and hint; after: the wake', () => {
    expect(kinds(p.before)).toEqual(['record-expiry', 'add-group-member', 'put-deadline-trigger', 'put-hint']);
    expect(kinds(p.after)).toEqual(['wake']);
  });

  test('history entries created and scheduled, numbered 1 and 2, naming the actor, each with its event, held in the row', () => {
    expect(p.task!.historySeq).toBe(2);
    expect(p.rows).toEqual([]);
    expect(written(p).map((w) => w.entry)).toEqual([
      expect.objectContaining({ seq: 1, event: 'created', actor: 'client', time: NOW.toJSON() }),
      expect.objectContaining({ seq: 2, event: 'scheduled', runId: 0, from: null, to: 'pending' }),
    ]);
    expect(written(p).map((w) => w.event?.exchange.slice(EXCHANGE_PREFIX.length))).toEqual(['task-defined', 'task-pending']);
  });

  test('events guarded by the deadline trigger the write puts', () => {
    expect(exchanges(events(p).events)).toEqual(['task-defined', 'task-pending']);
    expect(events(p).deadline).toBe(true);
    expect(events(p).claim).toBeUndefined();
  });

  test('index: the by-name row and the pending row; tally: one run entered pending', () => {
    expect(indexChanges(p)).toEqual(['upsert n', 'create p']);
    expect(readModel(p).tally).toMatchObject({ pendingIn: 1 });
    expect(p.transitions).toBe(1);
    expect(p.log.map((l) => (l.fields as { transition?: string }).transition)).toEqual(['created', 'scheduled']);
  });

  test('pure: the step and its row are left as they were', () => {
    expect(step.next.historySeq).toBeUndefined();
    expect(p.task).not.toBe(step.next);
  });

  test("own group: a task starting its group (taskGroupId = taskId) may write the group's rows in its transaction instead of joining before", () => {
    expect(p.ownGroup).toEqual(expect.objectContaining({ kind: 'add-group-member', taskGroupId: 'T1', taskId: 'T1' }));
    const actions = [{ op: 'create' as const, entity: { partitionKey: 'T1', rowKey: 'open' } }];
    const owned = createOwnGroup(p, actions);
    expect(kinds(owned.before)).toEqual(['record-expiry', 'put-deadline-trigger', 'put-hint']);
    expect(owned.groupRows).toEqual(actions);
    expect(owned.task!.groupAlone).toBe(true);
    expect(p.task!.groupAlone).toBeUndefined();
    // A member of another task's group joins before the write.
    const member = planWrite(T.create({ taskId: 'T2', definition: definition(), hintId: 'h0' }, NOW), NOW, 'client');
    expect(member.ownGroup).toBeUndefined();
    expect(createOwnGroup(member, actions)).toBe(member);
  });

  test('with dependencies: only created, no hint, an unscheduled index row', () => {
    const q = planWrite(T.create({ taskId: 'T1', definition: definition({ dependencies: ['D'] }), hintId: 'h0' }, NOW), NOW, undefined);
    expect(written(q)).toHaveLength(1);
    expect(indexChanges(q)).toEqual(['upsert n', 'create u']);
    expect(written(q)[0].entry.actor).toBeUndefined();
  });
});

describe('claim and reclaim', () => {
  test("a claim: history and task-running, guarded by the claim-expiry trigger it puts; the pending row becomes the claimed and the worker's", () => {
    const before = created();
    const p = planWrite(asStep(T.claim(before, { runId: 0, worker: W, via: null, claimTimeoutS: 1200 }, NOW)), NOW, 'worker');
    expect(kinds(p.before)).toEqual(['put-claim-trigger']);
    expect(p.task!.historySeq).toBe(3);
    expect(exchanges(events(p).events)).toEqual(['task-running']);
    expect(events(p).events[0].id).toBe('T1.3');
    expect(events(p).claim).toEqual({ runId: 0 });
    expect(indexChanges(p)).toEqual(['remove p', 'create c', 'create w']);
  });

  test('a reclaim: a history entry but no event (Taskcluster publishes none), no index change', () => {
    const before = claimed();
    const p = planWrite(asStep(T.reclaim(before, { runId: 0, claimTimeoutS: 1200 }, LATER)), LATER, 'worker');
    expect(written(p)).toHaveLength(1);
    expect(written(p)[0]).toEqual({ entry: expect.objectContaining({ event: 'reclaimed' }) });
    expect(events(p).events).toEqual([]);
    expect(readModel(p).index.size).toBe(0);
    expect(readModel(p).tally).toBeUndefined();
  });
});

describe('resolution', () => {
  const report = (t: TaskRecord) => asStep(T.report(t, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, LATER));

  test('task-completed guarded by the claim-expiry trigger; resolved and worker rows; the tally', () => {
    const before = claimed();
    const p = planWrite(report(before), LATER, 'worker');
    expect(exchanges(events(p).events)).toEqual(['task-completed']);
    expect(events(p).claim).toEqual({ runId: 0 });
    expect(indexChanges(p)).toEqual(['remove c', 'upsert r', 'upsert w']);
    expect(readModel(p).tally).toMatchObject({ runningOut: 1, completed: 1 });
  });

  test("a group of one's resolution is its close: no group row in the write, the close marked alone", () => {
    const before = { ...claimed(), groupAlone: true as const };
    const p = planWrite(report(before), LATER, 'worker');
    expect(p.groupRows).toEqual([]);
    expect(p.rows).toEqual([]);
    expect(p.after.find((e) => e.kind === 'close-group')).toEqual(expect.objectContaining({ taskGroupId: 'T1', alone: true }));
  });

  test('a member of a larger group closes after its write', () => {
    const before = claimed(created({ taskGroupId: 'G' }));
    expect(planWrite(report(before), LATER, 'worker').after.find((e) => e.kind === 'close-group')).not.toHaveProperty('alone');
  });

  test("a claim expiry redelivers the claim's event too (nothing proves the worker got it); its own log line", () => {
    const before = claimed();
    const at = new Date(Date.parse(before.takenUntil) + 1000);
    const p = planWrite(asStep(T.expireClaim(before, { runId: 0, takenUntil: before.takenUntil, hintId: 'h1' }, at)), at, 'reaper');
    expect(exchanges(events(p).events)).toEqual(['task-exception', 'task-pending']);
    expect(events(p).claim).toEqual({ runId: 0, alsoClaimOf: 0 });
    expect(p.log.map((l) => l.event)).toEqual(['task-transition', 'task-transition', 'claim-expired']);
    expect(p.after.some((e) => e.kind === 'log')).toBe(false);
    expect(p.transitions).toBe(2);
  });

  test('an idempotent repeat writes nothing: no row, history, new events or index; it replays its events and owes the rest after', () => {
    const done = planWrite(report(claimed()), LATER, 'worker').task!;
    const repeat = report(done);
    expect(repeat.record).toEqual({ name: 'repeat', of: 'report', replay: { kind: 'end', runId: 0 } });
    expect(repeat.next).toBe(done);
    const p = planWrite(repeat, LATER, 'worker');
    expect(p.task).toBeUndefined();
    expect(p.rows).toEqual([]);
    expect(p.events).toBeUndefined();
    expect(p.readModel).toBeUndefined();
    expect(p.replay).toEqual({ kind: 'end', runId: 0 });
    expect(p.groupResolved).toMatchObject({ taskId: done.taskId, runId: 0 });
    expect(kinds(p.after)).toEqual(['close-group', 'commit-uploads']);
  });
});

/** `t` reclaimed `n` times, each write planned on the row the last one left. */
function reclaimedTimes(t: TaskRecord, n: number): TaskRecord {
  for (let i = 1; i <= n; i++)
    t = planWrite(asStep(T.reclaim(t, { runId: 0, claimTimeoutS: 1200 }, new Date(NOW.getTime() + i * 60_000))), NOW, 'worker').task!;
  return t;
}

describe('history held in the row', () => {
  const report = (t: TaskRecord) => asStep(T.report(t, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, LATER));
  test('a write whose entries fit is a row write alone: its entries and events stay in the row, numbered on', () => {
    const p = planWrite(report(claimed()), LATER, 'worker');
    expect(p.rows).toEqual([]);
    expect(heldEntries<QueueEvent>(p.task!).map((h) => [h.entry.seq, h.entry.event, h.event?.exchange.slice(EXCHANGE_PREFIX.length)])).toEqual([
      [1, 'created', 'task-defined'],
      [2, 'scheduled', 'task-pending'],
      [3, 'claimed', 'task-running'],
      [4, 'resolved', 'task-completed'],
    ]);
  });

  test('entries that would not fit go out as history rows with every held one, oldest first, events on their rows; the row then holds none', () => {
    const full = reclaimedTimes(claimed(), HELD_MAX_ENTRIES - 3);
    expect(heldEntries(full)).toHaveLength(HELD_MAX_ENTRIES);
    const p = planWrite(report(full), LATER, 'worker');
    expect(p.task!.historyHeld).toBeUndefined();
    expect(p.rows.map((r) => r.rowKey)).toEqual(Array.from({ length: HELD_MAX_ENTRIES + 1 }, (_, i) => historyRowKey('T1', i + 1)));
    expect(p.rows.map((r) => outboxEvent(r)?.exchange.slice(EXCHANGE_PREFIX.length))).toEqual([
      'task-defined',
      'task-pending',
      'task-running',
      ...Array(HELD_MAX_ENTRIES - 3).fill(undefined),
      'task-completed',
    ]);
    expect(historyKeys(p.task!)).toHaveLength(HELD_MAX_ENTRIES + 1);
    // The next write holds again.
    const next = planWrite(asStep(T.rerun(p.task!, { hintId: 'h2' }, LATER)), LATER, 'client');
    expect(next.rows).toEqual([]);
    expect(heldEntries(next.task!).map((h) => h.entry.seq)).toEqual([HELD_MAX_ENTRIES + 2]);
  });

  test('an event too large to hold goes out as a row at once', () => {
    const big = created({ routes: Array.from({ length: 400 }, (_, i) => `route.${i}.${'x'.repeat(60)}`) });
    expect(big.historyHeld).toBeUndefined();
    expect(historyKeys(big)).toHaveLength(2);
  });
});

describe('deletion', () => {
  test('a known task: its history keys from its count less the entries its row holds, its index rows purged before the row', () => {
    const t = claimed();
    expect(planDeletion(t).history).toEqual([]); // all three entries are held in the row
    // Its last reclaim did not fit: the row's entries went out as rows, and it holds none; then one more is held.
    const p = planDeletion(reclaimedTimes(claimed(), HELD_MAX_ENTRIES - 1));
    expect(p.history).toEqual(Array.from({ length: HELD_MAX_ENTRIES + 1 }, (_, i) => historyRowKey('T1', i + 1)));
    const rm = p.readModel as unknown as ReadModelPlan;
    expect(rm.deleted).toBe(true);
    expect([...rm.index.values()].flat().map((o) => `${o.op} ${o.row.rowKey.split('~')[0]}`)).toEqual(['purge c', 'purge w', 'purge n']);
  });

  test('a row already gone: the range its history rows are in, nothing for the read models', () => {
    const p = planDeletion(undefined);
    expect(p.history).toEqual({ ge: 'h-', lt: 'h-~' });
    expect(p.readModel).toBeUndefined();
  });
});

describe('what reportCompleted writes and publishes: one plan each', () => {
  /** A plan, as a reader would list it. */
  const summary = (p: Plan) => ({
    row: p.task?.runs.map((r) => `${r.runId} ${r.state}`),
    history: written(p).map((w) => `${w.entry.event} ${w.entry.runId}`),
    events: p.events ? exchanges(p.events.events) : [],
    guard: p.events?.claim,
    before: kinds(p.before),
    after: kinds(p.after),
    replay: p.replay,
    groupResolved: p.groupResolved && `${p.groupResolved.taskGroupId} after ${p.groupResolved.taskId}/${p.groupResolved.runId}`,
  });

  test('a report whose outcome retries: the retry run is pending in the same write, with its hint before and its wake after', () => {
    const retrying = asStep(T.report(claimed(), { runId: 0, outcome: { state: 'exception', reason: 'intermittent-task' }, hintId: 'h1' }, LATER));
    const p = planWrite(retrying, LATER, 'worker');
    expect(summary(p)).toMatchObject({
      row: ['0 exception', '1 pending'],
      events: ['task-exception', 'task-pending'],
      guard: { runId: 0 },
      before: ['put-hint'],
      after: expect.arrayContaining(['drop-trigger', 'wake', 'commit-uploads']),
      replay: undefined,
      groupResolved: undefined,
    });
    expect(written(p)).toHaveLength(2);
  });

  test('the same report again: no row, history or new event; its resolution replayed, and what it still owes', () => {
    const done = completed();
    const p = planWrite(asStep(T.report(done, { runId: 0, outcome: { state: 'completed' }, hintId: 'h2' }, LATER)), LATER, 'worker');
    expect(summary(p)).toEqual({
      row: undefined,
      history: [],
      events: [],
      guard: undefined,
      before: [],
      after: ['close-group', 'commit-uploads'],
      replay: { kind: 'end', runId: 0 },
      groupResolved: 'T1 after T1/0',
    });
  });

  test("a group's last task: its close and the task-group-resolved it owes are in the plan", () => {
    const p = planWrite(asStep(T.report(claimed(), { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, LATER)), LATER, 'worker');
    expect(summary(p)).toMatchObject({
      row: ['0 completed'],
      events: ['task-completed'],
      guard: { runId: 0 },
      after: expect.arrayContaining(['drop-trigger', 'commit-uploads', 'close-group']),
      groupResolved: 'T1 after T1/0',
    });
  });
});
