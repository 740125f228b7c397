/**
 * Request schemas of the Index endpoints (Taskcluster v1 shapes).
 */
import { registerSchema } from './schemas';

registerSchema('insert-task-request', {
  type: 'object',
  additionalProperties: false,
  properties: {
    taskId: { type: 'string', pattern: '^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$' },
    rank: { type: 'number' },
    data: { type: 'object' },
    expires: { type: 'string', format: 'date-time' },
  },
  required: ['taskId', 'rank', 'data', 'expires'],
});

registerSchema('list-tasks-at-index', {
  type: 'object',
  additionalProperties: false,
  properties: { indexes: { type: 'array', items: { type: 'string', maxLength: 255 }, maxItems: 1000 } },
  required: ['indexes'],
});
