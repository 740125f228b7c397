/**
 * Dependencies: fan-out, fan-in, chains, both `requires` modes, creation-time checks, and
 * listDependentTasks paging.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claimOne, status, uniqueQueue } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

async function create(overrides: Record<string, unknown> = {}): Promise<{ taskId: string; tq: string }> {
  const taskId = slugid();
  const tq = uniqueQueue();
  await svc.queue().createTask(taskId, taskDef(tq, overrides));
  return { taskId, tq };
}

/** Claims and resolves run 0 (or `runId`) of a task with the given outcome. */
async function resolve(t: { taskId: string; tq: string }, outcome: 'completed' | 'failed' | 'exception') {
  const c = await claimOne(svc, t.tq, t.taskId);
  const wq = svc.queue(c.credentials);
  if (outcome === 'completed') return wq.reportCompleted(t.taskId, c.runId);
  if (outcome === 'failed') return wq.reportFailed(t.taskId, c.runId);
  return wq.reportException(t.taskId, c.runId, { reason: 'malformed-payload' });
}

const state = async (t: { taskId: string }) => (await status(svc, t.taskId)).state;

test('fan-out: every dependent is scheduled when the one dependency completes', async () => {
  const a = await create();
  const deps = await Promise.all([1, 2, 3].map(() => create({ dependencies: [a.taskId] })));
  for (const d of deps) expect(await state(d)).toBe('unscheduled');
  await resolve(a, 'completed');
  for (const d of deps) {
    expect(await state(d)).toBe('pending');
    expect((await status(svc, d.taskId)).runs[0].reasonCreated).toBe('scheduled');
  }
});

test('fan-in: the dependent waits for the last of its dependencies', async () => {
  const parents = await Promise.all([1, 2, 3].map(() => create()));
  const child = await create({ dependencies: parents.map((p) => p.taskId) });
  await resolve(parents[0], 'completed');
  await resolve(parents[1], 'completed');
  expect(await state(child)).toBe('unscheduled');
  await resolve(parents[2], 'completed');
  expect(await state(child)).toBe('pending');
  // It is claimable exactly once.
  await claimOne(svc, child.tq, child.taskId);
});

test('a chain A <- B <- C advances one link at a time', async () => {
  const a = await create();
  const b = await create({ dependencies: [a.taskId] });
  const c = await create({ dependencies: [b.taskId] });
  await resolve(a, 'completed');
  expect([await state(b), await state(c)]).toEqual(['pending', 'unscheduled']);
  await resolve(b, 'completed');
  expect(await state(c)).toBe('pending');
});

describe('requires', () => {
  test.each(['failed', 'exception'] as const)('A %s: all-completed B stays unscheduled, all-resolved B is scheduled', async (outcome) => {
    const a = await create();
    const strict = await create({ dependencies: [a.taskId], requires: 'all-completed' });
    const lenient = await create({ dependencies: [a.taskId], requires: 'all-resolved' });
    await resolve(a, outcome);
    expect(await state(strict)).toBe('unscheduled');
    expect(await state(lenient)).toBe('pending');
  });

  test('fan-in under all-resolved: one completed and one failed dependency schedule it', async () => {
    const a = await create();
    const b = await create();
    const child = await create({ dependencies: [a.taskId, b.taskId], requires: 'all-resolved' });
    await resolve(a, 'completed');
    expect(await state(child)).toBe('unscheduled');
    await resolve(b, 'failed');
    expect(await state(child)).toBe('pending');
  });

  test('a dependency that is already resolved counts at creation', async () => {
    const a = await create();
    await resolve(a, 'failed');
    expect(await state(await create({ dependencies: [a.taskId], requires: 'all-resolved' }))).toBe('pending');
    expect(await state(await create({ dependencies: [a.taskId], requires: 'all-completed' }))).toBe('unscheduled');
  });
});

describe('creation checks', () => {
  test('a missing dependency: 400, and the task does not exist afterwards', async () => {
    const a = await create();
    const taskId = slugid();
    const missing = slugid();
    const err = await expectError(svc.queue().createTask(taskId, taskDef(uniqueQueue(), { dependencies: [a.taskId, missing] })), 400, 'InputError');
    expect(err.message).toContain(missing);
    await expectError(svc.queue().task(taskId), 404, 'ResourceNotFound');
    await expectError(svc.queue().status(taskId), 404, 'ResourceNotFound');
    expect((await svc.queue().listDependentTasks(a.taskId)).tasks).toEqual([]);
    // Completing the existing dependency does not bring it back.
    await resolve(a, 'completed');
    await expectError(svc.queue().task(taskId), 404, 'ResourceNotFound');
  });

  test('10,000 dependencies that do not exist: a 400 after about one round of reads, and nothing written', async () => {
    const taskId = slugid();
    const deps = Array.from({ length: 10_000 }, () => slugid());
    const meter = svc.services.storage.meter;
    const before = meter.snapshot();
    const err = await expectError(svc.queue().createTask(taskId, taskDef(uniqueQueue(), { dependencies: deps })), 400, 'InputError');
    expect(err.message).toContain(deps[0]);
    const after = meter.snapshot();
    // One round of side-by-side reads (32), not a read and three writes per edge.
    expect(after.total - before.total).toBeLessThan(100);
    const writes = Object.entries(after.byOp).filter(([op, n]) => !/\.(get|query|receive|peek)/.test(op) && n !== (before.byOp[op] ?? 0));
    expect(writes).toEqual([]);
    await expectError(svc.queue().status(taskId), 404, 'ResourceNotFound');
  });

  test("a dependency that expires before the task's deadline: 400", async () => {
    const soon = new Date(Date.now() + 600_000).toJSON();
    const a = await create({ deadline: soon, expires: soon });
    const taskId = slugid();
    await expectError(svc.queue().createTask(taskId, taskDef(uniqueQueue(), { dependencies: [a.taskId] })), 400, 'InputError');
    await expectError(svc.queue().task(taskId), 404, 'ResourceNotFound');
  });
});

describe('listDependentTasks', () => {
  test('pages through every dependent with limit and continuationToken', async () => {
    const a = await create();
    const deps = await Promise.all([1, 2, 3, 4, 5].map(() => create({ dependencies: [a.taskId] })));
    const seen: string[] = [];
    let continuationToken: string | undefined;
    let pages = 0;
    do {
      const r = await svc.queue().listDependentTasks(a.taskId, { limit: 2, ...(continuationToken ? { continuationToken } : {}) });
      expect(r.taskId).toBe(a.taskId);
      expect(r.tasks.length).toBeLessThanOrEqual(2);
      for (const t of r.tasks) {
        expect(t.task.dependencies).toContain(a.taskId);
        expect(t.status.taskId).toBeDefined();
        expect(t.status.state).toBe('unscheduled');
        seen.push(t.status.taskId);
      }
      continuationToken = r.continuationToken;
      pages++;
    } while (continuationToken);
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(seen.sort()).toEqual(deps.map((d) => d.taskId).sort());
    // Without a limit: all of them in one page.
    expect((await svc.queue().listDependentTasks(a.taskId)).tasks).toHaveLength(5);
  });

  test('a task without dependents lists none; a missing task is 404; a bad token is 400', async () => {
    const a = await create();
    expect(await svc.queue().listDependentTasks(a.taskId)).toEqual({ taskId: a.taskId, tasks: [] });
    await expectError(svc.queue().listDependentTasks(slugid()), 404, 'ResourceNotFound');
    await expectError(svc.queue().listDependentTasks(a.taskId, { continuationToken: '!!!' }), 400, 'InvalidRequestArguments');
  });

  test('needs queue:list-dependent-tasks:<taskId>', async () => {
    const a = await create();
    const as = (scopes: string[]) => svc.queue(svc.root, { authorizedScopes: scopes });
    await expectError(as(['queue:list-dependent-tasks:' + slugid()]).listDependentTasks(a.taskId), 403, 'InsufficientScopes');
    expect((await as([`queue:list-dependent-tasks:${a.taskId}`]).listDependentTasks(a.taskId)).tasks).toEqual([]);
  });
});
