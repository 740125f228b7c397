/**
 * (f) The raw Azurite ceiling: the storage calls of one lifecycle's foreground path, issued
 * directly with the SDK clients (no HTTP service, no auth, no JSON handling), so the service's
 * throughput reads as a fraction of what the storage emulator itself allows.
 */
import crypto from 'node:crypto';
import { TableClient, TableTransaction } from '@azure/data-tables';
import { QueueServiceClient, StorageSharedKeyCredential, QueueClient } from '@azure/storage-queue';
import { parseConnectionString } from '../shared/storage/storage';
import { encodeTask, TaskRecord } from '../shared/tasks/model';
import { newTaskId, sleep, taskDef } from './harness';
import { round, runLoops } from './stats';

/** The sequence mirrored from createTask, claimWork (one hint) and reportCompleted today. */
export const RAW_SEQUENCE = [
  'TaskGroups.transaction (group meta + member)',
  'deadline.put',
  'pending.put',
  'Tasks.insert',
  'pending.get',
  'Tasks.get',
  'claim.put',
  'Tasks.update',
  'pending.delete',
  'Tasks.get',
  'Tasks.update',
];

export interface RawResult {
  concurrency: number;
  lifecycles: number;
  seconds: number;
  perSecond: number;
  callsPerLifecycle: number;
  transactionsPerSecond: number;
}

const b64 = (x: unknown) => Buffer.from(JSON.stringify(x)).toString('base64');

function record(taskId: string, taskQueueId: string): TaskRecord {
  const d: any = taskDef(taskQueueId);
  return {
    taskId,
    definition: {
      provisionerId: 'bench',
      workerType: 'raw',
      taskQueueId,
      schedulerId: '-',
      projectId: 'none',
      taskGroupId: taskId,
      dependencies: [],
      requires: 'all-completed',
      routes: [],
      priority: 'lowest',
      retries: 5,
      created: d.created,
      deadline: d.deadline,
      expires: new Date(Date.now() + 365 * 86400_000).toJSON(),
      scopes: [],
      payload: d.payload,
      metadata: d.metadata,
      tags: {},
      extra: {},
    },
    runs: [{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: d.created, hintId: newTaskId() }],
    retriesLeft: 5,
    takenUntil: '',
    hasDependents: false,
    dependentsNotified: -1,
  };
}

export async function rawCeiling(connection: string, opts: { concurrency: number; durationMs: number }): Promise<RawResult> {
  const c = parseConnectionString(connection);
  const prefix = `raw${crypto.randomBytes(3).toString('hex')}`;
  const tableCs = `DefaultEndpointsProtocol=http;AccountName=${c.accountName};AccountKey=${c.accountKey};TableEndpoint=${c.tableEndpoint}`;
  const table = (n: string) => TableClient.fromConnectionString(tableCs, `${prefix}${n}`, { allowInsecureConnection: true });
  const tasks = table('Tasks');
  const groups = table('Groups');
  const qs = new QueueServiceClient(c.queueEndpoint, new StorageSharedKeyCredential(c.accountName, c.accountKey));
  const queue = (n: string): QueueClient => qs.getQueueClient(`${prefix}-${n}`);
  const pending = queue('pending');
  const deadline = queue('deadline');
  const claim = queue('claim');
  await Promise.all([tasks.createTable(), groups.createTable(), pending.create(), deadline.create(), claim.create()]);

  let calls = 0;
  const call = <T>(p: Promise<T>) => {
    calls++;
    return p;
  };
  let lifecycles = 0;
  const stopAt = Date.now() + opts.durationMs;
  const t0 = performance.now();
  await runLoops(opts.concurrency, async () => {
    if (Date.now() >= stopAt) return false;
    const taskId = newTaskId();
    const rec = record(taskId, 'bench/raw');
    const tx = new TableTransaction();
    tx.createEntity({ partitionKey: taskId, rowKey: '~group', schedulerId: '-', expires: rec.definition.expires, sealed: '' });
    tx.upsertEntity({ partitionKey: taskId, rowKey: taskId, expires: rec.definition.expires }, 'Replace');
    await call(groups.submitTransaction(tx.actions));
    await call(deadline.sendMessage(b64({ taskId, deadline: rec.definition.deadline }), { visibilityTimeout: 3600, messageTimeToLive: -1 }));
    await call(pending.sendMessage(b64({ taskId, runId: 0, hintId: rec.runs[0].hintId, sig: 'x'.repeat(43) }), { messageTimeToLive: 3600 }));
    await call(tasks.createEntity(encodeTask(rec)));

    // The worker side: take any hint (another loop's is as good), claim that task, resolve it.
    let msg;
    for (;;) {
      const r = await call(pending.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 300 }));
      msg = r.receivedMessageItems[0];
      if (msg) break;
      await sleep(1);
    }
    const claimedId = JSON.parse(Buffer.from(msg.messageText, 'base64').toString()).taskId as string;
    const row = await call(tasks.getEntity(claimedId, 'task'));
    const takenUntil = new Date(Date.now() + 1200_000).toJSON();
    await call(claim.sendMessage(b64({ taskId: claimedId, runId: 0, takenUntil }), { visibilityTimeout: 1200, messageTimeToLive: -1 }));
    // Like the service: decode the row, change the runs, write the whole row back under its ETag.
    const base = { ...rec, taskId: claimedId };
    const running: TaskRecord = { ...base, takenUntil, runs: [{ ...rec.runs[0], state: 'running', takenUntil }] };
    await call(tasks.updateEntity(encodeTask(running), 'Replace', { etag: row.etag }));
    await call(pending.deleteMessage(msg.messageId, msg.popReceipt));
    const again = await call(tasks.getEntity(claimedId, 'task'));
    const completed: TaskRecord = { ...base, runs: [{ ...rec.runs[0], state: 'completed' }] };
    await call(tasks.updateEntity(encodeTask(completed), 'Replace', { etag: again.etag }));
    lifecycles++;
    return true;
  });
  const seconds = (performance.now() - t0) / 1000;
  return {
    concurrency: opts.concurrency,
    lifecycles,
    seconds: round(seconds),
    perSecond: round(lifecycles / seconds, 1),
    callsPerLifecycle: round(calls / Math.max(1, lifecycles)),
    transactionsPerSecond: round(calls / seconds),
  };
}
