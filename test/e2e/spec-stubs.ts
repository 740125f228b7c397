/**
 * Stand-ins, for the worker's end-to-end tests only, for queue endpoints built on other branches
 * (createArtifact: issue 5; pollTaskUrls: issue 4). Each is installed only while the route table
 * lacks the real endpoint, so once those land the same tests run against the real thing. They
 * follow the documented contract closely enough for a worker to notice deviations:
 *  - createArtifact (scope queue:create-artifact:<taskId>/<runId>, 409 unless the run is running
 *    or recently exception): `s3` answers a putUrl on a small in-memory blob server, `error` is
 *    recorded;
 *  - pollTaskUrls: Azure service SAS URLs with "process" permission on the real pending queues in
 *    Azurite, highest priority first, with `{{messageId}}`/`{{popReceipt}}` delete templates.
 * installStubs() must run before startTestService (the host compiles the route table at start).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { QueueSASPermissions } from '@azure/storage-queue';
import { routes } from '../../shared/api/route-table';
import type { RouteDef } from '../../shared/api/types';
import { ApiError } from '../../shared/errors';
import { PRIORITIES } from '../../shared/api/schemas';

export const hasRoute = (name: string) => routes.some((r) => r.service === 'queue' && r.name === name);
/** True once the real artifact endpoints are merged. */
export const realArtifacts = hasRoute('createArtifact') && hasRoute('getArtifact');
/** True once the real pollTaskUrls is merged. */
export const realPollTaskUrls = hasRoute('pollTaskUrls');

export interface StubArtifact {
  storageType: string;
  contentType?: string;
  expires: string;
  reason?: string;
  message?: string;
  body?: Buffer;
  /** Header names of the PUT that uploaded the body. */
  putHeaders?: string[];
}

/** Exception runs accept artifacts this long after resolution (the queue allows 25 min). */
const EXCEPTION_UPLOAD_WINDOW_MS = 25 * 60_000;

export class ArtifactStub {
  readonly artifacts = new Map<string, StubArtifact>();
  private server?: http.Server;
  url = '';

  static key(taskId: string, runId: number, name: string): string {
    return `${taskId}/${runId}/${name}`;
  }

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const key = decodeURIComponent((req.url ?? '/').slice(1));
        const a = this.artifacts.get(key);
        if (req.method !== 'PUT' || !a || a.storageType !== 's3') {
          res.writeHead(404).end();
          return;
        }
        const body = Buffer.concat(chunks);
        if (req.headers['content-type'] !== a.contentType || Number(req.headers['content-length']) !== body.length) {
          res.writeHead(400).end('content-type must match createArtifact and content-length the body');
          return;
        }
        a.body = body;
        a.putHeaders = Object.keys(req.headers).sort();
        res.writeHead(201).end();
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  route(): RouteDef {
    return {
      name: 'createArtifact',
      service: 'queue',
      method: 'POST',
      route: '/task/<taskId>/runs/<runId>/artifacts/<name*>',
      scopes: 'queue:create-artifact:<taskId>/<runId>',
      handler: async (req) => {
        const { taskId, name } = req.params;
        const runId = Number(req.params.runId);
        const t = await req.services.tasks.load(taskId);
        const run = t?.runs[runId];
        if (!t || !run) throw new ApiError('InputError', `run ${taskId}/${runId} not found`);
        const recentException = run.state === 'exception' && run.resolved && Date.now() - new Date(run.resolved).getTime() < EXCEPTION_UPLOAD_WINDOW_MS;
        if (run.state !== 'running' && !recentException) throw new ApiError('RequestConflict', `run ${taskId}/${runId} is ${run.state}`);
        const b = req.body ?? {};
        const key = ArtifactStub.key(taskId, runId, name);
        if (b.storageType === 's3') {
          this.artifacts.set(key, { storageType: 's3', contentType: b.contentType, expires: b.expires });
          return { status: 200, body: { storageType: 's3', putUrl: `${this.url}/${encodeURIComponent(key)}`, expires: new Date(Date.now() + 45 * 60_000).toJSON(), contentType: b.contentType } };
        }
        if (b.storageType === 'error') {
          this.artifacts.set(key, { storageType: 'error', reason: b.reason, message: b.message, expires: b.expires });
          return { status: 200, body: { storageType: 'error' } };
        }
        throw new ApiError('InputValidationError', `stub supports s3 and error artifacts, got ${b.storageType}`);
      },
    };
  }
}

function pollTaskUrlsRoute(): RouteDef {
  return {
    name: 'pollTaskUrls',
    service: 'queue',
    method: 'GET',
    route: '/poll-task-url/<provisionerId>/<workerType>',
    scopes: {
      AnyOf: ['queue:poll-task-urls:<provisionerId>/<workerType>', { AllOf: ['queue:poll-task-urls', 'assume:worker-type:<provisionerId>/<workerType>'] }],
    },
    handler: async (req) => {
      const taskQueueId = `${req.params.provisionerId}/${req.params.workerType}`;
      const now = Date.now();
      const expiresOn = new Date(now + 30 * 60_000);
      const queues = [];
      for (const p of PRIORITIES) {
        const client = req.services.pending.queue(taskQueueId, p).client;
        await client.createIfNotExists();
        const sas = (await client.generateSasUrl({ permissions: QueueSASPermissions.parse('p'), startsOn: new Date(now - 15 * 60_000), expiresOn })).split('?')[1];
        queues.push({
          signedPollUrl: `${client.url}/messages?visibilitytimeout=300&${sas}`,
          signedDeleteUrl: `${client.url}/messages/{{messageId}}?popreceipt={{popReceipt}}&${sas}`,
        });
      }
      return { status: 200, body: { queues, expires: expiresOn.toJSON() } };
    },
  };
}

export interface Stubs {
  artifacts?: ArtifactStub;
  close(): Promise<void>;
}

export async function installStubs(): Promise<Stubs> {
  const added: RouteDef[] = [];
  let artifacts: ArtifactStub | undefined;
  if (!hasRoute('createArtifact')) {
    artifacts = new ArtifactStub();
    await artifacts.start();
    added.push(artifacts.route());
  }
  if (!realPollTaskUrls) added.push(pollTaskUrlsRoute());
  routes.push(...added);
  return {
    artifacts,
    close: async () => {
      for (const r of added) routes.splice(routes.indexOf(r), 1);
      await artifacts?.stop();
    },
  };
}
