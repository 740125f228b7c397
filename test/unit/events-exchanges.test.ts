/**
 * The events of task writes, derived from the records before and after them: the exchanges,
 * payloads, routing keys and CCs Taskcluster documents, and stable ids and sequence numbers.
 */
import {
  artifactEvent,
  groupSealedEvent,
  groupResolvedEvent,
  groupPriorityChangedEvent,
  taskRoutingKey,
  EXCHANGE_PREFIX,
  type QueueEvent,
} from '../../shared/events/exchanges';
import type { TransitionRecord } from '../../shared/lifecycle/records';
import type { Step } from '../../shared/lifecycle/transitions';
import { planWrite } from '../../shared/lifecycle/planner';
import type { TaskRecord } from '../../shared/tasks/model';

const T0 = '2026-01-01T00:00:00.000Z';
const T1 = '2026-01-01T00:01:00.000Z';
const T2 = '2026-01-01T00:21:00.000Z';

function task(overrides: Partial<TaskRecord['definition']> = {}): TaskRecord {
  return {
    taskId: 'fN1Vw5SnQ2mUa7ZP4d9CjA',
    definition: {
      provisionerId: 'prov',
      workerType: 'wt',
      taskQueueId: 'prov/wt',
      schedulerId: 'sched',
      projectId: 'none',
      taskGroupId: 'aG8a5mR4Tt2t1cVqJW2e6Q',
      dependencies: [],
      requires: 'all-completed',
      routes: ['index.project.latest', 'notify.email.a@b.c'],
      priority: 'lowest',
      retries: 1,
      created: T0,
      deadline: '2026-01-02T00:00:00.000Z',
      expires: '2026-02-01T00:00:00.000Z',
      scopes: [],
      payload: {},
      metadata: { name: 'n', description: 'd', owner: 'o@example.com', source: 'https://example.com' },
      tags: { kind: 'build' },
      extra: {},
      ...overrides,
    },
    runs: [],
    retriesLeft: 1,
    takenUntil: '',
    hasDependents: false,
    dependentsNotified: -1,
    historySeq: 0,
  };
}

/** A write as a transition returns it: `change` applied to a copy of `before` (or of `base`), named by `record`. */
function step(before: TaskRecord | undefined, change: (t: TaskRecord) => void, record: TransitionRecord, base = task()): Step {
  const next: TaskRecord = JSON.parse(JSON.stringify(before ?? base));
  change(next);
  return { record, next, effects: [] };
}

/** The events of a write, as its plan derives them from its record. */
function taskEvents(s: Step): QueueEvent[] {
  const planned = planWrite(s, new Date(T0), undefined).events as unknown as { events: QueueEvent[] } | undefined;
  return planned?.events ?? [];
}

/** The row as the write leaves it (its history counted). */
const commit = (s: Step): TaskRecord => planWrite(s, new Date(T0), undefined).task!;
const CREATE_SCHEDULED: TransitionRecord = { name: 'create', scheduled: true };
const CREATE_UNSCHEDULED: TransitionRecord = { name: 'create', scheduled: false };

describe('task events', () => {
  test('createTask of a ready task: task-defined then task-pending, with tags and CCs', () => {
    const created = step(undefined, (t) => t.runs.push({ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: T0 }), CREATE_SCHEDULED);
    const after = created.next;
    const events = taskEvents(created);
    expect(events.map((e) => e.exchange)).toEqual([`${EXCHANGE_PREFIX}task-defined`, `${EXCHANGE_PREFIX}task-pending`]);
    const [defined, pending] = events;
    expect(defined.routingKey).toBe('primary.fN1Vw5SnQ2mUa7ZP4d9CjA._._._.prov.wt.sched.aG8a5mR4Tt2t1cVqJW2e6Q._');
    // As Taskcluster: the task as defined (unscheduled, no runs); task-pending then says it is pending.
    expect(defined.payload).toEqual({
      version: 1,
      status: expect.objectContaining({ taskId: after.taskId, state: 'unscheduled', runs: [] }),
      task: { tags: { kind: 'build' } },
    });
    expect(pending.payload.status).toMatchObject({ state: 'pending', runs: [expect.objectContaining({ runId: 0, state: 'pending' })] });
    expect(defined.payload).not.toHaveProperty('runId');
    expect(pending.routingKey).toBe('primary.fN1Vw5SnQ2mUa7ZP4d9CjA.0._._.prov.wt.sched.aG8a5mR4Tt2t1cVqJW2e6Q._');
    expect(pending.payload).toMatchObject({ version: 1, runId: 0, task: { tags: { kind: 'build' } } });
    expect(pending.routes).toEqual(['route.index.project.latest', 'route.notify.email.a@b.c']);
    expect(events.map((e) => [e.id, e.seq])).toEqual([
      ['fN1Vw5SnQ2mUa7ZP4d9CjA.1', 1],
      ['fN1Vw5SnQ2mUa7ZP4d9CjA.2', 2],
    ]);
    // Internal bookkeeping never leaks into the message.
    expect(JSON.stringify(events)).not.toMatch(/hintId|claimTrigger|deadlineTrigger/);
  });

  test('an unscheduled task gets only task-defined', () => {
    expect(taskEvents(step(undefined, () => undefined, CREATE_UNSCHEDULED)).map((e) => e.exchange.slice(EXCHANGE_PREFIX.length))).toEqual(['task-defined']);
  });

  test('claim, reclaim, retry and final resolution', () => {
    let t = commit(
      step(undefined, (x) => x.runs.push({ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: T0, hintId: 'h' }), CREATE_SCHEDULED),
    );
    const claimed = step(
      t,
      (x) => {
        Object.assign(x.runs[0], { state: 'running', workerGroup: 'wg', workerId: 'w1', takenUntil: T1, started: T0 });
        x.takenUntil = T1;
      },
      { name: 'claim', runId: 0 },
    );
    const [running] = taskEvents(claimed);
    expect(running.exchange).toBe(`${EXCHANGE_PREFIX}task-running`);
    expect(running.routingKey).toBe('primary.fN1Vw5SnQ2mUa7ZP4d9CjA.0.wg.w1.prov.wt.sched.aG8a5mR4Tt2t1cVqJW2e6Q._');
    expect(running.payload).toMatchObject({ runId: 0, workerGroup: 'wg', workerId: 'w1', takenUntil: T1 });
    expect(running.seq).toBe(3);
    t = commit(claimed);

    // A reclaim is history but no event.
    const reclaimed = step(
      t,
      (x) => {
        x.runs[0].takenUntil = T2;
        x.takenUntil = T2;
      },
      { name: 'reclaim', runId: 0 },
    );
    expect(taskEvents(reclaimed)).toEqual([]);
    t = commit(reclaimed);

    // worker-shutdown with a retry: task-exception of run 0 (since 2024 Taskcluster sends it), then task-pending of run 1.
    const retried = step(
      t,
      (x) => {
        Object.assign(x.runs[0], { state: 'exception', reasonResolved: 'worker-shutdown', resolved: T2 });
        x.runs.push({ runId: 1, state: 'pending', reasonCreated: 'retry', scheduled: T2 });
        x.retriesLeft = 0;
      },
      { name: 'worker-gone', runId: 0, retry: 1 },
    );
    const ev = taskEvents(retried);
    expect(ev.map((e) => [e.exchange.slice(EXCHANGE_PREFIX.length), e.payload.runId, e.seq])).toEqual([
      ['task-exception', 0, 5],
      ['task-pending', 1, 6],
    ]);
    expect(ev[0].payload).toMatchObject({ workerGroup: 'wg', workerId: 'w1' });
    expect((ev[0].payload.status as any).runs.map((r: any) => r.state)).toEqual(['exception', 'pending']);
    // Recomputing the same transition (an ETag retry) gives identical events.
    expect(taskEvents({ ...retried, next: JSON.parse(JSON.stringify(retried.next)) })).toEqual(ev);
  });

  test('completed and failed carry the worker of the run', () => {
    const base = task();
    base.runs = [{ runId: 0, state: 'running', reasonCreated: 'scheduled', scheduled: T0, workerGroup: 'wg', workerId: 'w1', takenUntil: T1 }];
    base.historySeq = 3;
    for (const state of ['completed', 'failed'] as const) {
      const s = step(base, (x) => Object.assign(x.runs[0], { state, reasonResolved: state, resolved: T1 }), { name: 'report', runId: 0 });
      const [e] = taskEvents(s);
      expect(e.exchange).toBe(`${EXCHANGE_PREFIX}task-${state}`);
      expect(e.payload).toMatchObject({ version: 1, runId: 0, workerGroup: 'wg', workerId: 'w1' });
      expect(e.id).toBe(`${base.taskId}.4`);
    }
  });

  test('deadline before any run started: task-exception without worker fields', () => {
    const base = commit(step(undefined, () => undefined, CREATE_UNSCHEDULED));
    const s = step(
      base,
      (x) => x.runs.push({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'deadline-exceeded', scheduled: T1, resolved: T1 }),
      { name: 'deadline', ended: [{ runId: 0, from: null }] },
    );
    const [e] = taskEvents(s);
    expect(e.exchange).toBe(`${EXCHANGE_PREFIX}task-exception`);
    expect(e.payload).toEqual({ version: 1, status: expect.objectContaining({ state: 'exception' }), runId: 0, task: { tags: { kind: 'build' } } });
    expect(e.routingKey).toBe('primary.fN1Vw5SnQ2mUa7ZP4d9CjA.0._._.prov.wt.sched.aG8a5mR4Tt2t1cVqJW2e6Q._');
  });

  test('a task without routes has no CCs', () => {
    expect(taskEvents(step(undefined, () => undefined, CREATE_UNSCHEDULED, task({ routes: [] })))[0].routes).toEqual([]);
  });
});

describe('priority events', () => {
  test('a priority change is task-priority-changed with old and new priority, no run in the routing key, the CCs, and its own seq', () => {
    const created = commit(step(undefined, () => undefined, CREATE_UNSCHEDULED));
    const changed = step(created, (t) => (t.priority = 'high'), { name: 'change-priority', from: 'lowest', to: 'high' });
    const after = changed.next;
    const [e] = taskEvents(changed);
    expect(e).toMatchObject({ id: `${after.taskId}.2`, seq: 2, exchange: `${EXCHANGE_PREFIX}task-priority-changed` });
    expect(e.payload).toMatchObject({ version: 1, oldPriority: 'lowest', newPriority: 'high' });
    expect(e.payload).not.toHaveProperty('runId');
    expect(e.routingKey).toBe(`primary.${after.taskId}._._._.prov.wt.sched.aG8a5mR4Tt2t1cVqJW2e6Q._`);
    expect(e.routes).toEqual(['route.index.project.latest', 'route.notify.email.a@b.c']);
    // The same change again: a repeat, which writes nothing.
    expect(taskEvents({ record: { name: 'repeat', of: 'change-priority' }, next: after, effects: [] })).toEqual([]);
  });
});

describe('artifact and group events', () => {
  test('artifact-created names the run, its worker and the artifact', () => {
    const t = task();
    t.runs = [{ runId: 0, state: 'running', reasonCreated: 'scheduled', scheduled: T0, workerGroup: 'wg', workerId: 'w1', takenUntil: T1 }];
    t.historySeq = 3;
    const e = artifactEvent(t, 0, { storageType: 'reference', name: 'public/log.txt', expires: T2, contentType: 'text/plain' });
    expect(e.exchange).toBe(`${EXCHANGE_PREFIX}artifact-created`);
    expect(e.routingKey).toBe('primary.fN1Vw5SnQ2mUa7ZP4d9CjA.0.wg.w1.prov.wt.sched.aG8a5mR4Tt2t1cVqJW2e6Q._');
    expect(e.payload).toMatchObject({
      version: 1,
      runId: 0,
      workerGroup: 'wg',
      workerId: 'w1',
      artifact: { storageType: 'reference', name: 'public/log.txt', expires: T2, contentType: 'text/plain' },
    });
    expect(e.seq).toBe(3);
    expect(e.id).toBe(artifactEvent(t, 0, { storageType: 'reference', name: 'public/log.txt', expires: T2, contentType: 'text/plain' }).id);
  });

  test('task-group-resolved: Taskcluster payload, group routing key, named by the resolution that emptied the group', () => {
    expect(groupResolvedEvent('g1', 's', { taskId: 't1', runId: 2 })).toEqual({
      id: 'g1.resolved.t1.2',
      seq: 0,
      exchange: `${EXCHANGE_PREFIX}task-group-resolved`,
      routingKey: 'primary.g1.s._',
      routes: [],
      payload: { version: 1, taskGroupId: 'g1', schedulerId: 's' },
    });
  });

  test('task-group-priority-changed', () => {
    const e = groupPriorityChangedEvent({ taskGroupId: 'g1', schedulerId: 's' }, 'high', 3, 'call1');
    expect(e).toMatchObject({ id: 'g1.priority.call1', routingKey: 'primary.g1.s._', routes: [] });
    expect(e.payload).toEqual({ version: 1, taskGroupId: 'g1', schedulerId: 's', newPriority: 'high', tasksAffected: 3 });
  });

  test('task-group-sealed', () => {
    const e = groupSealedEvent({ taskGroupId: 'g1', schedulerId: 's', expires: T2, sealed: T1 });
    expect(e).toEqual({
      id: 'g1.sealed',
      seq: 0,
      exchange: `${EXCHANGE_PREFIX}task-group-sealed`,
      routingKey: 'primary.g1.s._',
      routes: [],
      payload: { version: 1, taskGroupId: 'g1', schedulerId: 's', expires: T2, sealed: T1 },
    });
  });

  test('routing keys have ten words and stay under 255 characters with maximal ids', () => {
    const s = {
      taskId: 'a'.repeat(22),
      provisionerId: 'p'.repeat(38),
      workerType: 'w'.repeat(38),
      schedulerId: 's'.repeat(38),
      taskGroupId: 'g'.repeat(22),
    } as any;
    const key = taskRoutingKey(s, { runId: 49, workerGroup: 'x'.repeat(38), workerId: 'y'.repeat(38) });
    expect(key.split('.')).toHaveLength(10);
    expect(key.length).toBeLessThanOrEqual(255);
  });
});
