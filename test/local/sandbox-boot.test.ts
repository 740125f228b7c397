/**
 * A template's time budget is the template's: a sandbox process that is slow to start (a cold start on a busy
 * host) does not make a legitimate hook "go over its budget".
 */
import { BudgetExceeded, Sandbox, SandboxOwner } from '../../shared/sandbox/sandbox';

/** Every job of this file is one owner's. */
const TEST_OWNER: SandboxOwner = { owner: 'test', priority: 'trigger' };

/** Holds the main thread for `ms`, as a busy host does while a fresh sandbox process loads its libraries. */
function busy(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

test("a sandbox process's start does not count against the first job's time budget", async () => {
  const sandbox = new Sandbox({ timeMs: 500, heapMb: 64 }, 1);
  try {
    const first = sandbox.run({ kind: 'render', template: { a: { $eval: '1 + 1' } }, context: {} }, TEST_OWNER);
    // Longer than the budget passes before the pool hears from its new process.
    busy(800);
    await expect(first).resolves.toEqual({ ok: true, json: '{"a":2}' });
  } finally {
    await sandbox.close();
  }
});

test('a job that runs past its budget is still refused, and the next job gets a fresh process', async () => {
  const sandbox = new Sandbox({ timeMs: 300, heapMb: 64 }, 1);
  try {
    const slow = { kind: 'validate' as const, schema: { type: 'string', pattern: '^(a+)+$' }, data: 'a'.repeat(40) + '!' };
    await expect(sandbox.run(slow, TEST_OWNER)).rejects.toBeInstanceOf(BudgetExceeded);
    await expect(sandbox.run({ kind: 'render', template: { $eval: '"ok"' }, context: {} }, TEST_OWNER)).resolves.toEqual({ ok: true, json: '"ok"' });
  } finally {
    await sandbox.close();
  }
});
