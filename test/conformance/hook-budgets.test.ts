/**
 * Templates and trigger schemas are a hook author's and a trigger caller's code: the service
 * renders and validates them within a time and a memory budget, in child processes off its event loop. An attacker's
 * template or schema gets a 400 naming the budget, and `ping` keeps answering meanwhile.
 */
import { startTestService, TestService, expectError } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';
import {
  SANDBOX_TIME_MS,
  SANDBOX_HEAP_MB,
  SANDBOX_OWNER_WAITING,
  SANDBOX_PENALIZED_WAITING,
  Sandbox,
  SandboxJob,
  SandboxOwner,
} from '../../shared/sandbox/sandbox';

let svc: TestService;
let hooks: any;
beforeAll(async () => {
  svc = await startTestService();
  hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  await svc.auth().createRole('hook-id:budget/*', { description: 'budget hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => svc?.close());

/**
 * Pings answered while an attack was pending, at least. The pinger shares the service's process, so
 * a blocked event loop answers none before the attack's 400 (1 seen: the ping already in flight);
 * with the job off the event loop, 35-67 were answered on a loaded two-core machine.
 */
const MIN_PINGS_DURING_ATTACK = 5;

const uniqueHook = () => `h${Math.random().toString(36).slice(2, 10)}`;

function hookDef(task: unknown, overrides: Record<string, unknown> = {}): Record<string, any> {
  return { metadata: { name: 'budget', description: 'a hostile hook', owner: 'tester@example.com' }, task, ...overrides };
}

const goodTask = () => ({
  taskQueueId: uniqueQueue(),
  payload: {},
  metadata: { name: 'hook task', description: 'made by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
});

/**
 * Runs `attack` while pinging the service every 20 ms; returns the attack's outcome, how many pings
 * were answered before it came back, and the slowest ping (a figure for the console, not a bound).
 */
async function whilePinging<T>(attack: () => Promise<T>): Promise<{ result: T; pings: number; maxPingMs: number }> {
  const queue = svc.queue(null);
  let settled = false;
  let pings = 0;
  let maxPingMs = 0;
  const pinger = (async () => {
    while (!settled) {
      const t = performance.now();
      await queue.ping();
      maxPingMs = Math.max(maxPingMs, performance.now() - t);
      if (!settled) pings++;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    return { result: await attack(), pings, maxPingMs };
  } finally {
    settled = true;
    await pinger;
  }
}

test('a catastrophic triggerSchema pattern is a 400 naming the time budget, and ping keeps answering', async () => {
  const id = uniqueHook();
  await hooks.createHook('budget', id, hookDef(goodTask(), { triggerSchema: { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } }));
  const token = (await hooks.getTriggerToken('budget', id)).token;
  const anonymous = new svc.tc.Hooks({ rootUrl: svc.rootUrl, retries: 0 });
  // Backtracking on 28 characters takes ~10 s of one core; each extra character doubles it.
  const { result, maxPingMs, pings } = await whilePinging(() =>
    expectError(anonymous.triggerHookWithToken('budget', id, token, { s: 'a'.repeat(28) + '!' }), 400),
  );
  expect(result.message).toMatch(new RegExp(`budget of ${SANDBOX_TIME_MS} ms`));
  expect(pings).toBeGreaterThanOrEqual(MIN_PINGS_DURING_ATTACK);
  console.log(`catastrophic pattern: 400 after the ${SANDBOX_TIME_MS} ms budget; ${pings} pings meanwhile, slowest ${maxPingMs.toFixed(1)} ms`);
  // The hook still works for a sane payload.
  await anonymous.triggerHookWithToken('budget', id, token, { s: 'aaa' });
});

test('a template that loops for seconds is a 400 naming the time budget at createHook, and ping keeps answering', async () => {
  const task = { ...goodTask(), payload: { x: { $map: { $eval: 'range(0, 1000)' }, 'each(i)': { $map: { $eval: 'range(0, 1000)' }, 'each(j)': 'y' } } } };
  const { result, maxPingMs, pings } = await whilePinging(() => expectError(hooks.createHook('budget', uniqueHook(), hookDef(task)), 400));
  expect(result.message).toMatch(/budget of (\d+ ms of time|\d+ MB of memory|\d+ characters of output)/);
  expect(pings).toBeGreaterThanOrEqual(MIN_PINGS_DURING_ATTACK);
  console.log(`1000 x 1000 $map: ${result.message.split('\n')[0]}; ${pings} pings meanwhile, slowest ${maxPingMs.toFixed(1)} ms`);
});

test('a template that exhausts memory is a 400 naming the memory budget; the process lives on', async () => {
  const task = { ...goodTask(), payload: { $eval: 'range(0, 2000000000)' } };
  const { result, maxPingMs, pings } = await whilePinging(() => expectError(hooks.createHook('budget', uniqueHook(), hookDef(task)), 400));
  expect(result.message).toMatch(new RegExp(`budget of (${SANDBOX_HEAP_MB} MB of memory|${SANDBOX_TIME_MS} ms of time)`));
  expect(pings).toBeGreaterThanOrEqual(MIN_PINGS_DURING_ATTACK);
  console.log(`range(0, 2e9): ${result.message.split('\n')[0]}; ${pings} pings meanwhile, slowest ${maxPingMs.toFixed(1)} ms`);
  // Rendering still works after a sandbox process was lost.
  const id = uniqueHook();
  await hooks.createHook('budget', id, hookDef(goodTask()));
  const r = await hooks.triggerHook('budget', id, {});
  expect(r.status.taskId).toBeDefined();
});

test('a template rendered at trigger time (payload-dependent) is bounded too', async () => {
  const id = uniqueHook();
  const task = {
    ...goodTask(),
    payload: { x: { $map: { $eval: 'range(0, payload.n)' }, 'each(i)': { $map: { $eval: 'range(0, payload.n)' }, 'each(j)': 'y' } } },
  };
  await hooks.createHook('budget', id, hookDef(task, { triggerSchema: { type: 'object' } }));
  const { result, pings, maxPingMs } = await whilePinging(() => expectError(hooks.triggerHook('budget', id, { n: 3000 }), 400));
  expect(result.message).toMatch(/budget of/);
  expect(pings).toBeGreaterThanOrEqual(MIN_PINGS_DURING_ATTACK);
  console.log(`3000 x 3000 $map at trigger time: ${result.message.split('\n')[0]}; ${pings} pings meanwhile, slowest ${maxPingMs.toFixed(1)} ms`);
  // The failed fire is recorded as the hook's last fire, with the budget in its message.
  expect((await hooks.getHookStatus('budget', id)).lastFire).toEqual(expect.objectContaining({ result: 'error' }));
});

/** A pool of its own with a short budget (a flood is over in seconds) that tells when `n` jobs of `owner` have come. */
class WatchedPool extends Sandbox {
  private readonly arrivals = new Map<string, { n: number; resolve: () => void }>();
  constructor() {
    super({ timeMs: 500, heapMb: SANDBOX_HEAP_MB }, 2);
  }
  arrived(owner: string, n: number): Promise<void> {
    return new Promise((resolve) => this.arrivals.set(owner, { n, resolve }));
  }
  override run(job: SandboxJob, by: SandboxOwner) {
    const a = this.arrivals.get(by.owner);
    if (a && --a.n === 0) a.resolve();
    return super.run(job, by);
  }
}

test("one hook's flood of catastrophic triggers does not hold up another hook's trigger, and its backlog is refused with a 409", async () => {
  const pool = new WatchedPool();
  const own = await startTestService({}, { sandbox: pool });
  try {
    const h = new own.tc.Hooks({ rootUrl: own.rootUrl, credentials: own.root, retries: 0 });
    await own.auth().createRole('hook-id:budget/*', { description: 'budget hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
    const [a, b] = [uniqueHook(), uniqueHook()];
    await h.createHook('budget', a, hookDef(goodTask(), { triggerSchema: { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } }));
    await h.createHook('budget', b, hookDef(goodTask()));
    const token = (await h.getTriggerToken('budget', a)).token;
    const anonymous = new own.tc.Hooks({ rootUrl: own.rootUrl, retries: 0 });
    // Both children started (a start is not what this measures): two hooks at once hold one each.
    await Promise.all([h.triggerHook('budget', b, {}), anonymous.triggerHookWithToken('budget', a, token, { s: 'aaa' })]);

    const FLOOD = 20;
    const seen = { overBudget: 0, refused: 0, other: 0 };
    let refusal: any;
    const arrived = pool.arrived(`budget/${a}`, FLOOD);
    const flood = Promise.all(
      Array.from({ length: FLOOD }, () =>
        anonymous.triggerHookWithToken('budget', a, token, { s: 'a'.repeat(40) + '!' }).then(
          () => seen.other++,
          (e: any) => {
            if (e.statusCode === 400 && /budget of 500 ms/.test(e.message)) seen.overBudget++;
            else if (e.statusCode === 409 && e.code === 'RequestConflict') {
              seen.refused++;
              refusal ??= e;
            } else seen.other++;
          },
        ),
      ),
    );
    await arrived; // every flood call is in the pool before hook b's trigger
    const started = performance.now();
    const fired = await h.triggerHook('budget', b, {});
    const tookMs = performance.now() - started;
    const overBudgetBeforeB = seen.overBudget;
    await flood;
    // Hook b finds the child hook a does not hold: it waits for none of the flood (at most one
    // job's budget on a loaded machine). FIFO: it waited behind all 20, two at a time.
    expect(fired.status.taskId).toEqual(expect.any(String));
    expect(overBudgetBeforeB).toBeLessThanOrEqual(1);
    console.log(`hook b's trigger during hook a's flood of ${FLOOD}: ${tookMs.toFixed(0)} ms, ${overBudgetBeforeB} of a's over-budget answers before it`);
    // One ran and SANDBOX_OWNER_WAITING waited; after the first went over budget, SANDBOX_PENALIZED_WAITING stayed.
    expect(seen).toEqual({ overBudget: 1 + SANDBOX_PENALIZED_WAITING, refused: FLOOD - 1 - SANDBOX_PENALIZED_WAITING, other: 0 });
    expect(SANDBOX_OWNER_WAITING).toBeLessThan(FLOOD);
    expect(refusal.message).toMatch(new RegExp(`hook budget/${a} has \\d+ triggers waiting for the sandbox .*try again`));
  } finally {
    await own.close();
    await pool.close();
  }
});
