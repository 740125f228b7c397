/**
 * The Azure adapter's SDK pipelines: the policies that do nothing for the service's calls are gone
 * from every client (each costs CPU on every storage call), and what a call needs stays: one retry
 * policy (the SDK's, with the adapter's back-off), the shared-key signer and the serializers.
 */
import { connectionStringFor } from '../../shared/local/azurite';
import { AzureStorage, IDLE_POLICIES, corePipelineOf } from '../../shared/storage/azure';
import { QueueServiceClient } from '@azure/storage-queue';
import { BlobServiceClient } from '@azure/storage-blob';

/** No network: the clients are only built, never called. */
const CONNECTION = connectionStringFor({ blob: 1, queue: 2, table: 3 });

interface Ordered {
  getOrderedPolicies(): { name: string }[];
}

function names(pipeline: unknown): string[] {
  return (pipeline as Ordered).getOrderedPolicies().map((p) => p.name);
}

/** The adapter's clients, reached the way its calls reach them. */
function pipelinesOf(storage: AzureStorage): Record<string, string[]> {
  const internals = storage as unknown as {
    queueService: QueueServiceClient;
    artifacts: { container: { getBlockBlobClient(n: string): unknown } };
    table(n: string): { client: { pipeline: unknown } };
  };
  const queueClient = internals.queueService.getQueueClient('q');
  const blobClient = internals.artifacts.container.getBlockBlobClient('b');
  return {
    table: names((storage.table('Tasks') as unknown as { client: { pipeline: unknown } }).client.pipeline),
    queue: names(corePipelineOf(queueClient as unknown as QueueServiceClient)),
    blob: names(corePipelineOf(blobClient as unknown as BlobServiceClient)),
  };
}

test('every client runs without the idle policies and keeps exactly one retry policy and its signer', () => {
  const p = pipelinesOf(new AzureStorage(CONNECTION, 'pipe'));
  for (const [kind, list] of Object.entries(p)) {
    for (const idle of IDLE_POLICIES) expect([kind, list.includes(idle)]).toEqual([kind, false]);
    expect([kind, list.filter((n) => /retry/i.test(n))]).toEqual([kind, [kind === 'table' ? 'defaultRetryPolicy' : 'storageRetryPolicy']]);
  }
  expect(p.table).toEqual(expect.arrayContaining(['serializationPolicy', 'deserializationPolicy', 'tablesNamedKeyCredentialPolicy', 'userAgentPolicy']));
  for (const kind of ['queue', 'blob']) {
    expect(p[kind]).toEqual(
      expect.arrayContaining(['serializationPolicy', 'deserializationPolicy', 'storageSharedKeyCredentialPolicy', 'StorageCorrectContentLengthPolicy']),
    );
  }
});

test('queue and blob clients made from the service clients share the trimmed pipeline', () => {
  const storage = new AzureStorage(CONNECTION, 'pipe');
  const internals = storage as unknown as { queueService: QueueServiceClient };
  const a = corePipelineOf(internals.queueService.getQueueClient('a') as unknown as QueueServiceClient);
  const b = corePipelineOf(internals.queueService.getQueueClient('b') as unknown as QueueServiceClient);
  expect(a).toBe(b);
  expect(a).toBe(corePipelineOf(internals.queueService));
});
