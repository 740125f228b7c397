/**
 * Deleting a task (expired, or just created with missing dependencies), as its deletion plan
 * says: its index rows first, while the task row still exists to say which they are (a repeat
 * after a crash finds them again), then its history and its row (TaskStore.delete).
 */
import type { LifecycleDeps } from './ports';
import type { TaskRecord } from '../tasks/model';
import { planDeletion } from './planner';

/** `known` saves a read; `alongWith`: see TaskStore.delete (true if they went). */
export async function deleteTask(d: LifecycleDeps, taskId: string, known?: TaskRecord, alongWith: string[] = []): Promise<boolean> {
  const task = known ?? (await d.tasks.load(taskId));
  const p = planDeletion(task);
  if (p.readModel) await d.readModels?.write(p.readModel);
  return d.tasks.delete(taskId, p.history, alongWith);
}
