/**
 * Artifact endpoints: create (and the object-only finish), downloads (303 / 424), content
 * descriptors, info and listings.
 */
import '../artifact-schemas';
import { ApiRequest, ApiResponse, RouteDef, ok } from '../types';
import { conflict, inputError, notFound } from '../../errors';
import { decodeToken, encodeToken, isPageToken, pageLimit } from '../continuation';
import { createArtifact } from '../../artifacts/create';
import { contentOf, resolveArtifact } from '../../artifacts/read';
import { ArtifactStore } from '../../artifacts/store';
import { ArtifactRecord, isPresent, listingEntry, objectNameFor } from '../../artifacts/model';
import { UNCHANGED } from '../../storage/storage';
import { objectFinished, simpleUrl } from '../../objects/objects';
import type { Template } from '../../auth/scopes';

const GET_ARTIFACT_SCOPES: Template = { AllOf: [{ for: 'name', in: 'names', each: 'queue:get-artifact:<name>' }] };
const STORAGE_TYPE_HEADER = 'x-taskcluster-artifact-storage-type';

const runIdOf = (req: ApiRequest) => Number(req.params.runId);
const authorizeNames = (req: ApiRequest) => (names: string[]) => req.authorize({ names });

/** The latest runId of a task; 404 when the task is missing or has no runs. */
async function latestRunId(req: ApiRequest): Promise<number> {
  const t = await req.services.tasks.load(req.params.taskId);
  if (!t) throw notFound('Task not found');
  if (t.runs.length === 0) throw notFound("Task doesn't have any runs");
  return t.runs.length - 1;
}

/** 303 to the bytes (s3, object, reference) with a JSON `{storageType, url}` body, or 424 for errors. */
function download(req: ApiRequest, runId: number): Promise<ApiResponse> {
  return redirectToArtifact(req, req.params.taskId, runId, req.params.name, authorizeNames(req));
}

/** `download` for any task and run (the Index's findArtifactFromTask names the task by index path). */
export async function redirectToArtifact(
  req: ApiRequest,
  taskId: string,
  runId: number,
  name: string,
  authorize: (names: string[]) => Promise<void>,
): Promise<ApiResponse> {
  const a = await resolveArtifact(req.services, taskId, runId, name, authorize);
  const headers: Record<string, string> = { [STORAGE_TYPE_HEADER]: a.storageType };
  if (a.storageType === 'object') {
    // The object's simple download URL, as Taskcluster redirects to.
    const url = await simpleUrl(req.services, objectNameFor(a.taskId, a.runId, a.name));
    return { status: 303, headers: { ...headers, location: url }, body: { storageType: 'object', url } };
  }
  const c = await contentOf(req.services, a);
  if (c.storageType === 'error') return { status: 424, headers, body: { reason: c.reason, message: c.message } };
  if (c.storageType === 'object') throw new Error('unreachable: object artifacts are handled above');
  return { status: 303, headers: { ...headers, location: c.url }, body: { storageType: c.storageType, url: c.url } };
}

async function content(req: ApiRequest, runId: number): Promise<ApiResponse> {
  const a = await resolveArtifact(req.services, req.params.taskId, runId, req.params.name, authorizeNames(req));
  return ok(await contentOf(req.services, a));
}

async function info(req: ApiRequest, runId: number): Promise<ApiResponse> {
  const a = await new ArtifactStore(req.services.storage).get(req.params.taskId, runId, req.params.name);
  if (!a || !isPresent(a)) throw notFound('Artifact not found');
  return ok(listingEntry(a));
}

async function list(req: ApiRequest, runId: number): Promise<ApiResponse> {
  const limit = pageLimit(req.query.limit);
  const token = decodeToken(req.query.continuationToken, isPageToken);
  const page = await new ArtifactStore(req.services.storage).page(req.params.taskId, runId, limit, token?.c);
  // Unfinished object artifacts are not listed (a page may then hold fewer than `limit`).
  const body: Record<string, unknown> = { artifacts: page.items.filter(isPresent).map(listingEntry) };
  if (page.continuation) body.continuationToken = encodeToken({ c: page.continuation });
  return ok(body);
}

export const artifactRoutes: RouteDef[] = [
  {
    name: 'createArtifact',
    title: 'Create Artifact',
    description: 'Create an artifact of a running run: s3 artifacts get a URL to PUT the bytes to; reference, link and error artifacts are recorded as given.',
    stability: 'stable',
    output: 'post-artifact-response',
    service: 'queue',
    method: 'POST',
    route: '/task/<taskId>/runs/<runId>/artifacts/<name*>',
    scopes: 'queue:create-artifact:<taskId>/<runId>',
    input: 'create-artifact-request',
    handler: async (req) => ok(await createArtifact(req.services, req.params.taskId, runIdOf(req), req.params.name, req.body)),
  },
  {
    name: 'finishArtifact',
    title: 'Finish Artifact',
    stability: 'stable',
    service: 'queue',
    method: 'PUT',
    route: '/task/<taskId>/runs/<runId>/artifacts/<name*>',
    scopes: 'queue:create-artifact:<taskId>/<runId>',
    input: 'finish-artifact-request',
    description: 'Marks an object artifact present once its data is uploaded through the Object API (finishUpload); other types cannot be finished.',
    handler: async (req) => {
      const { taskId, name } = req.params;
      const runId = runIdOf(req);
      const store = new ArtifactStore(req.services.storage);
      const [a, t] = await Promise.all([store.get(taskId, runId, name), req.services.tasks.load(taskId)]);
      if (!a || !t || !t.runs[runId]) throw notFound(`Artifact with taskId \`${taskId}\`, runId ${runId}, name \`${name}\` not found`);
      if (a.storageType !== 'object') throw inputError('Only object artifacts can be finished');
      if (isPresent(a)) return { status: 204 }; // a repeat
      const uploadMatches = (x: ArtifactRecord) => req.body.uploadId === x.details.uploadId;
      if (!uploadMatches(a)) throw inputError('given uploadId does not match that for the artifact');
      if (!(await objectFinished(req.services, objectNameFor(taskId, runId, name)))) throw inputError('Object storing artifact data does not exist');
      // The artifact becomes visible now, so artifact-created goes out now (as Taskcluster's): its
      // sweep trigger is put first, and the reaper delivers it if the finished row is there.
      const finished = { ...a, details: {} };
      const announce = await req.services.events.prepareArtifact(t, runId, finished);
      // Guarded by the ETag read above; after a lost race, decided again on the row as it is: a
      // concurrent repeat finished it (done), a re-create or expiry replaced it (refused as such).
      await store.modify(
        a,
        (now) => {
          if (now?.storageType !== 'object') throw conflict(`artifact ${name} changed meanwhile; retry`);
          if (isPresent(now)) return UNCHANGED;
          if (!uploadMatches(now)) throw inputError('given uploadId does not match that for the artifact');
          return { ...now, details: {} };
        },
        a,
      );
      await req.services.events.delivered(announce);
      return { status: 204 };
    },
  },
  {
    name: 'getArtifact',
    title: 'Get Artifact Data from Run',
    description: 'Redirect (303) to the artifact of a run, with the URL in the body; error artifacts answer 424 with their reason.',
    stability: 'stable',
    output: 'get-artifact-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/runs/<runId>/artifacts/<name*>',
    scopes: GET_ARTIFACT_SCOPES,
    handler: (req) => download(req, runIdOf(req)),
  },
  {
    name: 'getLatestArtifact',
    title: 'Get Artifact Data from Latest Run',
    description: 'As getArtifact, for the latest run of the task.',
    stability: 'stable',
    output: 'get-artifact-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/artifacts/<name*>',
    scopes: GET_ARTIFACT_SCOPES,
    handler: async (req) => {
      // Permission first, so a 404 for the task reveals nothing to a caller without it.
      await req.authorize({ names: [req.params.name] });
      return download(req, await latestRunId(req));
    },
  },
  {
    name: 'listArtifacts',
    title: 'Get Artifacts from Run',
    description: 'The artifacts of a run, a page at a time.',
    stability: 'stable',
    output: 'list-artifacts-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/runs/<runId>/artifacts',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-artifacts:<taskId>:<runId>',
    handler: async (req) => {
      const runId = runIdOf(req);
      if (runId > (await latestRunId(req))) throw notFound(`Task with taskId: \`${req.params.taskId}\` has no run with runId: ${runId}`);
      return list(req, runId);
    },
  },
  {
    name: 'listLatestArtifacts',
    title: 'Get Artifacts from Latest Run',
    description: 'The artifacts of the latest run of a task, a page at a time.',
    stability: 'stable',
    output: 'list-artifacts-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/artifacts',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-artifacts:<taskId>',
    handler: async (req) => list(req, await latestRunId(req)),
  },
  {
    name: 'artifactInfo',
    title: 'Get Artifact Information From Run',
    description: 'What is known about an artifact of a run, without its content.',
    stability: 'stable',
    output: 'artifact-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/runs/<runId>/artifact-info/<name*>',
    scopes: 'queue:list-artifacts:<taskId>:<runId>',
    handler: (req) => info(req, runIdOf(req)),
  },
  {
    name: 'latestArtifactInfo',
    title: 'Get Artifact Information From Latest Run',
    description: 'As artifactInfo, for the latest run of the task.',
    stability: 'stable',
    output: 'artifact-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/artifact-info/<name*>',
    scopes: 'queue:list-artifacts:<taskId>',
    handler: async (req) => info(req, await latestRunId(req)),
  },
  {
    name: 'artifact',
    title: 'Get Artifact Content From Run',
    description: 'Where to fetch the content of an artifact of a run (a URL), or the error it records.',
    stability: 'stable',
    output: 'artifact-content-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/runs/<runId>/artifact-content/<name*>',
    scopes: GET_ARTIFACT_SCOPES,
    handler: (req) => content(req, runIdOf(req)),
  },
  {
    name: 'latestArtifact',
    title: 'Get Artifact Content From Latest Run',
    description: 'As artifact, for the latest run of the task.',
    stability: 'stable',
    output: 'artifact-content-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/artifact-content/<name*>',
    scopes: GET_ARTIFACT_SCOPES,
    handler: async (req) => content(req, await latestRunId(req)),
  },
];
