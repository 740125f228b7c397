/**
 * The Hooks service through taskcluster-client's `Hooks` class: definitions, bad input, triggers
 * (with credentials and with a token), JSON-e rendering, the hook role's scopes, last fires, and
 * schedules fired by the reaper (once per tick across two app instances, missed ticks collapsed,
 * the overlap rule).
 */
import { startTestService, startSecondInstance, TestService, expectError } from '../helpers/service';
import { passTime, uniqueQueue } from '../helpers/work';
import { HookStore } from '../../shared/hooks/store';

let svc: TestService;
let hooks: any;
beforeAll(async () => {
  svc = await startTestService();
  hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  // What every hook of the `ci` group may put into a task.
  await svc.auth().createRole('hook-id:ci/*', { description: 'ci hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*', 'queue:route:index.*'] });
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();

function hookDef(overrides: Record<string, unknown> = {}, taskOverrides: Record<string, unknown> = {}): Record<string, any> {
  return {
    metadata: { name: 'nightly', description: 'a test hook', owner: 'tester@example.com' },
    task: {
      taskQueueId: uniqueQueue(),
      payload: { fired: { $eval: 'firedBy' }, input: { $eval: 'payload' } },
      metadata: { name: 'hook task', description: 'made by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
      ...taskOverrides,
    },
    ...overrides,
  };
}

const uniqueHook = () => `h${Math.random().toString(36).slice(2, 10)}`;

describe('definitions', () => {
  test('create, read, list, update and remove a hook', async () => {
    const id = uniqueHook();
    const def = hookDef({ schedule: ['0 0 * * *'] });
    const created = await hooks.createHook('ci', id, def);
    expect(created).toMatchObject({
      hookGroupId: 'ci',
      hookId: id,
      schedule: ['0 0 * * *'],
      bindings: [],
      triggerSchema: { type: 'object', additionalProperties: false },
    });
    expect(created.metadata.emailOnError).toBe(true);
    expect(await hooks.hook('ci', id)).toEqual(created);
    // The same create again is fine; a different one is a conflict.
    await hooks.createHook('ci', id, def);
    await expectError(hooks.createHook('ci', id, hookDef({ schedule: ['1 0 * * *'] })), 409);

    expect((await hooks.listHookGroups()).groups).toContain('ci');
    expect((await hooks.listHooks('ci')).hooks.map((h: any) => h.hookId)).toContain(id);
    const status = await hooks.getHookStatus('ci', id);
    expect(status.lastFire).toEqual({ result: 'no-fire' });
    const next = new Date(status.nextScheduledDate);
    expect(next.getUTCHours()).toBe(0);
    expect(next.getTime()).toBeGreaterThan(Date.now());

    const updated = await hooks.updateHook('ci', id, { ...def, schedule: [] });
    expect(updated.schedule).toEqual([]);
    expect((await hooks.getHookStatus('ci', id)).nextScheduledDate).toBeUndefined();
    await hooks.removeHook('ci', id);
    await expectError(hooks.hook('ci', id), 404);
    await expectError(hooks.updateHook('ci', id, def), 404);
    await expectError(hooks.hook('ci', 'no spaces allowed'), 400);
  });

  test('bad cron, trigger schema, template or binding is a 400 naming the field', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ schedule: ['0 0 * * *', 'every tuesday'] }, /schedule\[1\]/],
      [{ triggerSchema: { type: 'nonsense' } }, /triggerSchema/],
      [{ task: { $if: 'x', then: {}, surplus: 1 } }, /task .*JSON-e/],
      [{ bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-completed', routingKeyPattern: 'a..b' }] }, /bindings\[0\]\.routingKeyPattern/],
      [{ metadata: { name: 'x' } }, /metadata/],
    ];
    for (const [overrides, field] of cases) {
      const err = await expectError(hooks.createHook('ci', uniqueHook(), { ...hookDef(), ...overrides }), 400);
      expect(err.message).toMatch(field);
    }
  });

  test('creating a hook needs hooks:modify-hook and the hook role', async () => {
    const clientId = `test/${uniqueHook()}`;
    const c = await svc.auth().createClient(clientId, { expires: inAnHour(), description: 'x', scopes: ['hooks:modify-hook:ci/*'] });
    const limited = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: { clientId, accessToken: c.accessToken }, retries: 0 });
    await expectError(limited.createHook('ci', uniqueHook(), hookDef()), 403, 'InsufficientScopes');
  });
});

describe('triggers', () => {
  test('triggerHook renders the template with the payload and creates the task as the hook role', async () => {
    const id = uniqueHook();
    await hooks.createHook('ci', id, hookDef({ triggerSchema: { type: 'object', properties: { rev: { type: 'string' } }, required: ['rev'] } }));
    const r = await hooks.triggerHook('ci', id, { rev: 'abc' });
    expect(r).toEqual({ taskId: expect.any(String), status: { taskId: r.taskId } });
    expect((await svc.queue().status(r.taskId)).status.state).toBe('pending');
    const task = await svc.queue().task(r.status.taskId);
    expect(task.payload).toEqual({ fired: 'triggerHook', input: { rev: 'abc' } });
    expect(task.taskGroupId).toBe(r.status.taskId);
    expect(new Date(task.deadline).getTime() - new Date(task.created).getTime()).toBe(24 * 3600_000);

    const err = await expectError(hooks.triggerHook('ci', id, { rev: 7 }), 400);
    expect(err.message).toMatch(/triggerSchema/);

    const fires = (await hooks.listLastFires('ci', id)).lastFires;
    expect(fires).toEqual([
      { hookGroupId: 'ci', hookId: id, firedBy: 'triggerHook', taskId: r.status.taskId, taskCreateTime: task.created, result: 'success', error: '' },
    ]);
    expect((await hooks.getHookStatus('ci', id)).lastFire).toEqual({ result: 'success', taskId: r.status.taskId, time: task.created });
  });

  test('a task needing scopes the hook role lacks is refused and recorded as an error', async () => {
    await svc.auth().createRole('hook-id:weak/*', { description: 'weak hooks', scopes: ['queue:scheduler-id:-'] });
    const id = uniqueHook();
    await hooks.createHook('weak', id, hookDef({ triggerSchema: { type: 'object' } }));
    await expectError(hooks.triggerHook('weak', id, {}), 403, 'InsufficientScopes');
    const [fire] = (await hooks.listLastFires('weak', id)).lastFires;
    expect(fire).toMatchObject({ result: 'error', firedBy: 'triggerHook' });
    expect(fire.error).toMatch(/hook-id:weak/);
    expect((await hooks.getHookStatus('weak', id)).lastFire.result).toBe('error');
  });

  test('a template that renders null creates nothing', async () => {
    const id = uniqueHook();
    await hooks.createHook('ci', id, hookDef({ triggerSchema: { type: 'object' }, task: { $if: 'payload.go', then: hookDef().task } }));
    expect(await hooks.triggerHook('ci', id, { go: false })).toEqual({});
    expect((await hooks.listLastFires('ci', id)).lastFires).toEqual([]);
    const fired = await hooks.triggerHook('ci', id, { go: true });
    expect((await svc.queue().status(fired.taskId)).status.state).toBe('pending');
  });

  test('triggerHookWithToken needs no credentials but the current token', async () => {
    const id = uniqueHook();
    await hooks.createHook('ci', id, hookDef({ triggerSchema: { type: 'object' } }));
    const { token } = await hooks.getTriggerToken('ci', id);
    expect(token.length).toBeGreaterThan(20);
    const anonymous = new svc.tc.Hooks({ rootUrl: svc.rootUrl, retries: 0 });
    const r = await anonymous.triggerHookWithToken('ci', id, token, { x: 1 });
    expect((await svc.queue().task(r.status.taskId)).payload).toEqual({ fired: 'triggerHookWithToken', input: { x: 1 } });
    await expectError(anonymous.triggerHookWithToken('ci', id, token + 'x', {}), 401);
    const reset = await hooks.resetTriggerToken('ci', id);
    expect(reset.token).not.toBe(token);
    await expectError(anonymous.triggerHookWithToken('ci', id, token, {}), 401);
    await anonymous.triggerHookWithToken('ci', id, reset.token, {});
    expect((await hooks.listLastFires('ci', id)).lastFires.map((f: any) => f.firedBy)).toEqual(['triggerHookWithToken', 'triggerHookWithToken']);
  });
});

describe('schedules', () => {
  /** Scheduled fires have no payload in their context. */
  const scheduled = (overrides: Record<string, unknown>) => hookDef(overrides, { payload: { fired: { $eval: 'firedBy' } } });

  /** Every task a hook's schedule created, from its last fires. */
  async function fires(hookGroupId: string, hookId: string): Promise<any[]> {
    return (await hooks.listLastFires(hookGroupId, hookId)).lastFires;
  }

  test('a seconds-level schedule fires exactly once per tick across two app instances', async () => {
    const svc2 = await startSecondInstance(svc);
    try {
      const id = uniqueHook();
      await hooks.createHook('ci', id, scheduled({ schedule: ['*/2 * * * * *'] }));
      for (let i = 0; i < 14; i++) {
        await Promise.all([svc.runReaper(), svc2.runReaper(), svc.runReaper()]);
        await passTime(500);
      }
      const all = await fires('ci', id);
      expect(all.length).toBeGreaterThanOrEqual(2);
      const ticks = all.map((f) => f.taskCreateTime);
      expect(new Set(ticks).size).toBe(all.length); // no tick twice
      expect(new Set(all.map((f) => f.taskId)).size).toBe(all.length);
      for (const f of all) {
        expect(f.result).toBe('success');
        expect(new Date(f.taskCreateTime).getUTCSeconds() % 2).toBe(0);
        expect((await svc.queue().task(f.taskId)).created).toBe(f.taskCreateTime); // created = the scheduled time
      }
      const status = await hooks.getHookStatus('ci', id);
      expect(new Date(status.nextScheduledDate).getTime()).toBeGreaterThan(new Date(ticks[0]).getTime());
    } finally {
      await svc2.close();
    }
  });

  test('ticks missed while nothing ran collapse into one fire', async () => {
    const id = uniqueHook();
    await hooks.createHook('ci', id, scheduled({ schedule: ['* * * * * *'] }));
    await passTime(3_200);
    await svc.runReaper();
    const [fire, ...rest] = await fires('ci', id);
    expect(rest).toEqual([]);
    expect(fire.result).toBe('success');
    expect((await svc.queue().task(fire.taskId)).payload).toEqual({ fired: 'schedule' });
  });

  test("with overlap 'skip' a tick is skipped while the previous fire's task is unresolved", async () => {
    const id = uniqueHook();
    await hooks.createHook('ci', id, scheduled({ schedule: ['* * * * * *'], overlap: 'skip' }));
    expect((await hooks.hook('ci', id)).overlap).toBe('skip');
    for (let i = 0; i < 12; i++) {
      await svc.runReaper();
      await passTime(300);
    }
    const [only, ...rest] = await fires('ci', id);
    expect(rest).toEqual([]);
    await svc.queue().cancelTask(only.taskId);
    await passTime(1_100);
    await svc.runReaper();
    expect(await fires('ci', id)).toHaveLength(2);
  });

  test('the next fire and a claimed fire are stored with the hook', async () => {
    const id = uniqueHook();
    await hooks.createHook('ci', id, scheduled({ schedule: ['0 0 1 1 *'] }));
    const h = await new HookStore(svc.services.storage).get('ci', id);
    expect(h!.nextScheduledDate).toMatch(/-01-01T00:00:00.000Z$/);
    expect(h!.pendingFire).toBeUndefined();
  });
});
