/**
 * The real queue clients: taskcluster-client v87 (ESM, loaded with a dynamic import) for
 * everything current, and v10 (`tc10`, CommonJS) for the deprecated pollTaskUrls and claimTask.
 */
import fs from 'node:fs';
import type { Credentials, RunQueue } from './types';
import type { ObjectUpload } from './artifacts';
import type { ClaimWorkQueue } from './protocols/claim-work';
import type { LegacyQueue } from './protocols/poll-task-urls';

/** This queue's calls that taskcluster-client v87 does not know. */
const EXTENSIONS = ['suspendRun', 'createLiveLog'];

/** Where this queue serves its own API reference (with its extension calls). */
const referenceUrl = (rootUrl: string) => `${rootUrl.replace(/\/$/, '')}/api/references/queue/v1/api.json`;

export async function modernQueues(rootUrl: string): Promise<(credentials: Credentials) => RunQueue & ClaimWorkQueue> {
  const tc = (await import('taskcluster-client')).default;
  // Extensions v87 does not know (EXTENSIONS): a client for them is built with createClient from
  // the served reference, fetched on first use (a failed fetch is tried again next time).
  let ext: Promise<any> | undefined;
  const extClient = () =>
    (ext ??= (async () => {
      const res = await fetch(referenceUrl(rootUrl));
      if (!res.ok) throw Object.assign(new Error(`fetching the queue reference: ${res.status}`), { statusCode: res.status >= 500 ? res.status : undefined });
      const ref = (await res.json()) as { entries: { name: string }[] };
      const entries = ref.entries.filter((e) => EXTENSIONS.includes(e.name));
      if (!entries.length) throw Object.assign(new Error(`this queue does not serve ${EXTENSIONS.join(' or ')}`), { statusCode: 404 });
      return tc.createClient({ ...ref, entries }, 'queue');
    })().catch((err) => {
      ext = undefined;
      throw err;
    }));
  return (credentials: Credentials) =>
    Object.assign(new tc.Queue({ rootUrl, credentials }), {
      suspendRun: async (taskId: string, runId: number, payload: { continuation: unknown; resumeAt: string }) =>
        new (await extClient())({ rootUrl, credentials }).suspendRun(taskId, runId, payload),
      createLiveLog: async (taskId: string, runId: number) => new (await extClient())({ rootUrl, credentials }).createLiveLog(taskId, runId),
    });
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
