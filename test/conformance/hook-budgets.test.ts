/**
 * Templates and trigger schemas are a hook author's and a trigger caller's code: the service
 * renders and validates them within a time and a memory budget, in child processes off its event loop. An attacker's
 * template or schema gets a 400 naming the budget, and `ping` keeps answering meanwhile.
 */
import { startTestService, TestService, expectError } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';
import { SANDBOX_TIME_MS, SANDBOX_HEAP_MB } from '../../shared/sandbox/sandbox';

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
