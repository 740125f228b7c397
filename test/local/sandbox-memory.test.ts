/**
 * A template that exhausts its memory budget ends only the sandbox process that ran it: the host
 * lives on, refuses the template naming the memory budget, logs one event instead of V8's report,
 * and renders the next template with a fresh process. These are the allocation shapes (one array
 * grown without end, a large `$map`) for which V8 aborts the whole process when the heap limit is a
 * worker thread's rather than a process's; that abort is a race, so each shape runs several rounds.
 */
import { BudgetExceeded, Sandbox, SandboxOwner } from '../../shared/sandbox/sandbox';
import { memoryLogger } from '../../shared/log';

/** Every job of this file is one owner's. */
const TEST_OWNER: SandboxOwner = { owner: 'test', priority: 'trigger' };

/** Rounds of each attack in a row. */
const ROUNDS = 3;
/** A hang guard only: a round takes ~1 s alone, up to ~12 s on two cores shared with other suites. */
const TEST_TIMEOUT_MS = 180_000;

const attacks: [string, unknown][] = [
  ['one array grown by push: range(0, 2e9)', { $eval: 'range(0, 2000000000)' }],
  ['a large $map', { $map: { $eval: 'range(0, 50000000)' }, 'each(i)': { n: { $eval: 'i' } } }],
];

test.each(attacks)(
  '%s is refused over its memory budget, round after round, and the host renders on',
  async (_name, template) => {
    const log = memoryLogger();
    // A time budget long enough that only memory can end these.
    const sandbox = new Sandbox({ timeMs: 60_000, heapMb: 64 }, 1, log);
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const outcome = await sandbox.run({ kind: 'render', template, context: {} }, TEST_OWNER).catch((e) => e);
        expect(outcome).toBeInstanceOf(BudgetExceeded);
        expect(outcome.budget).toBe('memory');
        await expect(sandbox.run({ kind: 'render', template: { $eval: '1 + 1' }, context: {} }, TEST_OWNER)).resolves.toEqual({ ok: true, json: '2' });
      }
      // One event per lost process, V8's report summed up as a flag rather than copied.
      expect(log.records).toEqual(
        Array.from({ length: ROUNDS }, () => ({ level: 'warn', event: 'sandbox-process-ended', exit: expect.any(String), outOfMemory: true, running: true })),
      );
    } finally {
      await sandbox.close();
    }
  },
  TEST_TIMEOUT_MS,
);
