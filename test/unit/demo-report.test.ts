/**
 * `npm run demo`'s report: each task marked by its state (the lint that fails on purpose is ✘),
 * the task group as the dashboard's group view, and no URLs with `--exit` (they die with it).
 */
import { dashboardGroupUrl, linkLines, taskLines, type TaskResult } from '../../bin/demo-report';

const ROOT = 'http://localhost:7071';
const creds = { clientId: 'static/root', accessToken: 'token' };
const result = (key: string, state: string, expect: string): TaskResult => ({
  key,
  taskId: `${key}-id`,
  state,
  expect,
  took: '1.0s',
  description: `${key} things`,
  deps: [],
  artifacts: ['public/logs/live.log'],
});

test('a failed task is ✘ even when it failed as planned; one that did not end as planned says so', () => {
  const lines = taskLines(
    ROOT,
    [result('build', 'completed', 'completed'), result('lint', 'failed', 'failed'), result('docs', 'exception', 'completed')],
    true,
  );
  expect(lines.filter((l) => !l.startsWith(' ')).map((l) => l.slice(0, 20))).toEqual(['✔ build    completed', '✘ lint     failed   ', '! docs     exception']);
  expect(lines.at(-2)).toMatch(/← planned: completed$/);
  expect(lines[1]).toBe(`      ${ROOT}/api/queue/v1/task/build-id/runs/0/artifacts/public%2Flogs%2Flive.log`);
});

test("the task group opens in the dashboard's group view, not as the API's JSON", () => {
  expect(dashboardGroupUrl(ROOT, 'G1')).toBe(`${ROOT}/api/dashboard#group=G1`);
  expect(linkLines(ROOT, 'G1', creds, true)).toContain(`Task group:       ${ROOT}/api/dashboard#group=G1`);
});

test('with --exit no URL is printed: the service stops as the report is read', () => {
  const lines = [...taskLines(ROOT, [result('lint', 'failed', 'failed')], false), ...linkLines(ROOT, 'G1', creds, false)];
  expect(lines.join('\n')).not.toContain('http');
  expect(lines.at(-1)).toContain('--exit: the service stops now, so no URLs');
});
