/**
 * Request schemas of the Hooks endpoints (Taskcluster v1 shapes, plus the optional `overlap` rule).
 */
import { registerSchema } from './schemas';
import { MAX_HOOK_ID_LENGTH } from '../hooks/ids';

/** Taskcluster's hookGroupId / hookId formats (a hookId may hold `/`); lengths: shared/hooks/ids.ts. */
export const HOOK_GROUP_ID = '^([a-zA-Z0-9-_]*)$';
export const HOOK_ID = '^([a-zA-Z0-9-_/]*)$';
const hookGroupIdentifier = { type: 'string', minLength: 1, maxLength: MAX_HOOK_ID_LENGTH, pattern: HOOK_GROUP_ID };
const hookIdentifier = { type: 'string', minLength: 1, maxLength: MAX_HOOK_ID_LENGTH, pattern: HOOK_ID };

registerSchema('create-hook-request', {
  type: 'object',
  additionalProperties: false,
  properties: {
    hookGroupId: hookGroupIdentifier,
    hookId: hookIdentifier,
    metadata: {
      type: 'object',
      additionalProperties: false,
      properties: {
        name: { type: 'string', maxLength: 255 },
        description: { type: 'string', maxLength: 32768 },
        owner: { type: 'string', maxLength: 255 },
        emailOnError: { type: 'boolean', default: true },
      },
      required: ['name', 'description', 'owner'],
    },
    bindings: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        properties: { exchange: { type: 'string', minLength: 1, maxLength: 255 }, routingKeyPattern: { type: 'string', minLength: 1, maxLength: 255 } },
        required: ['exchange', 'routingKeyPattern'],
      },
      default: [],
    },
    schedule: { type: 'array', items: { type: 'string' }, uniqueItems: true, default: [] },
    task: { type: 'object' },
    triggerSchema: { type: 'object', default: { type: 'object', additionalProperties: false } },
    overlap: { type: 'string', enum: ['allow', 'skip'] },
  },
  required: ['metadata', 'task'],
});

registerSchema('trigger-hook-request', { type: 'object' });
