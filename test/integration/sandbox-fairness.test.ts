/**
 * One owner's flood of jobs that each use their whole time budget does not stall the sandbox for
 * others (shared/sandbox/sandbox.ts): another owner's job finds a child at once, schedule-class
 * jobs go before waiting trigger-class ones, and the flood's backlog is refused instead of queued.
 * Real children with a small budget; the checks count what happened before what, not how long it took.
 */
import { BudgetExceeded, SANDBOX_OWNER_WAITING, SANDBOX_PENALIZED_WAITING, Sandbox, SandboxBusy, SandboxJob, SandboxOwner } from '../../shared/sandbox/sandbox';

/**
 * Short, so that a flood is over in seconds; far above the milliseconds a sane job takes, even on a
 * loaded machine (at load 8 on two cores, a quick job in a child took over 500 ms).
 */
const BUDGET = { timeMs: 1500, heapMb: 64 };
/** Backtracking on 40 characters takes hours: every such job runs to its budget. */
const PATHOLOGICAL: SandboxJob = { kind: 'validate', schema: { type: 'string', pattern: '^(a+)+$' }, data: 'a'.repeat(40) + '!' };
const QUICK: SandboxJob = { kind: 'validate', schema: { type: 'string', pattern: '^(a+)+$' }, data: 'aaaa' };

const trigger = (owner: string): SandboxOwner => ({ owner, priority: 'trigger' });
const schedule = (owner: string): SandboxOwner => ({ owner, priority: 'schedule' });

/** Runs `n` pathological jobs of `by`; counts those that went over budget and those refused, as they settle. */
function flood(pool: Sandbox, by: SandboxOwner, n: number) {
  const seen = { overBudget: 0, refused: 0, other: 0 };
  const done = Promise.all(
    Array.from({ length: n }, () =>
      pool.run(PATHOLOGICAL, by).then(
        () => seen.other++,
        (e) => (e instanceof BudgetExceeded ? seen.overBudget++ : e instanceof SandboxBusy ? seen.refused++ : seen.other++),
      ),
    ),
  );
  return { seen, done };
}

let pool: Sandbox;
afterEach(async () => pool?.close());

test("another owner's jobs run while one owner floods the pool: none waits for the flood", async () => {
  pool = new Sandbox(BUDGET, 2);
  // Both children started (a start is not what this measures).
  await Promise.all([pool.run(QUICK, trigger('warm-1')), pool.run(QUICK, trigger('warm-2'))]);
  const a = flood(pool, trigger('hook/a'), 6);
  const overBudgetBefore: number[] = [];
  for (let i = 0; i < 4; i++) {
    await expect(pool.run(QUICK, trigger('hook/b'))).resolves.toMatchObject({ ok: true, valid: true });
    overBudgetBefore.push(a.seen.overBudget);
  }
  // Each finds the child hook/a does not hold: it waits for none of the flood (for at most one job
  // of it on a stalled machine). FIFO: hook/b's first job waited behind all six, two at a time.
  expect(Math.max(...overBudgetBefore)).toBeLessThanOrEqual(1);
  await a.done;
  expect(a.seen.other).toBe(0);
});

test('a schedule-class job is taken before waiting trigger-class jobs', async () => {
  // One child: whatever runs next waits for the running job, so the order is exact.
  pool = new Sandbox(BUDGET, 1);
  await pool.run(QUICK, trigger('warm'));
  const a = flood(pool, trigger('hook/a'), 4);
  const ran = await pool.run(QUICK, schedule('hook/c')).then(() => a.seen.overBudget);
  // Only the job that was running when it came; round robin alone would take hook/a's next one first.
  expect(ran).toBe(1);
  await a.done;
});

test("an owner's waiting jobs are bounded, and fewer once one went over its budget", async () => {
  pool = new Sandbox(BUDGET, 2);
  const n = SANDBOX_OWNER_WAITING + 4;
  const a = flood(pool, trigger('hook/a'), n);
  // One runs and SANDBOX_OWNER_WAITING wait; the rest are refused at once, before any job ends.
  await Promise.resolve();
  expect(a.seen).toEqual({ overBudget: 0, refused: n - 1 - SANDBOX_OWNER_WAITING, other: 0 });
  await a.done;
  // After the first went over budget, all but SANDBOX_PENALIZED_WAITING of the waiting ones were refused.
  expect(a.seen).toEqual({ overBudget: 1 + SANDBOX_PENALIZED_WAITING, refused: n - 1 - SANDBOX_PENALIZED_WAITING, other: 0 });
  // Schedule-class jobs of the same owner are never refused.
  await expect(pool.run(QUICK, schedule('hook/a'))).resolves.toMatchObject({ ok: true, valid: true });
});
