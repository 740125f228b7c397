/**
 * Run changes of a task write, written out by a test as a plan derives them from the write's
 * record (shared/lifecycle/planner.ts `historyOf`), for the index writers that take them.
 */
import type { Change } from '../../shared/ops/indexes';
import type { TaskRecord } from '../../shared/tasks/model';

/** Run `runId` of `t` moved from state `from` (null: a new run) to its state in `t`. */
export function moved(t: TaskRecord, runId: number, from: Change['from']): Change {
  const to = t.runs[runId].state;
  return { event: to === 'pending' ? 'scheduled' : to === 'running' ? 'claimed' : 'resolved', runId, from, to };
}

/** `t` was created with the runs it has. */
export const created = (t: TaskRecord): Change[] => [{ event: 'created', from: null, to: 'unscheduled' }, ...t.runs.map((r) => moved(t, r.runId, null))];
