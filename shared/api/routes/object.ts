/**
 * The Object API (`/api/object/v1`, taskcluster-client's `Object` class) served by the same app:
 * uploads (dataInline, putUrl) and downloads (getUrl, simple) of objects kept in Blob storage, with
 * Taskcluster's scopes `object:upload:<projectId>:<name>` and `object:download:<name>`.
 */
import { heartbeatRoute, lbheartbeatRoute } from './health';
import { RouteDef, ok } from '../types';
import { registerSchema, SLUGID } from '../schemas';
import { createUpload, finishUpload, objectMetadata, simpleUrl, startDownload } from '../../objects/objects';

const projectId = { type: 'string', minLength: 1, maxLength: 500, pattern: '^([a-zA-Z0-9._/-]*)$' };
const uploadId = { type: 'string', pattern: SLUGID };
/**
 * Unknown algorithms are allowed (a newer client may send them) and kept, as Taskcluster does,
 * within bounds that keep the stored hashes far below Azure's 64 KiB per property.
 */
const MAX_HASHES = 16;
const MAX_HASH_CHARS = 512;
const hashes = {
  type: 'object',
  maxProperties: MAX_HASHES,
  propertyNames: { pattern: '^[a-z0-9-]{1,32}$' },
  properties: { sha256: { type: 'string', pattern: '^[a-z0-9]{64}$' }, sha512: { type: 'string', pattern: '^[a-z0-9]{128}$' } },
  additionalProperties: { type: 'string', maxLength: MAX_HASH_CHARS },
};
/** A Content-Type header value: printable ASCII (as HTTP headers and Azure take it), of a sane length. */
const contentType = { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' };
/** Azure's largest single Put Blob (5000 MiB). */
const MAX_PUT_BLOB_BYTES = 5000 * 1024 * 1024;

registerSchema('create-upload-request', {
  type: 'object',
  additionalProperties: false,
  properties: {
    projectId,
    uploadId,
    expires: { type: 'string', format: 'date-time' },
    hashes,
    proposedUploadMethods: {
      type: 'object',
      additionalProperties: false,
      properties: {
        dataInline: {
          type: 'object',
          additionalProperties: false,
          properties: { contentType, objectData: { type: 'string', maxLength: 10926 } },
          required: ['contentType', 'objectData'],
        },
        putUrl: {
          type: 'object',
          additionalProperties: false,
          properties: { contentType, contentLength: { type: 'integer', minimum: 0, maximum: MAX_PUT_BLOB_BYTES } },
          required: ['contentType', 'contentLength'],
        },
      },
    },
  },
  required: ['projectId', 'uploadId', 'expires', 'proposedUploadMethods'],
});
registerSchema('finish-upload-request', {
  type: 'object',
  additionalProperties: false,
  properties: { projectId, uploadId, hashes },
  required: ['projectId', 'uploadId'],
});
registerSchema('download-object-request', {
  type: 'object',
  additionalProperties: false,
  properties: {
    // Methods a newer client knows and we do not are allowed, and simply never chosen.
    acceptDownloadMethods: { type: 'object', properties: { simple: { const: true }, getUrl: { const: true } }, additionalProperties: true },
  },
  required: ['acceptDownloadMethods'],
});

const UPLOAD_SCOPES = 'object:upload:<projectId>:<name>';
const DOWNLOAD_SCOPES = 'object:download:<name>';

export const objectRoutes: RouteDef[] = [
  {
    name: 'ping',
    title: 'Ping Server',
    stability: 'stable',
    output: 'ping-response',
    service: 'object',
    method: 'GET',
    route: '/ping',
    scopes: null,
    description: 'Liveness of the Object API.',
    handler: async (req) => ok({ alive: true, uptime: (Date.now() - req.services.startedAt.getTime()) / 1000 }),
  },
  lbheartbeatRoute('object'),
  heartbeatRoute('object'),
  {
    name: 'createUpload',
    title: 'Begin upload of a new object',
    stability: 'stable',
    output: 'create-upload-response',
    service: 'object',
    method: 'PUT',
    route: '/upload/<name*>',
    scopes: UPLOAD_SCOPES,
    input: 'create-upload-request',
    description:
      'Begin (or renegotiate) the upload of an object: reserves the name for `uploadId` and picks `dataInline` (stored at once) or `putUrl` (a URL and the headers to PUT the data with).',
    handler: async (req) => {
      await req.authorize({ projectId: req.body.projectId, name: req.params.name });
      return ok(await createUpload(req.services, req.params.name, req.body));
    },
  },
  {
    name: 'finishUpload',
    title: 'Mark an upload as complete',
    stability: 'stable',
    output: 'empty-response',
    service: 'object',
    method: 'POST',
    route: '/finish-upload/<name*>',
    scopes: UPLOAD_SCOPES,
    input: 'finish-upload-request',
    description: 'Mark an upload complete, recording its hashes: the object becomes downloadable and immutable. Idempotent.',
    handler: async (req) => {
      await req.authorize({ projectId: req.body.projectId, name: req.params.name });
      await finishUpload(req.services, req.params.name, req.body);
      return ok({});
    },
  },
  {
    name: 'startDownload',
    title: 'Download object data',
    stability: 'stable',
    output: 'download-object-response',
    service: 'object',
    method: 'PUT',
    route: '/start-download/<name*>',
    scopes: DOWNLOAD_SCOPES,
    input: 'download-object-request',
    description: 'Start downloading an object: `getUrl` (a URL, its expiry and the hashes to check) or `simple` (a URL); 406 if neither is accepted.',
    handler: async (req) => ok(await startDownload(req.services, req.params.name, req.body.acceptDownloadMethods)),
  },
  {
    name: 'object',
    title: "Get an object's metadata",
    stability: 'stable',
    output: 'get-object-response',
    service: 'object',
    method: 'GET',
    route: '/metadata/<name*>',
    scopes: DOWNLOAD_SCOPES,
    description: "An object's metadata: projectId, expires and hashes.",
    handler: async (req) => ok(await objectMetadata(req.services, req.params.name)),
  },
  {
    name: 'download',
    title: "Get an object's data",
    stability: 'stable',
    output: 'object-download-redirect-response',
    service: 'object',
    method: 'GET',
    route: '/download/<name*>',
    scopes: DOWNLOAD_SCOPES,
    description: "A 303 redirect to the object's data, for plain HTTP clients (signed URLs with `bewit` work).",
    handler: async (req) => {
      const url = await simpleUrl(req.services, req.params.name);
      return { status: 303, headers: { location: url }, body: { url } };
    },
  },
];
