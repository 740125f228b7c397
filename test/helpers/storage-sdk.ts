/**
 * Storage seen from outside the service, through the Azure SDKs: for tests that inspect queues
 * and endpoints the storage port deliberately does not expose.
 */
import { QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { BlobServiceClient } from '@azure/storage-blob';
import { TableServiceClient } from '@azure/data-tables';
import type { Services } from '../../shared/services';

/** The SDK client of a queue of the service's storage account, by its full name. */
export function sdkQueue(services: Services, fullName: string): QueueClient {
  return QueueServiceClient.fromConnectionString(services.config.storageConnection).getQueueClient(fullName);
}

/** The account's endpoints, without a trailing '/'. */
export function endpoints(services: Services): { queueEndpoint: string; tableEndpoint: string; blobEndpoint: string } {
  const cs = services.config.storageConnection;
  const trim = (u: string) => u.replace(/\/+$/, '');
  return {
    queueEndpoint: trim(QueueServiceClient.fromConnectionString(cs).url),
    blobEndpoint: trim(BlobServiceClient.fromConnectionString(cs).url),
    tableEndpoint: trim(TableServiceClient.fromConnectionString(cs, { allowInsecureConnection: true }).url),
  };
}
