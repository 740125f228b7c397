/**
 * What the lifecycle needs beyond the task store's ports (shared/tasks/ports.ts): where a write's
 * events and operator read-model changes go, and who acts. Built once in the composition root
 * (shared/services.ts).
 */
import type { TaskDeps } from '../tasks/ports';
import type { ReadModelPlan } from '../ops/read-models';
import type { TaskEvents } from './events';

/** The operator read models (shared/ops/read-models.ts): a plan's index and rollup writes, after the row. */
export interface ReadModels {
  /** Queued; resolves once the request need not wait longer (a deletion's are written by then: its row goes next). */
  write(p: ReadModelPlan): Promise<void>;
}

export interface LifecycleDeps extends TaskDeps {
  /** Events of task writes; without, writes publish nothing (tools, benches of the bare store). */
  taskEvents?: TaskEvents;
  /** Operator read models; without, none are kept. */
  readModels?: ReadModels;
  /** Who acts in this invocation (shared/ops/actor.ts): named in history rows; counts the run transitions it makes. */
  actor?: () => { actor?: string; transitions: number } | undefined;
}
