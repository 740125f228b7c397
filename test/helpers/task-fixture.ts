/**
 * A task definition for the pure tests of the lifecycle (transitions, plans, the executor, the state
 * table): created at `now`, deadline an hour later, expiring an hour after that.
 */
import type { TaskDefinition } from '../../shared/tasks/model';

export function taskDefinition(now: Date, over: Partial<TaskDefinition> = {}): TaskDefinition {
  const later = (s: number) => new Date(now.getTime() + s * 1000).toJSON();
  return {
    provisionerId: 'prov',
    workerType: 'wt',
    taskQueueId: 'prov/wt',
    schedulerId: '-',
    projectId: 'none',
    taskGroupId: 'T1',
    dependencies: [],
    requires: 'all-completed',
    routes: [],
    priority: 'lowest',
    retries: 2,
    created: now.toJSON(),
    deadline: later(3600),
    expires: later(7200),
    scopes: [],
    payload: {},
    metadata: { name: 'n', description: 'd', owner: 'o@example.com', source: 'https://example.com' },
    tags: {},
    extra: {},
    ...over,
  };
}
