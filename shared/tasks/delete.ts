/**
 * Deleting a task (expired, or just created with missing dependencies), as its deletion plan
 * says: its index rows first, while the task row still exists to say which they are (a repeat
 * after a crash finds them again), then its history and its row (TaskStore.delete).
 */
import type { TaskDeps } from './deps';
import type { TaskRecord } from './model';

/** `known` saves a read; `alongWith`: see TaskStore.delete (true if they went). */
export async function deleteTask(d: TaskDeps, taskId: string, known?: TaskRecord, alongWith: string[] = []): Promise<boolean> {
  const task = known ?? (await d.tasks.load(taskId));
  const p = d.plan.deletion(task);
  if (p.readModel) await d.readModels?.write(p.readModel);
  return d.tasks.delete(taskId, p.history, alongWith);
}
