/**
 * The resolution safety net (shared/tasks/triggers.ts) is group-committed: resolutions made while a
 * net is being put share the next message, which is deleted only when every member is done, so a
 * member that never finishes (a crash) still has the net fire with its task in it.
 */
import { Triggers, type ResolvedBatchTrigger, type ResolvedTrigger } from '../../shared/tasks/triggers';
import { MemoryStorage } from '../../shared/storage/memory';
import { ExpiryIndex } from '../../shared/tasks/expiry';
import { decodeMessage } from '../../shared/storage/port';

const NET_DELAY_S = 120;

async function setup() {
  const clock = { ms: Date.now() };
  const storage = new MemoryStorage('nettest', { now: () => clock.ms });
  await storage.trigger('resolved').create();
  const triggers = new Triggers({ storage, expiry: new ExpiryIndex(storage), deadlineDelayS: 0, now: () => new Date(), resolvedNetDelayS: NET_DELAY_S });
  /** Every net message still queued (visible or not), decoded. */
  const queued = async (): Promise<(ResolvedTrigger | ResolvedBatchTrigger)[]> => {
    storage.meter.byOp.clear();
    const q = storage.trigger('resolved');
    const msgs = await q.receive(32, 0);
    return msgs.map((m) => decodeMessage<ResolvedTrigger | ResolvedBatchTrigger>(m)!);
  };
  /** Moves the clock past the net's delay, so the nets still queued are visible. */
  const later = () => void (clock.ms += (NET_DELAY_S + 1) * 1000);
  return { storage, triggers, queued, later };
}

test('resolutions made side by side share one message, put once and deleted when the last is done', async () => {
  const { storage, triggers, queued, later } = await setup();
  const refs = await Promise.all(['A', 'B', 'C', 'D'].map((t) => triggers.resolved(t, 0)));
  expect(storage.meter.byOp.get('resolved.put')).toBe(1);
  expect(new Set(refs.map((r) => r.messageId)).size).toBe(1);
  for (const r of refs.slice(0, 3)) await triggers.done(r);
  expect(storage.meter.byOp.get('resolved.delete')).toBeUndefined();
  await triggers.done(refs[3]);
  expect(storage.meter.byOp.get('resolved.delete')).toBe(1);
  later();
  expect(await queued()).toEqual([]);
});

test('a resolution arriving while a net is put waits for the next one', async () => {
  const { storage, triggers } = await setup();
  const a = triggers.resolved('A', 0);
  await new Promise((r) => setImmediate(r)); // A's put is under way (or done)
  const b = await triggers.resolved('B', 0);
  expect((await a).messageId).not.toBe(b.messageId);
  expect(storage.meter.byOp.get('resolved.put')).toBe(2);
});

test('a shared net whose member never finished fires with every member in it', async () => {
  const { triggers, queued, later } = await setup();
  await triggers.resolved('A', 0);
  const refs = await Promise.all(['B', 'C', 'D'].map((t) => triggers.resolved(t, 1)));
  // B and C propagated; D crashed before it could.
  await triggers.done(refs[0]);
  await triggers.done(refs[1]);
  later();
  const fired = await queued();
  expect(fired).toContainEqual({ taskId: 'A', runId: 0 });
  expect(fired).toContainEqual({
    batch: [
      { taskId: 'B', runId: 1 },
      { taskId: 'C', runId: 1 },
      { taskId: 'D', runId: 1 },
    ],
  });
});

test('a failed net put fails every resolution waiting on it, and the next batch is put afresh', async () => {
  const { storage, triggers } = await setup();
  const q = storage.trigger('resolved');
  const put = q.put.bind(q);
  let fail = true;
  jest.spyOn(storage, 'trigger').mockImplementation(
    () =>
      ({
        ...q,
        put: (body: unknown, opts?: { visibilityS?: number }) => (fail ? Promise.reject(new Error('storage down')) : put(body, opts)),
        delete: q.delete.bind(q),
      }) as never,
  );
  const a = triggers.resolved('A', 0);
  const b = triggers.resolved('B', 0);
  await expect(a).rejects.toThrow('storage down');
  await expect(b).rejects.toThrow('storage down');
  fail = false;
  await expect(triggers.resolved('C', 0)).resolves.toEqual(expect.objectContaining({ messageId: expect.any(String) }));
});
