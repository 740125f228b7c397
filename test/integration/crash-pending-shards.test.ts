/**
 * Crash safety with pending shards (QUEUE_PENDING_SHARDS=2): a failure after each storage call of
 * createTask (its hint goes to the second shard, a queue and TaskQueues row created on first use)
 * or of claimWork (the higher priority sits in the second shard), then the client's retry, leaves
 * exactly one claimable run, claimed once and in priority order.
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid, clock } from '../helpers/service';
import { CHECK_POLL_S, claim, claimAny, passTime, status, uniqueQueue, W1, W2 } from '../helpers/work';
import { eachStorageCall, sweeperFor } from '../helpers/crash';

const SHARDS = { QUEUE_PENDING_SHARDS: '2' };
/** A hint leased by a poll that then "crashed" comes back after this. */
const HINT_LEASE_S = 4;

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService({ ...SHARDS, QUEUE_CLAIM_WORK_POLL_S: '2' }, { tuning: { hintLeaseS: HINT_LEASE_S, triggerLeaseS: 2 } });
  b = await startSecondInstance(a, { ...SHARDS, QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) => sweeperFor(a)(scenario);
const retrying = () => a.queue(undefined, { retries: 4 });

/** A taskId whose hint goes to `shard` of `tq`. */
function idInShard(tq: string, shard: number): string {
  for (;;) {
    const id = slugid();
    if (a.services.pending.shardOf(tq, id) === shard) return id;
  }
}

test('createTask whose hint goes to a shard not used before', async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = idInShard(tq, 1);
    const r = await faulty(() => retrying().createTask(taskId, taskDef(tq)));
    expect(r.error).toBeUndefined();
    const claims = await claimAny(b, tq, W1, 32);
    expect(claims.map((c) => `${c.status.taskId}/${c.runId}`)).toEqual([`${taskId}/0`]);
    expect(await claim(b, tq, W2, 32)).toEqual([]);
  });
  expect(ops).toEqual(expect.arrayContaining(['pending.create', 'TaskQueues.upsert', 'pending.put']));
}, 180_000);

test('claimWork takes the higher priority from the second shard before the lower one in the first', async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const low = idInShard(tq, 0);
    const high = idInShard(tq, 1);
    await b.queue().createTask(low, taskDef(tq, { priority: 'low' }));
    await b.queue().createTask(high, taskDef(tq, { priority: 'high' }));
    const r = await faulty(() => retrying().claimWork(tq, { ...W1, tasks: 1 }));
    expect(r.error).toBeUndefined();
    const first = r.value.tasks.map((c: any) => c.status.taskId);
    // A receive that "crashed" after leasing the high hint hides it for its lease: then, and only
    // then, the retry may take the low one first (strict priority is over visible hints).
    if (r.failedOp === 'pending.get') expect([[high], [low]]).toContainEqual(first);
    else expect(first).toEqual([high]);
    expect((await status(b, first[0])).runs).toEqual([expect.objectContaining({ runId: 0, state: 'running', ...W1 })]);
    // What is left for another worker: the other one, once (after a hidden hint's lease).
    const rest: string[] = [];
    const until = clock.ms() + 4 * HINT_LEASE_S * 1000;
    while (rest.length < 1 && clock.ms() < until) {
      rest.push(...(await claim(b, tq, W2, 32)).map((c) => c.status.taskId));
      if (!rest.length) await passTime(HINT_LEASE_S * 250);
    }
    expect(rest).toEqual([first[0] === high ? low : high]);
    expect(await claim(b, tq, W2, 32)).toEqual([]);
  });
  expect(ops).toEqual(expect.arrayContaining(['pending.get', 'Expiry.upsert', 'Tasks.merge', 'pending.delete']));
}, 180_000);
