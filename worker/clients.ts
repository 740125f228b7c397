/**
 * The real queue clients: taskcluster-client v87 (ESM, loaded with a dynamic import) for
 * everything current, and v10 (`tc10`, CommonJS) for the deprecated pollTaskUrls and claimTask.
 */
import fs from 'node:fs';
import type { Credentials, RunQueue } from './types';
import type { ObjectUpload } from './artifacts';
import type { ClaimWorkQueue } from './protocols/claim-work';
import type { LegacyQueue } from './protocols/poll-task-urls';

export async function modernQueues(rootUrl: string): Promise<(credentials: Credentials) => RunQueue & ClaimWorkQueue> {
  const tc = (await import('taskcluster-client')).default;
  return (credentials: Credentials) => new tc.Queue({ rootUrl, credentials });
}

/** Object uploads with taskcluster-client's own `upload` helper (dataInline or putUrl, hashes). */
export async function objectUploader(rootUrl: string): Promise<ObjectUpload> {
  const tc = (await import('taskcluster-client')).default;
  return async (o) => {
    await tc.upload({
      projectId: o.projectId,
      name: o.name,
      contentType: o.contentType,
      contentLength: o.size,
      expires: o.expires,
      uploadId: o.uploadId,
      object: new tc.Object({ rootUrl, credentials: o.credentials }),
      streamFactory: async () => fs.createReadStream(o.file),
    });
  };
}

export function legacyQueue(rootUrl: string, credentials: Credentials): LegacyQueue {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const tc10 = require('tc10');
  return new tc10.Queue({ rootUrl, credentials });
}
