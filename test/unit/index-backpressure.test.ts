/**
 * Index writes are off the request path until a partition falls INDEX_BACKLOG_MAX actions behind;
 * then a task write's index follow-up waits for its own write (shared/ops/read-models.ts).
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { INDEX_BACKLOG_MAX, IndexBatcher, QUEUES_PK, queuePk } from '../../shared/ops/indexes';
import { ReadModels } from '../../shared/ops/read-models';
import { planWrite } from '../../shared/lifecycle/planner';
import type { TaskRecord } from '../../shared/tasks/model';
import type { Logger } from '../../shared/log';

const TQ = 'prov/backlog';
const HOUR_MS = 3600_000;
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;

function pendingTask(taskId: string): TaskRecord {
  const now = new Date().toJSON();
  return {
    taskId,
    runs: [{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: now }],
    retriesLeft: 5,
    takenUntil: '',
    hasDependents: false,
    dependentsNotified: -1,
    definition: {
      taskQueueId: TQ,
      taskGroupId: taskId,
      deadline: new Date(Date.now() + HOUR_MS).toJSON(),
      expires: new Date(Date.now() + 2 * HOUR_MS).toJSON(),
      created: now,
      metadata: { name: 'build', description: '', owner: '', source: 'https://x' },
      routes: [],
      tags: {},
    } as unknown as TaskRecord['definition'],
  };
}

/** Resolves to whether `p` settled within a few event-loop turns. */
async function settledSoon(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  return done;
}

async function setup() {
  const storage = new MemoryStorage('backlog');
  await storage.table('Indexes').create();
  // A slow partition: index transactions wait until the test opens the gate.
  let open: () => void = () => undefined;
  const gate = new Promise<void>((r) => (open = r));
  const table = storage.table.bind(storage);
  storage.table = ((name: Parameters<typeof table>[0]) => {
    const t = table(name);
    if (name !== 'Indexes') return t;
    const transact = t.transact.bind(t);
    // (The task queue's registry row, in partition `queues`, is not held.)
    const held = (actions: Parameters<typeof transact>[0]) => actions.some((a) => ('entity' in a ? a.entity.partitionKey : a.partitionKey) !== QUEUES_PK);
    return Object.assign(Object.create(Object.getPrototypeOf(t)), t, {
      transact: (actions: Parameters<typeof transact>[0]) => (held(actions) ? gate.then(() => transact(actions)) : transact(actions)),
    });
  }) as typeof storage.table;
  // Lingering an hour: only full transactions (or a flush) go out.
  const batcher = new IndexBatcher(storage, HOUR_MS);
  const readModels = new ReadModels(storage, quiet, batcher);
  // A new task's read-model writes, as its plan makes them.
  const written = (t: TaskRecord) =>
    readModels.write(planWrite({ record: { name: 'create', scheduled: t.runs.length > 0 }, next: t, effects: [] }, new Date(), undefined).readModel!);
  return { storage, batcher, open, observer: { written } };
}

test('a task write does not wait for its index write while the partition keeps up', async () => {
  const { batcher, observer, open } = await setup();
  expect(await settledSoon(observer.written(pendingTask('taskA')))).toBe(true);
  expect(batcher.backlogged(queuePk(TQ))).toBe(false);
  open();
  await batcher.settled();
});

test('behind by INDEX_BACKLOG_MAX actions, a task write waits until its index write is out', async () => {
  const { storage, batcher, observer, open } = await setup();
  const pk = queuePk(TQ);
  // One full transaction in flight (held at the gate) and INDEX_BACKLOG_MAX actions behind it.
  const count = INDEX_BACKLOG_MAX + 100;
  const filler = Array.from({ length: count }, (_, i) => ({ op: 'upsert' as const, row: { partitionKey: pk, rowKey: `z~${String(i).padStart(5, '0')}` } }));
  const queued = Promise.all(Array.from({ length: count / 100 }, (_, k) => batcher.apply(pk, filler.slice(k * 100, (k + 1) * 100))));
  expect(batcher.backlogged(pk)).toBe(true);
  const waiting = observer.written(pendingTask('taskB'));
  expect(await settledSoon(waiting)).toBe(false);
  open();
  await batcher.settled();
  await Promise.all([waiting, queued]);
  // Everything landed, the waiting task's pending row included.
  let rows = 0;
  let continuation: string | undefined;
  do {
    const page = await storage.table('Indexes').page({ partitionKey: pk }, 1000, continuation);
    rows += page.items.length;
    continuation = page.continuation;
  } while (continuation);
  expect(rows).toBe(count + 2); // the filler, the pending row and the by-name row
  expect(batcher.backlogged(pk)).toBe(false);
});
