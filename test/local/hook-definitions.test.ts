/**
 * Hook definition checks name the bad field; they compile schemas and templates in the sandbox's
 * child processes (shared/sandbox/sandbox.ts).
 */
import { checkDefinition as checkWith } from '../../shared/hooks/hooks';
import { sandbox } from '../../shared/sandbox/sandbox';
import type { HookDefinition } from '../../shared/hooks/store';

/** Definition checks on the process's pool. */
const checkDefinition = (d: HookDefinition) => checkWith(d, sandbox);

const def = (over: Partial<HookDefinition> = {}): HookDefinition => ({
  hookGroupId: 'g',
  hookId: 'h',
  metadata: { name: 'n', description: 'd', owner: 'o', emailOnError: true },
  schedule: [],
  task: {},
  triggerSchema: { type: 'object' },
  bindings: [],
  ...over,
});

test('definition checks name the bad field', async () => {
  await expect(checkDefinition(def({ schedule: ['0 0 * * *', '61 * * * *'] }))).rejects.toThrow(/schedule\[1\]/);
  await expect(checkDefinition(def({ triggerSchema: { type: 7 } }))).rejects.toThrow(/triggerSchema/);
  await expect(checkDefinition(def({ task: { $eval: 'payload +' } }))).rejects.toThrow(/task/);
  await expect(checkDefinition(def({ bindings: [{ exchange: 'e', routingKeyPattern: 'a.b*' }] }))).rejects.toThrow(/bindings\[0\]/);
  // A template that only fails for some payloads is fine at creation.
  await expect(checkDefinition(def({ task: { $eval: 'payload.a.b' } }))).resolves.toBeUndefined();
  await expect(checkDefinition(def({ task: { big: 'x'.repeat(40_000) } }))).rejects.toThrow(/at most/);
});

test("bindings on Taskcluster's default denylist are refused; others pass", async () => {
  for (const exchange of ['exchange/taskcluster-queue/v1/task-created', 'exchange/taskcluster-hooks/v1/hook-created', 'exchange/taskcluster-hooks/v2/x']) {
    await expect(checkDefinition(def({ bindings: [{ exchange, routingKeyPattern: '#' }] }))).rejects.toThrow(/denied access to hooks/);
  }
  await expect(
    checkDefinition(def({ bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-completed', routingKeyPattern: '#' }] })),
  ).resolves.toBeUndefined();
  // Anchored at the start, as Taskcluster's patterns are.
  await expect(
    checkDefinition(def({ bindings: [{ exchange: 'x/exchange/taskcluster-hooks/v1/hook-created', routingKeyPattern: '#' }] })),
  ).resolves.toBeUndefined();
});
