/**
 * Deadlines kept in the expiry index (shared/tasks/triggers.ts): a task's deadline is a row the
 * reaper's expiry sweep finds at the deadline, written with other creates' rows and never dropped
 * by a resolution; a resolution that leaves the group's bookkeeping to `after` is guarded by a
 * safety net instead (plan.ts `guardGroupClose`), and a resolved task's row has nothing to do. A
 * deadline that also sweeps the write's events stays a message of the task's own.
 */
import * as T from '../../shared/lifecycle/transitions';
import { guardGroupClose, type Plan } from '../../shared/lifecycle/plan';
import { planWrite } from '../../shared/lifecycle/planner';
import type { Effect } from '../../shared/lifecycle/effects';
import type { TaskDefinition, TaskRecord } from '../../shared/tasks/model';
import { EXPIRY_KIND_DEADLINE, INDEXED_DEADLINE, Triggers, type DeadlineRef, type TriggerRef } from '../../shared/tasks/triggers';
import { ExpiryIndex } from '../../shared/tasks/expiry';
import { MemoryStorage } from '../../shared/storage/memory';
import { taskDefinition } from '../helpers/task-fixture';

const NOW = new Date('2030-01-01T00:00:00.000Z');
const LATER = new Date(NOW.getTime() + 60_000);
const W = { workerGroup: 'wg', workerId: 'w1' };
const DEADLINE_DELAY_S = 30;

describe('the triggers', () => {
  async function setup() {
    const clock = { ms: NOW.getTime() };
    const storage = new MemoryStorage('deadlines', { now: () => clock.ms });
    await Promise.all([storage.trigger('deadline').create(), storage.table('Expiry').create()]);
    const expiry = new ExpiryIndex(storage);
    const triggers = new Triggers({ storage, expiry, deadlineDelayS: DEADLINE_DELAY_S, now: () => new Date(clock.ms), resolvedNetDelayS: 120 });
    const at = (s: number) => new Date(NOW.getTime() + s * 1000).toJSON();
    return { storage, expiry, triggers, at };
  }

  test("a task's deadline is a row of the expiry index, due at the deadline plus the delay, not a queue message", async () => {
    const { storage, expiry, triggers, at } = await setup();
    const expiryOf = (id: string) => ({ expires: at(86_400), taskGroupId: id, dependencies: [] });
    const refs = await Promise.all(['A', 'B', 'C'].map((id, i) => triggers.deadline(id, at(600 + i), { expiry: expiryOf(id) })));
    expect(refs).toEqual([INDEXED_DEADLINE, INDEXED_DEADLINE, INDEXED_DEADLINE]);
    expect(storage.meter.byOp.get('deadline.put')).toBeUndefined();
    expect(await expiry.dueTriggers(new Date(Date.parse(at(600 + DEADLINE_DELAY_S)) - 1), 10)).toEqual([]);
    const due = await expiry.dueTriggers(new Date(Date.parse(at(602 + DEADLINE_DELAY_S)) + 1), 10);
    // Each carries its task's expiry, which the sweep records (shared/reaper/handlers.ts `recordCarriedExpiries`).
    expect(due.map((r) => [r.kind, r.id, r.data])).toEqual(
      ['A', 'B', 'C'].map((id, i) => [EXPIRY_KIND_DEADLINE, id, { deadline: at(600 + i), expiry: expiryOf(id) }]),
    );
    // In the triggers' lane: the expiries' query never reads them, however late.
    expect(await expiry.due(new Date('2100-01-01T00:00:00.000Z'), 10)).toEqual([]);
  });

  test("a deadline that also sweeps the write's events is a message of the task's own, which a resolution drops", async () => {
    const { storage, triggers, at } = await setup();
    const ref = (await triggers.deadline('A', at(60), {
      sweep: { seqs: [1], delayS: 5 },
      expiry: { expires: at(86_400), taskGroupId: 'A', dependencies: [] },
    })) as TriggerRef;
    expect(ref).toEqual({ messageId: expect.any(String), popReceipt: expect.any(String) });
    expect(storage.meter.byOp.get('deadline.put')).toBe(1);
    await triggers.drop('deadline', ref);
    expect(storage.meter.byOp.get('deadline.delete')).toBe(1);
  });
});

describe('the transitions and the plan', () => {
  const indexed: DeadlineRef = INDEXED_DEADLINE;
  const own: DeadlineRef = { messageId: 'dl', popReceipt: 'pr' };
  const definition = (over: Partial<TaskDefinition> = {}) => taskDefinition(NOW, { retries: 0, ...over });
  const asStep = (r: T.Result): T.Step => {
    if (!('next' in r)) throw new Error(`expected a step, got ${JSON.stringify(r)}`);
    return r;
  };
  function claimed(deadlineTrigger: DeadlineRef, over: Partial<TaskDefinition> = {}): TaskRecord {
    const c = planWrite(T.create({ taskId: 'T1', definition: definition(over), hintId: 'h0' }, NOW), NOW, 'client').task!;
    const p = planWrite(asStep(T.claim({ ...c, deadlineTrigger }, { runId: 0, worker: W, via: null, claimTimeoutS: 1200 }, NOW)), NOW, 'worker');
    p.task!.runs[0].claimTrigger = { messageId: 'claim', popReceipt: 'pr' };
    return p.task!;
  }
  const report = (t: TaskRecord) => asStep(T.report(t, { runId: 0, outcome: { state: 'completed' }, hintId: 'h1' }, LATER));
  const drops = (effects: Effect[]) => effects.filter((e) => e.kind === 'drop-trigger').map((e) => (e as { trigger: string }).trigger);
  const kinds = (p: Plan) => ({ before: p.before.map((e) => e.kind), after: p.after.map((e) => e.kind) });

  test('a resolution drops its deadline message, not an indexed deadline', () => {
    expect(drops(report(claimed(own)).effects)).toEqual(['claim', 'deadline']);
    expect(drops(report(claimed(indexed)).effects)).toEqual(['claim']);
  });

  test('a close left to `after` under an indexed deadline gets a safety net, deleted after the close', () => {
    const t = claimed(indexed, { taskGroupId: 'G' });
    const p = guardGroupClose(planWrite(report(t), LATER, 'worker'), t.deadlineTrigger);
    expect(kinds(p)).toEqual({ before: ['put-safety-net'], after: expect.arrayContaining(['close-group', 'delete-safety-net']) });
    expect(p.before[0]).toEqual(expect.objectContaining({ taskId: 'T1', runId: 0 }));
  });

  test("no net when the write is the close (a group of one), when the deadline is a message of the task's own, or when a net guards the write already", () => {
    const alone = { ...claimed(indexed), groupAlone: true as const };
    const plan = planWrite(report(alone), LATER, 'worker');
    expect(guardGroupClose(plan, alone.deadlineTrigger)).toBe(plan);
    const member = claimed(own, { taskGroupId: 'G' });
    const ownPlan = planWrite(report(member), LATER, 'worker');
    expect(guardGroupClose(ownPlan, member.deadlineTrigger)).toBe(ownPlan);
    const withDependents = { ...claimed(indexed, { taskGroupId: 'G' }), hasDependents: true };
    const netted = planWrite(report(withDependents), LATER, 'worker');
    expect(kinds(guardGroupClose(netted, withDependents.deadlineTrigger)).before.filter((k) => k === 'put-safety-net')).toHaveLength(1);
  });

  test('a deadline finding its task resolved: its own message redoes the group bookkeeping, an indexed one has nothing to do', () => {
    const done = planWrite(report(claimed(own, { taskGroupId: 'G' })), LATER, 'worker').task!;
    const after = new Date(Date.parse(done.definition.deadline) + 1000);
    const ownRun = asStep(T.deadline(done, { deadline: done.definition.deadline }, after));
    expect(ownRun.effects.map((e) => e.kind)).toEqual(['close-group']);
    const sharedRun = asStep(T.deadline(done, { deadline: done.definition.deadline, indexed: true }, after));
    expect(sharedRun.effects).toEqual([]);
  });
});
