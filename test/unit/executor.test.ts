/**
 * The executor (shared/lifecycle/executor.ts) carrying out real plans (shared/lifecycle/planner.ts), with
 * recording fakes for its dependencies (no storage): effect order around the write, recomputation
 * after an ETag race without repeating `before` effects, and refusals that perform nothing.
 */
import { execute } from '../../shared/lifecycle/executor';
import * as T from '../../shared/lifecycle/transitions';
import type { TaskDeps } from '../../shared/tasks/ports';
import type { TaskRecord } from '../../shared/tasks/model';
import { heldEntries } from '../../shared/ops/history';
import { taskDefinition } from '../helpers/task-fixture';

const NOW = new Date('2030-01-01T00:00:00.000Z');
const W = { workerGroup: 'wg', workerId: 'w1' };

function pendingTask(): TaskRecord {
  const def = taskDefinition(NOW, { retries: 1 });
  const t = T.create({ taskId: 'T1', definition: def, hintId: 'h0' }, NOW).next;
  t.deadlineTrigger = { messageId: 'dl', popReceipt: 'p' };
  t.etag = 'e0';
  return t;
}

/** Fakes recording every call in order; `rows` are the stored versions, `races` ETag losses to inject. */
function fakes(
  initial: TaskRecord,
  opts: {
    races?: TaskRecord[];
    groupFails?: boolean;
    /** A create's own group exists already (a member came first): an insert with its rows fails, and no task row is there. */
    groupExists?: boolean;
    /** No task row until a create inserts it. */
    absent?: boolean;
    events?: { deadline?: boolean; deliverFails?: boolean };
  } = {},
) {
  const calls: string[] = [];
  /** The rows of each write's transaction besides the task row (its history rows). */
  const writes: { rowKey: string; entry?: string; event?: string }[][] = [];
  /** A write's history entries: its rows, and those it numbered on from `seq` and holds in the row. */
  const history = (seq: number, t: TaskRecord, rows: { rowKey: string }[]) => [
    ...rows,
    ...heldEntries(t)
      .filter((h) => h.entry.seq > seq)
      .map((h) => ({ rowKey: `held ${h.entry.seq}`, entry: JSON.stringify(h.entry), ...(h.event ? { event: JSON.stringify(h.event) } : {}) })),
  ];
  let stored = initial;
  let inserted = false;
  const races = [...(opts.races ?? [])];
  let n = 0;
  const d = {
    now: () => NOW,
    config: { claimTimeoutS: 1200, maxTaskDeadlineDays: 5, deadlineDelayS: 0 },
    // A line per history entry (task-transition) on every write; the others are the transitions' own.
    log: { info: (e: string) => e === 'task-transition' || calls.push(`log ${e}`), warn: () => undefined, error: () => undefined, request: () => undefined },
    wake: (q: string) => calls.push(`wake ${q}`),
    uploads: { commit: async (taskId: string, runId: number) => void calls.push(`commit ${taskId}/${runId}`) },
    pending: { put: async (_q: string, _p: string, taskId: string, runId: number, hintId: string) => void calls.push(`hint ${taskId}/${runId} ${hintId}`) },
    triggers: {
      claim: async (_t: string, runId: number) => (calls.push(`claim.put ${runId}`), { messageId: `c${++n}`, popReceipt: 'p' }),
      deadline: async (_t: string, _d: string, opts: { sweep?: { seqs: number[] }; expiry?: unknown } = {}) => (
        calls.push(opts.sweep ? `deadline.put sweep ${opts.sweep.seqs}` : `deadline.put${opts.expiry ? ' +expiry' : ''}`),
        { messageId: `d${++n}`, popReceipt: 'p' }
      ),
      rearmDeadline: async (ref: { messageId: string }) => (calls.push(`deadline.rearm ${ref.messageId}`), { messageId: ref.messageId, popReceipt: 'p2' }),
      resolved: async () => (calls.push('net.put'), { messageId: `r${++n}`, popReceipt: 'p' }),
      drop: async (kind: string, ref?: { messageId: string }) => void calls.push(`${kind}.drop ${ref?.messageId}`),
      done: async (ref: { messageId: string }) => void calls.push(`net.delete ${ref.messageId}`),
    },
    groups: {
      close: async (g: string, taskId: string) => void calls.push(`group.close ${g}/${taskId}`),
      addMember: async (g: string, taskId: string) => void calls.push(`group.add ${g}/${taskId}`),
      createActions: (g: string) => [{ op: 'create', entity: { partitionKey: g, rowKey: `g~~group~${g}` } }],
    },
    expiry: { recordAll: async (rows: { id: string }[]) => void calls.push(`expiry ${rows[0].id}`) },
    // A write's events: the guard the recorder would choose (claim or deadline trigger), the outbox, the delivery.
    // Without `opts.events`, nobody listens: silent.
    taskEvents: {
      groupResolved: async (g: { taskGroupId: string }) => {
        calls.push(`group.resolved? ${g.taskGroupId}`);
        if (opts.groupFails) throw new Error('delivery failed');
      },
      replay: async () => 0,
      runListened: async () => !!opts.events,
      prepare: async (planned: { deadline: boolean }) => {
        if (!opts.events) return { events: [], guarded: false };
        const deadlineSweep = opts.events!.deadline && planned.deadline ? { seqs: [1, 2], delayS: 60 } : undefined;
        calls.push('events.prepare');
        return { guarded: !deadlineSweep, ...(deadlineSweep ? { deadlineSweep } : {}) };
      },
      deliver: async () => {
        if (!opts.events) return true;
        calls.push('events.deliver');
        if (opts.events!.deliverFails) throw new Error('delivery failed');
        return true;
      },
    },
    tasks: {
      load: async () => (calls.push('load'), (opts.groupExists || opts.absent) && !inserted ? undefined : structuredClone(stored)),
      amendRecent: (_id: string, amend: (t: TaskRecord) => void) => {
        calls.push('amend');
        amend(stored);
      },
      insert: async (t: TaskRecord, rows: { rowKey: string }[] = [], actions: unknown[] = []) => {
        writes.push(history(0, t, rows));
        calls.push(['insert', ...(actions.length ? ['+group'] : [])].join(' '));
        if (actions.length && opts.groupExists) return false;
        inserted = true;
        stored = { ...structuredClone(t), etag: 'e0' };
        t.etag = 'e0';
        return true;
      },
      replace: async (current: TaskRecord, next: TaskRecord, rows: { rowKey: string }[] = [], actions: unknown[] = []) => {
        writes.push(history(current.historySeq ?? 0, next, rows));
        calls.push(['write', ...(actions.length ? ['+group'] : [])].join(' '));
        const race = races.shift();
        if (race) {
          stored = { ...race, etag: `${current.etag}+` };
          return 'etag';
        }
        if (current.etag !== stored.etag) return 'etag';
        stored = { ...structuredClone(next), etag: `${current.etag}'` };
        next.etag = stored.etag;
        return 'written';
      },
    },
  };
  return { d: d as unknown as TaskDeps, calls, writes, stored: () => stored };
}

const claimInput = { runId: 0, worker: W, via: { hintId: 'h0', replayWithinS: 60 }, claimTimeoutS: 1200 };

test('before effects precede the write, after effects follow it, and trigger refs land in the row', async () => {
  const t = pendingTask();
  const f = fakes(t);
  const r = await execute(f.d, 'T1', (x) => T.claim(x, claimInput, NOW), t);
  expect(r).toEqual({ task: expect.anything(), changed: true });
  expect(f.calls).toEqual(['claim.put 0', 'write']);
  expect(f.stored().runs[0]).toEqual(expect.objectContaining({ state: 'running', claimTrigger: { messageId: 'c1', popReceipt: 'p' } }));
});

test('after an ETag race the transition is recomputed on the fresh row; an identical before effect is not repeated', async () => {
  const t = pendingTask();
  // Someone else wrote the row (an unrelated change: the task gained a dependent).
  const f = fakes(t, { races: [{ ...structuredClone(t), hasDependents: true }] });
  const r = await execute(f.d, 'T1', (x) => T.claim(x, claimInput, NOW), t);
  expect(r && 'changed' in r && r.changed).toBe(true);
  expect(f.calls).toEqual(['claim.put 0', 'write', 'load', 'write']);
  expect(f.stored()).toEqual(expect.objectContaining({ hasDependents: true }));
  expect(f.stored().runs[0].claimTrigger).toEqual({ messageId: 'c1', popReceipt: 'p' });
});

test('a race that already did the work turns a report into an idempotent repeat owing only its leftovers', async () => {
  const claimed = (await execute(fakes(pendingTask()).d, 'T1', (x) => T.claim(x, { ...claimInput, via: null }, NOW), pendingTask())) as { task: TaskRecord };
  const running = { ...claimed.task, etag: 'e1' };
  running.runs[0].uploads = true; // it created an s3 artifact (createArtifact marks the run)
  const completedElsewhere = (T.report(running, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, NOW) as T.Step).next;
  const f = fakes(running, { races: [completedElsewhere] });
  const r = await execute(f.d, 'T1', (x) => T.report(x, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, NOW), running);
  expect(r).toEqual({ task: expect.objectContaining({ runs: [expect.objectContaining({ state: 'completed' })] }), changed: false });
  // No trigger drops from the lost attempt: the winner owed those. The commit and the group's bookkeeping are owed by every repeat.
  expect(f.calls).toEqual(['write', 'load', 'commit T1/0', 'group.close T1/T1', 'group.resolved? T1']);
});

test('a final report: the group bookkeeping before the deadline trigger drop; if it fails, the trigger stays', async () => {
  const claimed = (await execute(fakes(pendingTask()).d, 'T1', (x) => T.claim(x, { ...claimInput, via: null }, NOW), pendingTask())) as { task: TaskRecord };
  claimed.task.runs[0].uploads = true; // it created an s3 artifact: the report commits its uploads too
  const report = (x: TaskRecord) => T.report(x, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, NOW);
  const ok = fakes(claimed.task);
  await execute(ok.d, 'T1', report, claimed.task);
  expect(ok.calls).toEqual(['write', 'claim.drop c1', 'commit T1/0', 'group.close T1/T1', 'group.resolved? T1', 'deadline.drop dl']);
  const failing = fakes(claimed.task, { groupFails: true });
  await expect(execute(failing.d, 'T1', report, claimed.task)).rejects.toThrow('delivery failed');
  // The deadline trigger fires on the resolved task later and owes the bookkeeping again.
  expect(failing.calls).not.toContain('deadline.drop dl');
  expect(failing.calls).toContain('commit T1/0');
});

test('a retrying report: hint first, then the row, then wake, drop and commit', async () => {
  const claimed = (await execute(fakes(pendingTask()).d, 'T1', (x) => T.claim(x, { ...claimInput, via: null }, NOW), pendingTask())) as { task: TaskRecord };
  claimed.task.runs[0].uploads = true;
  const f = fakes(claimed.task);
  await execute(f.d, 'T1', (x) => T.report(x, { runId: 0, outcome: { state: 'exception', reason: 'worker-shutdown' }, hintId: 'h1' }, NOW), claimed.task);
  expect(f.calls).toEqual(['hint T1/1 h1', 'write', 'wake prov/wt', 'claim.drop c1', 'commit T1/0']);
  expect(f.stored().runs.map((r) => r.state)).toEqual(['exception', 'pending']);
});

test('a report of a run that created no s3 artifact makes no upload-commit call', async () => {
  const claimed = (await execute(fakes(pendingTask()).d, 'T1', (x) => T.claim(x, { ...claimInput, via: null }, NOW), pendingTask())) as { task: TaskRecord };
  const f = fakes(claimed.task);
  await execute(f.d, 'T1', (x) => T.report(x, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, NOW), claimed.task);
  expect(f.calls).toEqual(['write', 'claim.drop c1', 'group.close T1/T1', 'group.resolved? T1', 'deadline.drop dl']);
});

test('a refusal performs nothing and writes nothing', async () => {
  const t = pendingTask();
  const f = fakes(t);
  const r = await execute(f.d, 'T1', (x) => T.reclaim(x, { runId: 0, claimTimeoutS: 1200 }, NOW), t);
  expect(r).toEqual({ refused: 'conflict', message: 'run 0 of task T1 is not running (it was resolved, canceled or overtaken)' });
  expect(f.calls).toEqual([]);
});

test("history entries go with the task row's write, numbered on from the row each attempt read", async () => {
  const t = pendingTask();
  // The race's write added history: the retry numbers on from there.
  const f = fakes(t, { races: [{ ...structuredClone(t), historySeq: 5 }] });
  await execute(f.d, 'T1', (x) => T.claim(x, claimInput, NOW), t);
  expect(f.calls).toEqual(['claim.put 0', 'write', 'load', 'write']);
  const seqs = f.writes.map((rows) => rows.map((r) => JSON.parse(r.entry!).seq));
  expect(seqs).toEqual([[1], [6]]);
  expect(f.stored().historySeq).toBe(6);
});

test("events: on the write's history rows; a guarded delivery precedes the after effects, and its failure keeps the guard", async () => {
  const claimed = (await execute(fakes(pendingTask()).d, 'T1', (x) => T.claim(x, { ...claimInput, via: null }, NOW), pendingTask())) as { task: TaskRecord };
  const running = { ...claimed.task, etag: 'e1' };
  const report = (x: TaskRecord) => T.report(x, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, NOW);
  // The claim-expiry trigger guards the report's events: it is dropped only after they were delivered.
  const f = fakes(running, { events: {} });
  await execute(f.d, 'T1', report, running);
  expect(f.calls.slice(0, 3)).toEqual(['events.prepare', 'write', 'events.deliver']);
  // Its one history entry (the resolution) carries task-completed: the outbox.
  expect(f.writes[0].map((r) => r.event && JSON.parse(r.event).exchange)).toEqual([expect.stringMatching(/task-completed$/)]);
  expect(f.calls.indexOf('claim.drop c1')).toBeGreaterThan(f.calls.indexOf('events.deliver'));
  const failing = fakes(running, { events: { deliverFails: true } });
  await expect(execute(failing.d, 'T1', report, running)).rejects.toThrow('delivery failed');
  expect(failing.calls).toEqual(['events.prepare', 'write', 'events.deliver']);
});

/** createTask's way through the executor: an insert while no row is there, createAgain on a row found. */
const createVia = (d: any, step: ReturnType<typeof T.create>) =>
  execute(d, step.next.taskId, (t) => T.createAgain(t, step.next.definition), undefined, { create: step });

test('events of a create: its deadline trigger carries their sweep and is re-armed once they were delivered', async () => {
  const t = pendingTask();
  const step = T.create({ taskId: 'T1', definition: t.definition, hintId: 'h0' }, NOW);
  const f = fakes(t, { events: { deadline: true }, absent: true });
  expect(await createVia(f.d, step)).toEqual({ task: expect.objectContaining({ taskId: 'T1' }), changed: true });
  expect(f.calls.filter((c) => c.startsWith('deadline') || c.startsWith('events') || c.startsWith('insert') || c === 'amend')).toEqual([
    'events.prepare',
    'deadline.put sweep 1,2',
    'insert +group',
    'events.deliver',
    'deadline.rearm d1',
    'amend',
  ]);
  // The re-armed trigger's new receipt goes into the row this instance writes next.
  expect(f.stored().deadlineTrigger).toEqual({ messageId: 'd1', popReceipt: 'p2' });
  // A deadline message carries no expiry: the create records the task's expiry rows itself.
  expect(f.calls).toContain('expiry T1');
  // Not delivered: not re-armed, so the trigger shows after the sweep delay and the reaper delivers them.
  const failing = fakes(t, { events: { deadline: true, deliverFails: true }, absent: true });
  await createVia(failing.d, T.create({ taskId: 'T1', definition: t.definition, hintId: 'h0' }, NOW)).catch(() => undefined);
  expect(failing.calls.some((c) => c.startsWith('deadline.rearm'))).toBe(false);
});

describe('a create starting its own group', () => {
  const create = () => T.create({ taskId: 'T1', definition: pendingTask().definition, hintId: 'h0' }, NOW);

  test("the group's rows go in the task row's transaction: no group call, and the row says it is alone", async () => {
    const f = fakes(pendingTask(), { absent: true });
    const r = await createVia(f.d, create());
    expect(r).toEqual({ task: expect.objectContaining({ groupAlone: true }), changed: true });
    expect(f.calls.filter((c) => c.startsWith('group') || c.startsWith('insert'))).toEqual(['insert +group']);
  });

  test('a group that exists already (a member came first): it joins as a member, then the row goes in without the group rows', async () => {
    const f = fakes(pendingTask(), { groupExists: true });
    const r = await createVia(f.d, create());
    expect(r).toEqual({ task: expect.not.objectContaining({ groupAlone: true }), changed: true });
    expect(f.calls.filter((c) => c.startsWith('group') || c.startsWith('insert') || c === 'load')).toEqual([
      'insert +group',
      'load',
      'group.add T1/T1',
      'insert',
    ]);
    // The before effects went out once, not again for the second insert. The deadline's index row
    // carries the task's expiry: no expiry call of its own (executor.ts `expiryWithDeadline`).
    expect(f.calls.filter((c) => c.startsWith('deadline.put') || c.startsWith('hint') || c.startsWith('expiry'))).toEqual([
      'deadline.put +expiry',
      'hint T1/0 h0',
    ]);
  });
});

describe("a group of one's resolution is its close", () => {
  async function claimedAlone(): Promise<TaskRecord> {
    const claimed = (await execute(fakes(pendingTask()).d, 'T1', (x) => T.claim(x, { ...claimInput, via: null }, NOW), pendingTask())) as { task: TaskRecord };
    return { ...claimed.task, groupAlone: true };
  }
  const report = (x: TaskRecord) => T.report(x, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, NOW);

  test('the row written alone: no group call, the group known empty, then the deadline trigger drop', async () => {
    const t = await claimedAlone();
    const f = fakes(t);
    await execute(f.d, 'T1', report, t);
    expect(f.calls).toEqual(['write', 'claim.drop c1', 'group.resolved? T1', 'deadline.drop dl']);
  });

  test('someone joined since the row was read (the join changed the row): the write meets its ETag, reads, and closes as any member', async () => {
    const t = await claimedAlone();
    const joined = { ...structuredClone(t) };
    delete joined.groupAlone;
    const f = fakes(t, { races: [joined] });
    await execute(f.d, 'T1', report, t);
    expect(f.calls).toEqual(['write', 'load', 'write', 'claim.drop c1', 'group.close T1/T1', 'group.resolved? T1', 'deadline.drop dl']);
  });

  test('an ETag race on a row still alone: written alone on the next attempt', async () => {
    const t = await claimedAlone();
    const f = fakes(t, { races: [{ ...structuredClone(t), retriesLeft: 0 }] });
    await execute(f.d, 'T1', report, t);
    expect(f.calls.filter((c) => c.startsWith('write') || c === 'load' || c.startsWith('group.'))).toEqual(['write', 'load', 'write', 'group.resolved? T1']);
  });
});
