/**
 * The demo's results as text: a line per task marked by its state (a failed task is ✘ even when
 * it failed as planned), and the URLs to open while the service runs. With `--exit` the service
 * stops as the report is printed, so it names no URL that would be dead.
 */
import { DASHBOARD_PATH } from '../shared/local/host';

/** What a task's state looks like at a glance: done, failed, ended by the queue, still open. */
const MARKS: Record<string, string> = { completed: '✔', failed: '✘', exception: '!' };
const OPEN_MARK = '…';

export const stateMark = (state: string): string => MARKS[state] ?? OPEN_MARK;

/** The dashboard's view of a task group (its `#group=` route, shared/ops/dashboard/group.js). */
export const dashboardGroupUrl = (rootUrl: string, taskGroupId: string): string => `${rootUrl}${DASHBOARD_PATH}#group=${encodeURIComponent(taskGroupId)}`;

export function artifactUrl(rootUrl: string, taskId: string, name: string): string {
  return `${rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/${encodeURIComponent(name)}`;
}

export interface TaskResult {
  key: string;
  taskId: string;
  state: string;
  expect: string;
  /** Run time, e.g. `1.2s`, or `-`. */
  took: string;
  description: string;
  deps: string[];
  artifacts: string[];
}

/** A line per task, with its artifact URLs unless the service stops now (`live` false). */
export function taskLines(rootUrl: string, results: TaskResult[], live: boolean): string[] {
  const lines: string[] = [];
  for (const t of results) {
    const after = t.deps.length ? ` (after ${t.deps.join(', ')})` : '';
    const unplanned = t.state === t.expect ? '' : `   ← planned: ${t.expect}`;
    lines.push(`${stateMark(t.state)} ${t.key.padEnd(8)} ${t.state.padEnd(10)} ${t.took.padStart(6)}  ${t.taskId}  ${t.description}${after}${unplanned}`);
    if (live) for (const n of t.artifacts) lines.push(`      ${artifactUrl(rootUrl, t.taskId, n)}`);
  }
  return lines;
}

/** Where to look next: the dashboard's group view and the root credentials, or why there are none. */
export function linkLines(rootUrl: string, taskGroupId: string, creds: { clientId: string; accessToken: string }, live: boolean): string[] {
  if (!live) return [`Task group:       ${taskGroupId} (--exit: the service stops now, so no URLs; without --exit they stay open)`];
  return [
    `Dashboard:        ${rootUrl}${DASHBOARD_PATH}`,
    `Task group:       ${dashboardGroupUrl(rootUrl, taskGroupId)}`,
    `Root URL:         ${rootUrl}`,
    `Root credentials: TASKCLUSTER_CLIENT_ID=${creds.clientId} TASKCLUSTER_ACCESS_TOKEN=${creds.accessToken}`,
  ];
}
