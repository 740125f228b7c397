/**
 * Outbox properties: an event rides on its history row, split below the 64 KiB property limit when
 * large, and reads back identical.
 */
import { outboxProps, outboxEvent, attachToHistoryRows, readTaskOutbox } from '../../shared/events/outbox';
import { MemoryStorage } from '../../shared/storage/memory';
import { emptyPagesStorage } from '../helpers/empty-pages';
import { historyRowKey } from '../../shared/ops/history';
import type { QueueEvent } from '../../shared/events/exchanges';

const event = (size: number): QueueEvent => ({
  id: 'T.1',
  seq: 1,
  exchange: 'exchange/taskcluster-queue/v1/task-defined',
  routingKey: 'primary.T._._._.p.w.s.G._',
  routes: [],
  payload: { version: 1, task: { tags: { big: 'x'.repeat(size) } } },
});

test('a small event is one property', () => {
  const props = outboxProps(event(10));
  expect(Object.keys(props)).toEqual(['event']);
  expect(outboxEvent(props)).toEqual(event(10));
});

test('a large event is split into parts that each fit a table property, and reads back whole', () => {
  const big = event(100_000);
  const props = outboxProps(big);
  expect(props.eventParts).toBe(4);
  for (const [k, v] of Object.entries(props)) if (k !== 'eventParts') expect((v as string).length).toBeLessThanOrEqual(30_000);
  expect(outboxEvent(props)).toEqual(big);
});

test('a row without an event (a reclaim) has none', () => {
  expect(outboxEvent({ entry: '{}' })).toBeUndefined();
});

test('events go on the history rows of their seqs only', () => {
  const rows = [1, 2, 3].map((seq) => ({ partitionKey: 'T', rowKey: historyRowKey('T', seq), entry: '{}' }));
  attachToHistoryRows(rows, [{ ...event(1), seq: 3 }]);
  expect(rows.map((r) => 'event' in r)).toEqual([false, false, true]);
});

test('the sweep reads every event it wants though the first page of the range is empty and pages are short', async () => {
  const storage = new MemoryStorage('ob');
  await storage.table('Tasks').create();
  const rows = [1, 2, 3, 4].map((seq) => ({ partitionKey: 'T', rowKey: historyRowKey('T', seq), entry: '{}' }));
  attachToHistoryRows(
    rows,
    [1, 2, 4].map((seq) => ({ ...event(1), seq })),
  );
  for (const r of rows) await storage.table('Tasks').insert(r);
  const events = await readTaskOutbox(emptyPagesStorage(storage, { pageSize: 2 }), 'T', [1, 2, 4]);
  expect(events.map((e) => e.seq)).toEqual([1, 2, 4]);
});
