/**
 * Input that would store more than Azure Storage holds gets a clear 4xx in Taskcluster's error
 * shape, never a 500 (the in-memory adapter refuses it with Azure's codes, as Azure does).
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

async function statusOf(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err: any) {
    return err.statusCode;
  }
}

const big = (kib: number) => 'x'.repeat(kib * 1024);

test('a hook whose task template is larger than a table property holds', async () => {
  const hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const status = await statusOf(
    hooks.createHook('limits', `h${slugid().slice(0, 8).toLowerCase()}`, {
      metadata: { name: 'big', description: 'big', owner: 'tester@example.com' },
      schedule: [],
      task: { ...taskDef(uniqueQueue()), payload: { blob: big(200) } },
    }),
  );
  expect(status).toBeGreaterThanOrEqual(400);
  expect(status).toBeLessThan(500);
});

test('an indexed task whose data is larger than a table property holds', async () => {
  const index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const status = await statusOf(
    index.insertTask('limits.big', { taskId: slugid(), rank: 0, data: { blob: big(100) }, expires: new Date(Date.now() + 3600_000).toJSON() }),
  );
  expect(status).toBeGreaterThanOrEqual(400);
  expect(status).toBeLessThan(500);
});

test('a task with tags and extra larger than its row holds', async () => {
  const tags = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`t${i}`, big(3)]));
  const status = await statusOf(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { tags })));
  expect(status).toBeGreaterThanOrEqual(400);
  expect(status).toBeLessThan(500);
});

test('names longer than a table key holds: an index namespace, an artifact name', async () => {
  const index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const long = Array.from({ length: 60 }, () => 'segment-of-a-name').join('.');
  const ns = await statusOf(index.insertTask(`limits.${long}`, { taskId: slugid(), rank: 0, data: {}, expires: new Date(Date.now() + 3600_000).toJSON() }));
  expect({ ns, is4xx: ns >= 400 && ns < 500 }).toMatchObject({ is4xx: true });

  const tq = uniqueQueue();
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq));
  const { tasks } = await svc.queue().claimWork(tq, { workerGroup: 'g', workerId: 'w', tasks: 1 });
  const wq = svc.queue(tasks[0].credentials);
  const name = `public/${'x'.repeat(1100)}.log`;
  const art = await statusOf(
    wq.createArtifact(taskId, 0, name, { storageType: 'reference', url: 'https://example.com/x', expires: new Date(Date.now() + 3600_000).toJSON() }),
  );
  expect({ art, is4xx: art >= 400 && art < 500 }).toMatchObject({ is4xx: true });
});
