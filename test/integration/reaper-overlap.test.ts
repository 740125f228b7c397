/**
 * Two instances of the app (same storage) running reaper passes at the same time, over duplicated
 * triggers (as createTask retries and at-least-once delivery produce): nothing is resolved twice,
 * no task gains an extra run, every dependent is scheduled once and is claimable once.
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid, expectError, clock } from '../helpers/service';
import { claim, passTime, runSummary, status, uniqueQueue, waitUntil, W1, W2 } from '../helpers/work';
import { runReaper } from '../../shared/reaper/reaper';
import { EXPIRY_KIND_CLAIM, EXPIRY_KIND_DEADLINE } from '../../shared/tasks/triggers';
import { EXPIRY_BUCKETS, TRIGGER_LANE } from '../../shared/tasks/expiry';
import { allRows } from '../../shared/storage/storage';

let a: TestService;
let b: TestService;
beforeAll(async () => {
  const env = { QUEUE_CLAIM_WORK_POLL_S: '0.5', QUEUE_CLAIM_TIMEOUT_S: '1', QUEUE_DEADLINE_DELAY_S: '0' };
  a = await startTestService(env);
  b = await startSecondInstance(a);
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** Extra copies of every trigger a task has, put directly (the handlers must tolerate them). */
const COPIES = 3;

/**
 * COPIES more triggers of a claim: messages, and copies of its expiry-index row in the other
 * buckets of its day, as claimWorks retried in other turns of the lane leave them.
 */
async function copyClaimTriggers(s: TestService, taskId: string, takenUntil: string) {
  for (let k = 0; k < COPIES; k += 2) await s.services.triggers.claim(taskId, 0, takenUntil, { guard: true });
  const table = s.services.storage.table('Expiry');
  const [row] = await allRows(table, { partitionKey: { ge: TRIGGER_LANE, le: `${TRIGGER_LANE}~` }, rowKey: `${takenUntil}~${EXPIRY_KIND_CLAIM}~${taskId}` });
  const bucket = Number(row.partitionKey.split('~').pop());
  const { etag: _etag, ...copy } = row;
  void _etag;
  for (let k = 1; k < COPIES; k += 2)
    await table.upsert({ ...copy, partitionKey: `${TRIGGER_LANE}${takenUntil.slice(0, 10)}~${(bucket + k) % EXPIRY_BUCKETS}` });
}

async function claimableOnce(tq: string, taskId: string, runId: number) {
  const claims = await claim(b, tq, W1, 32);
  expect(claims.map((c) => `${c.status.taskId}/${c.runId}`)).toEqual([`${taskId}/${runId}`]);
  expect(await claim(a, tq, W2, 32)).toEqual([]);
}

test('overlapping reaper passes on two instances', async () => {
  const q = a.queue();
  const retrying: { taskId: string; tq: string }[] = [];
  const final: { taskId: string; dependent: string; depQueue: string; kind: 'claim' | 'deadline' }[] = [];
  const expiring: string[] = [];
  let lastTakenUntil = '';

  for (let i = 0; i < 4; i++) {
    const t = { taskId: slugid(), tq: uniqueQueue() };
    await q.createTask(t.taskId, taskDef(t.tq, { retries: 2 }));
    const [c] = await claim(a, t.tq, W1, 1);
    await copyClaimTriggers(a, t.taskId, c.takenUntil);
    lastTakenUntil = c.takenUntil;
    retrying.push(t);
  }
  // Taken now, after the claims above, with room for the creates below on a busy machine.
  const deadline = new Date(clock.ms() + 5000).toJSON();
  for (const kind of ['claim', 'claim', 'deadline', 'deadline', 'deadline'] as const) {
    const taskId = slugid();
    const tq = uniqueQueue();
    const def = taskDef(tq, kind === 'claim' ? { retries: 0 } : { deadline });
    // A createTask retried COPIES times (its deadline row written again, stale hints left).
    for (let k = 0; k < COPIES; k++) await q.createTask(taskId, def);
    const dependent = slugid();
    const depQueue = uniqueQueue();
    await q.createTask(dependent, taskDef(depQueue, { dependencies: [taskId], requires: 'all-resolved' }));
    if (kind === 'claim') {
      const [c] = await claim(a, tq, W1, 1);
      await copyClaimTriggers(a, taskId, c.takenUntil);
      lastTakenUntil = c.takenUntil;
    }
    final.push({ taskId, dependent, depQueue, kind });
  }
  const g = slugid();
  for (let i = 0; i < 3; i++) {
    const taskId = slugid();
    await q.createTask(taskId, taskDef(uniqueQueue(), { taskGroupId: g, deadline, expires: deadline }));
    expiring.push(taskId);
  }

  await waitUntil([deadline, lastTakenUntil].sort()[1], 1200);
  const handled = { a: 0, b: 0 };
  let claims = 0;
  for (let pass = 0; pass < 4; pass++) {
    const [s1, s2, s3] = await Promise.all([runReaper(a.services), runReaper(b.services), runReaper(a.services)]);
    handled.a += s1.claim + s1.deadline + s3.claim + s3.deadline;
    handled.b += s2.claim + s2.deadline;
    claims += s1.claim + s2.claim + s3.claim;
    await passTime(300);
  }
  // Both instances really took part.
  expect(handled.a).toBeGreaterThan(0);
  expect(handled.b).toBeGreaterThan(0);
  // Every due claim trigger was handled: the claim's own (an expiry-index row: nobody listens) plus
  // COPIES of 6 claimed tasks, messages and rows alternately. A message is leased by one instance at
  // a time; rows are not leased (the deadlines are rows too, one per task, however often its
  // createTask was retried), so both instances may act on one: the checks below prove that harmless.
  expect(claims).toBeGreaterThanOrEqual(6 * (COPIES + 1));
  const left = (await a.services.expiry.dueTriggers(new Date(clock.ms()), 1000)).filter((r) => r.kind === EXPIRY_KIND_CLAIM || r.kind === EXPIRY_KIND_DEADLINE);
  expect(left).toEqual([]);
  expect(await a.services.storage.trigger('claim').approximateCount()).toBe(0);

  for (const t of retrying) {
    const s = await status(b, t.taskId);
    expect(await runSummary(b, t.taskId)).toEqual(['exception/claim-expired', 'pending']);
    expect(s.retriesLeft).toBe(1);
    await claimableOnce(t.tq, t.taskId, 1);
  }
  for (const t of final) {
    const reason = t.kind === 'claim' ? 'claim-expired' : 'deadline-exceeded';
    expect(await runSummary(b, t.taskId)).toEqual([`exception/${reason}`]);
    expect(await runSummary(b, t.dependent)).toEqual(['pending']);
    await claimableOnce(t.depQueue, t.dependent, 0);
  }
  for (const taskId of expiring) await expectError(b.queue().task(taskId), 404, 'ResourceNotFound');
  await expectError(b.queue().getTaskGroup(g), 404, 'ResourceNotFound');

  // Races were settled by ETags and idempotent deletes, never by errors.
  const errors = [...a.log.records, ...b.log.records].filter((r) => r.level === 'error');
  expect(errors).toEqual([]);
}, 60_000);

test('claimWork on two instances over duplicated hints: one claim in total', async () => {
  for (let i = 0; i < 3; i++) {
    const tq = uniqueQueue();
    const taskId = slugid();
    const def = taskDef(tq);
    for (let k = 0; k < COPIES; k++) await a.queue().createTask(taskId, def);
    // Each instance's poller leases different copies of the hint at the same time.
    const [x, y] = await Promise.all([claim(a, tq, W1, 32), claim(b, tq, W2, 32)]);
    const all = [...x, ...y];
    expect(all).toHaveLength(1);
    expect((await status(b, taskId)).runs).toEqual([expect.objectContaining({ state: 'running', workerId: all[0].workerId })]);
  }
});
