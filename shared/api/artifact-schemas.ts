/**
 * Request schemas of the artifact endpoints, registered with the HTTP layer (Taskcluster v1 shapes, `contentLength` as in v96.7+).
 */
import { registerSchema } from './schemas';

const expires = { type: 'string', format: 'date-time' };
const contentType = { type: 'string', maxLength: 255 };
const contentLength = { type: 'integer', minimum: 0 };
const variant = (storageType: string, properties: Record<string, object>, required: string[]) => ({
  type: 'object',
  additionalProperties: false,
  properties: { storageType: { type: 'string', enum: [storageType] }, expires, ...properties },
  required: ['storageType', 'expires', ...required],
});

export const ERROR_REASONS = ['file-missing-on-worker', 'invalid-resource-on-worker', 'too-large-file-on-worker', 'file-not-readable-on-worker'] as const;

registerSchema('create-artifact-request', {
  oneOf: [
    variant('s3', { contentType, contentLength }, ['contentType']),
    variant('object', { contentType, contentLength }, ['contentType']),
    variant('reference', { contentType, url: { type: 'string', format: 'uri' } }, ['url', 'contentType']),
    variant('link', { contentType, artifact: { type: 'string', minLength: 1 } }, ['artifact']),
    variant('error', { reason: { type: 'string', enum: [...ERROR_REASONS] }, message: { type: 'string', maxLength: 4096 } }, ['reason', 'message']),
  ],
});

registerSchema('finish-artifact-request', {
  type: 'object',
  additionalProperties: false,
  properties: { uploadId: { type: 'string' } },
  required: ['uploadId'],
});
