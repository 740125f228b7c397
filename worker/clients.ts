/**
 * The real queue clients: taskcluster-client v87 (ESM, loaded with a dynamic import) for
 * everything current, and v10 (`tc10`, CommonJS) for the deprecated pollTaskUrls and claimTask.
 */
import type { Credentials, RunQueue } from './types';
import type { ClaimWorkQueue } from './protocols/claim-work';
import type { LegacyQueue } from './protocols/poll-task-urls';

export async function modernQueues(rootUrl: string): Promise<(credentials: Credentials) => RunQueue & ClaimWorkQueue> {
  const tc = (await import('taskcluster-client')).default;
  return (credentials: Credentials) => new tc.Queue({ rootUrl, credentials });
}

export function legacyQueue(rootUrl: string, credentials: Credentials): LegacyQueue {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const tc10 = require('tc10');
  return new tc10.Queue({ rootUrl, credentials });
}
