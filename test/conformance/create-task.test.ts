/**
 * createTask, task, status, tasks, statuses and authentication, driven by the unmodified
 * taskcluster-client (v87) over HTTP against Azurite.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

describe('createTask', () => {
  test('creates a pending task and reads it back with defaults', async () => {
    const taskId = slugid();
    const def = taskDef('prov/wt', { scopes: ['foo:bar'], routes: ['index.x'] });
    const { status } = await svc.queue().createTask(taskId, def);
    expect(status).toMatchObject({
      taskId,
      state: 'pending',
      provisionerId: 'prov',
      workerType: 'wt',
      taskQueueId: 'prov/wt',
      retriesLeft: 5,
      priority: 'lowest',
      schedulerId: '-',
      projectId: 'none',
      taskGroupId: taskId,
    });
    expect(status.runs).toEqual([
      { runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) },
    ]);

    const task = await svc.queue().task(taskId);
    expect(task).toEqual({
      ...def,
      provisionerId: 'prov',
      workerType: 'wt',
      schedulerId: '-',
      projectId: 'none',
      taskGroupId: taskId,
      dependencies: [],
      requires: 'all-completed',
      priority: 'lowest',
      retries: 5,
      expires: new Date(new Date(def.deadline).getTime() + 365 * 24 * 3600 * 1000).toJSON(),
      tags: {},
      extra: {},
    });
    expect((await svc.queue().status(taskId)).status).toEqual(status);
  });

  test('identical re-create is 200 with the same status; a different one is 409', async () => {
    const taskId = slugid();
    const def = taskDef();
    const first = await svc.queue().createTask(taskId, def);
    // Same instant written with more fractional digits normalizes to the same definition.
    const again = await svc.queue().createTask(taskId, { ...def, created: def.created.replace('Z', '000Z').replace(/\.(\d{3})000Z$/, '.$1000Z') });
    expect(again).toEqual(first);
    // Key order is not part of a definition.
    const reordered = Object.fromEntries(Object.entries({ ...def, payload: { b: 2, a: { y: 1, x: [1, 2] } } }).reverse());
    const other = slugid();
    await svc.queue().createTask(other, { ...def, payload: { a: { x: [1, 2], y: 1 }, b: 2 } });
    expect((await svc.queue().createTask(other, reordered)).status.taskId).toBe(other);
    await expectError(svc.queue().createTask(taskId, { ...def, payload: { different: true } }), 409, 'RequestConflict');
  });

  test('accepts provisionerId/workerType instead of taskQueueId, and refuses a mismatch', async () => {
    const { taskQueueId, ...rest } = taskDef('p1/w1');
    void taskQueueId;
    const { status } = await svc.queue().createTask(slugid(), { ...rest, provisionerId: 'p1', workerType: 'w1' });
    expect(status.taskQueueId).toBe('p1/w1');
    await expectError(svc.queue().createTask(slugid(), { ...taskDef('p1/w1'), provisionerId: 'p2' }), 400, 'InputError');
    await expectError(svc.queue().createTask(slugid(), rest), 400, 'InputError');
  });

  test('input rules give 400', async () => {
    const q = svc.queue();
    const now = Date.now();
    await expectError(q.createTask(slugid(), taskDef('prov/wt', { created: new Date(now - 20 * 60_000).toJSON() })), 400, 'InputError');
    await expectError(q.createTask(slugid(), taskDef('prov/wt', { deadline: new Date(now + 6 * 24 * 3600_000).toJSON() })), 400, 'InputError');
    await expectError(q.createTask(slugid(), taskDef('prov/wt', { expires: new Date(now + 60_000).toJSON() })), 400, 'InputError');
    await expectError(q.createTask(slugid(), taskDef('prov/wt', { scopes: ['a:**'] })), 400, 'InputError');
    await expectError(q.createTask(slugid(), taskDef('prov/wt', { priority: 'normal' })), 400, 'InputValidationError');
    await expectError(q.createTask(slugid(), taskDef('prov/wt', { unknownField: 1 })), 400, 'InputValidationError');
    await expectError(q.createTask('not-a-slugid', taskDef()), 400, 'InvalidRequestArguments');
  });

  test('an oversized definition is refused with 413, not 500', async () => {
    const big = 'x'.repeat(900 * 1024);
    const err = await expectError(svc.queue().createTask(slugid(), taskDef('prov/wt', { payload: { big } })), 413, 'InputTooLarge');
    expect(err.message).toMatch(/at most \d+ bytes/);
  });

  test('a definition over 64 KiB (chunked across properties) round-trips', async () => {
    const taskId = slugid();
    const payload = { blob: 'y'.repeat(200 * 1024), nested: { a: [1, 2, 3] } };
    await svc.queue().createTask(taskId, taskDef('prov/wt', { payload }));
    expect((await svc.queue().task(taskId)).payload).toEqual(payload);
  });

  test('task groups keep one schedulerId', async () => {
    const group = slugid();
    await svc.queue().createTask(slugid(), taskDef('prov/wt', { taskGroupId: group, schedulerId: 'sched-a' }));
    await svc.queue().createTask(slugid(), taskDef('prov/wt', { taskGroupId: group, schedulerId: 'sched-a' }));
    await expectError(svc.queue().createTask(slugid(), taskDef('prov/wt', { taskGroupId: group, schedulerId: 'sched-b' })), 409, 'RequestConflict');
  });
});

describe('errors and routing', () => {
  test('malformed JSON is MalformedPayload; unknown routes are 404; unknown query keys are 400', async () => {
    const r = await fetch(`${svc.rootUrl}/api/queue/v1/task/${slugid()}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: '{not json',
    });
    expect(r.status).toBe(400);
    expect((await r.json()).code).toBe('MalformedPayload');
    const r2 = await fetch(`${svc.rootUrl}/api/queue/v1/no/such/route`);
    expect(r2.status).toBe(404);
    const body = await r2.json();
    expect(Object.keys(body).sort()).toEqual(['code', 'message', 'requestInfo']);
    const r3 = await fetch(`${svc.rootUrl}/api/queue/v1/ping?foo=1`);
    expect(r3.status).toBe(400);
    expect((await r3.json()).code).toBe('InvalidRequestArguments');
  });

  test('404 for a missing task, with the Taskcluster error shape', async () => {
    const err = await expectError(svc.queue().task(slugid()), 404, 'ResourceNotFound');
    expect(err.body.requestInfo.method).toBe('task');
  });
});

describe('authentication and scopes', () => {
  const creatorScopes = ['queue:create-task:lowest:prov/wt', 'queue:scheduler-id:-', 'queue:create-task:project:none', 'queue:get-task:*'];

  test('403 without scopes; 401 with a wrong key', async () => {
    const anon = svc.queue(null);
    const err = await expectError(anon.createTask(slugid(), taskDef()), 403, 'InsufficientScopes');
    expect(err.message).toMatch(/queue:create-task/);
    await expectError(
      svc.queue({ clientId: 'static/root', accessToken: 'wrong-wrong-wrong-wrong-wrong' }).createTask(slugid(), taskDef()),
      401,
      'AuthenticationFailed',
    );
    const r = await fetch(`${svc.rootUrl}/api/queue/v1/task/${slugid()}/status`, {
      headers: { authorization: 'Hawk id="static/root", ts="1", nonce="x", mac="bad"' },
    });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('hawk');
  });

  test('a client created through the Auth API works, and its temporary credentials too', async () => {
    const clientId = `test/creator-${slugid()}`;
    const created = await svc
      .auth()
      .createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'creator', scopes: creatorScopes });
    expect(created.accessToken).toHaveLength(44);
    const creds = { clientId, accessToken: created.accessToken };
    await svc.queue(creds).createTask(slugid(), taskDef());
    // Missing the priority scope for `high` → 403 naming the missing part.
    const err = await expectError(svc.queue(creds).createTask(slugid(), taskDef('prov/wt', { priority: 'high' })), 403, 'InsufficientScopes');
    expect(err.message).toContain('queue:create-task:high:prov/wt');

    const temp = svc.tc.createTemporaryCredentials({ start: new Date(), expiry: new Date(Date.now() + 600_000), scopes: creatorScopes, credentials: creds });
    await svc.queue(temp).createTask(slugid(), taskDef());
    const named = svc.tc.createTemporaryCredentials({
      clientId: 'named-temp',
      start: new Date(),
      expiry: new Date(Date.now() + 600_000),
      scopes: ['queue:get-task:*'],
      credentials: { clientId: 'static/root', accessToken: svc.root.accessToken },
    });
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef());
    expect((await svc.queue(named).task(taskId)).taskQueueId).toBe('prov/wt');
  });

  test('a tampered certificate is 401', async () => {
    const temp = svc.tc.createTemporaryCredentials({
      start: new Date(),
      expiry: new Date(Date.now() + 600_000),
      scopes: ['queue:get-task:*'],
      credentials: svc.root,
    });
    const cert = JSON.parse(temp.certificate);
    cert.scopes = ['*'];
    await expectError(svc.queue({ ...temp, certificate: JSON.stringify(cert) }).task(slugid()), 401, 'AuthenticationFailed');
    const expired = svc.tc.createTemporaryCredentials({
      start: new Date(Date.now() - 3600_000),
      expiry: new Date(Date.now() - 1800_000),
      scopes: ['queue:get-task:*'],
      credentials: svc.root,
    });
    await expectError(svc.queue(expired).task(slugid()), 401, 'AuthenticationFailed');
  });

  test('authorizedScopes narrows: too narrow is 403, beyond the client is 401', async () => {
    const narrowed = svc.queue(svc.root, { authorizedScopes: ['queue:get-task:*'] });
    await expectError(narrowed.createTask(slugid(), taskDef()), 403, 'InsufficientScopes');
    const clientId = `test/narrow-${slugid()}`;
    const c = await svc.auth().createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: '', scopes: ['queue:get-task:*'] });
    await expectError(
      svc.queue({ clientId, accessToken: c.accessToken }, { authorizedScopes: ['queue:status:*'] }).status(slugid()),
      401,
      'AuthenticationFailed',
    );
  });

  test('roles: assume: expansion and the anonymous role', async () => {
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef());
    await expectError(svc.queue(null).status(taskId), 403);
    await svc.auth().createRole('anonymous', { description: 'public reads', scopes: ['queue:status:*'] });
    svc.services.clients['rolesCache'] = undefined; // roles are cached for 10 s per instance
    expect((await svc.queue(null).status(taskId)).status.taskId).toBe(taskId);

    await svc.auth().createRole('project:builders*', { description: 'param role', scopes: ['queue:get-task:<..>*'] });
    const clientId = `test/role-${slugid()}`;
    const c = await svc
      .auth()
      .createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: '', scopes: ['assume:project:builders' + taskId.slice(0, 3)] });
    svc.services.clients['rolesCache'] = undefined;
    expect((await svc.queue({ clientId, accessToken: c.accessToken }).task(taskId)).taskQueueId).toBe('prov/wt');
    const expanded = await svc.auth().expandScopes({ scopes: ['assume:project:builders' + taskId.slice(0, 3)] });
    expect(expanded.scopes).toContain('queue:get-task:' + taskId.slice(0, 3) + '*');
  });

  test('bewit-signed URLs work for GET', async () => {
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef());
    const url = svc.queue().buildSignedUrl(svc.queue().status, taskId, { expiration: 60 });
    const r = await fetch(url);
    expect(r.status).toBe(200);
    expect((await r.json()).status.taskId).toBe(taskId);
    const bad = url.replace(/bewit=([^&]+)/, (_m: string, b: string) => `bewit=${b.slice(0, -4)}AAAA`);
    expect((await fetch(bad)).status).toBe(401);
  });
});

describe('batch reads', () => {
  test('tasks and statuses page through ids and omit unknown ones', async () => {
    const ids = [slugid(), slugid(), slugid()];
    for (const id of ids) await svc.queue().createTask(id, taskDef());
    const unknown = slugid();
    const page1 = await svc.queue().statuses({ taskIds: [...ids, unknown] }, { limit: 2 });
    expect(page1.statuses.map((s: any) => s.taskId)).toEqual(ids.slice(0, 2));
    const page2 = await svc.queue().statuses({ taskIds: [...ids, unknown] }, { limit: 2, continuationToken: page1.continuationToken });
    expect(page2.statuses.map((s: any) => s.taskId)).toEqual([ids[2]]);
    expect(page2.continuationToken).toBeUndefined();
    const tasks = await svc.queue().tasks({ taskIds: ids });
    expect(tasks.tasks.map((t: any) => t.taskId)).toEqual(ids);
    await expectError(svc.queue(svc.root, { authorizedScopes: [`queue:get-task:${ids[0]}`] }).tasks({ taskIds: ids }), 403);
  });
});
