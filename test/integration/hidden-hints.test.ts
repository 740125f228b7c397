/**
 * A holder of poll URLs can hide a pending run's hint for up to seven days (dequeue with a long
 * visibility) or delete it. The reaper notices a run pending far too long without a visible hint
 * and gives it a fresh one; the old hint, when it comes back, claims nothing.
 */
import { startTestService, TestService, taskDef } from '../helpers/service';
import { uniqueQueue, claim, claimOne, passTime, W2 } from '../helpers/work';
import { runReaper } from '../../shared/reaper/reaper';
import { decodeMessage } from '../../shared/storage/storage';
import type { Hint } from '../../shared/tasks/pending';

/** Short stand-ins for the production 15 min / 5 min, so the test sees a repair in seconds. */
const REPAIR_AFTER_S = 2;
const REPAIR_EVERY_S = 1;
const SEVEN_DAYS_S = 7 * 24 * 3600 - 60;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' }, { tuning: { hintRepairAfterS: REPAIR_AFTER_S, hintRepairEveryS: REPAIR_EVERY_S } });
});
afterAll(() => svc?.close());

/** Reaper passes until one has had the chance to check (the first check waits one interval). */
async function reapPastRepair(): Promise<number> {
  let rehinted = 0;
  for (let i = 0; i < 3; i++) {
    rehinted += (await runReaper(svc.services)).rehinted;
    await passTime(REPAIR_EVERY_S * 1000 + 100);
  }
  return rehinted;
}

test('a run whose hint was dequeued for seven days is claimable again after the repair', async () => {
  const taskQueueId = uniqueQueue();
  const taskId = svc.tc.slugid();
  await svc.queue().createTask(taskId, taskDef(taskQueueId));
  const queue = svc.services.pending.queue(taskQueueId, 'lowest');
  // What a misbehaving poll-URL holder does: dequeue with the longest visibility, and never delete.
  const hidden = await queue.receive(1, SEVEN_DAYS_S);
  expect(hidden.map((m) => decodeMessage<Hint>(m)?.taskId)).toEqual([taskId]);
  expect(await claim(svc, taskQueueId, W2)).toEqual([]);

  await passTime(REPAIR_AFTER_S * 1000);
  expect(await reapPastRepair()).toBe(1);
  const c = await claimOne(svc, taskQueueId, taskId, W2);
  expect(c.runId).toBe(0);
  const log = svc.log.records.filter((l) => l.event === 'hint-repaired' && l.taskId === taskId);
  expect(log).toHaveLength(1);
});

test('a run whose hint was deleted is repaired too; a run with a visible hint is left alone', async () => {
  const taskQueueId = uniqueQueue();
  const lost = svc.tc.slugid();
  const fine = svc.tc.slugid();
  await svc.queue().createTask(lost, taskDef(taskQueueId));
  const queue = svc.services.pending.queue(taskQueueId, 'lowest');
  const [m] = await queue.receive(1, 30);
  await queue.delete(m.messageId, m.popReceipt);
  await svc.queue().createTask(fine, taskDef(taskQueueId));
  const fineHint = (await svc.services.tasks.load(fine))!.runs[0].hintId;

  await passTime(REPAIR_AFTER_S * 1000);
  expect(await reapPastRepair()).toBe(1);
  expect((await svc.services.tasks.load(fine))!.runs[0].hintId).toBe(fineHint);
  const claimed = new Set<string>();
  for (let i = 0; i < 4 && claimed.size < 2; i++) for (const c of await claim(svc, taskQueueId, W2, 2)) claimed.add(c.status.taskId);
  expect([...claimed].sort()).toEqual([lost, fine].sort());
});

test('with pending shards, the check looks in every shard: only the run whose hint is gone is repaired', async () => {
  const sharded = await startTestService(
    { QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_PENDING_SHARDS: '2' },
    { tuning: { hintRepairAfterS: REPAIR_AFTER_S, hintRepairEveryS: REPAIR_EVERY_S } },
  );
  try {
    const taskQueueId = uniqueQueue();
    const inShard = (shard: number) => {
      for (;;) {
        const id = sharded.tc.slugid();
        if (sharded.services.pending.shardOf(taskQueueId, id) === shard) return id;
      }
    };
    const [lost, fine0, fine1] = [inShard(1), inShard(0), inShard(1)];
    await sharded.queue().createTask(lost, taskDef(taskQueueId));
    const shard1 = sharded.services.pending.queue(taskQueueId, 'lowest', 1);
    const [m] = await shard1.receive(1, 30);
    await shard1.delete(m.messageId, m.popReceipt);
    await sharded.queue().createTask(fine0, taskDef(taskQueueId));
    await sharded.queue().createTask(fine1, taskDef(taskQueueId));
    const hints = async () => Promise.all([fine0, fine1].map(async (id) => (await sharded.services.tasks.load(id))!.runs[0].hintId));
    const before = await hints();

    await passTime(REPAIR_AFTER_S * 1000);
    let rehinted = 0;
    for (let i = 0; i < 3; i++) {
      rehinted += (await runReaper(sharded.services)).rehinted;
      await passTime(REPAIR_EVERY_S * 1000 + 100);
    }
    expect(rehinted).toBe(1);
    expect(await hints()).toEqual(before);
    const claimed = new Set<string>();
    for (let i = 0; i < 4 && claimed.size < 3; i++) for (const c of await claim(sharded, taskQueueId, W2, 3)) claimed.add(c.status.taskId);
    expect([...claimed].sort()).toEqual([lost, fine0, fine1].sort());
  } finally {
    await sharded.close();
  }
});
