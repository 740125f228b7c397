/**
 * createArtifact's rules (order of checks, run states, idempotency), listings with paging, and
 * expiry by the reaper.
 */
import hawk from 'hawk';
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { sweeperFor } from '../helpers/crash';
import { faultExtras, operationCalls } from '../helpers/ambiguity';
import { ArtifactBlobs, blobNameFor } from '../../shared/artifacts/blobs';
import { ArtifactStore } from '../../shared/artifacts/store';
import { indexKeys } from '../../shared/artifacts/expiry';
import { runKey } from '../../shared/artifacts/model';
import { execute } from '../../shared/lifecycle/executor';
import { Sweep } from '../../shared/storage/counter';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const worker = { workerGroup: 'wg', workerId: 'w1' };
const fromNow = (ms: number) => new Date(Date.now() + ms).toJSON();
const s3 = (expires = fromNow(3600_000), contentType = 'text/plain') => ({ storageType: 's3', contentType, expires });

async function claimedTask(overrides: Record<string, unknown> = {}) {
  const taskQueueId = `prov/rules-${Math.random().toString(36).slice(2, 8)}`;
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(taskQueueId, overrides));
  const { tasks } = await svc.queue().claimWork(taskQueueId, { ...worker, tasks: 1 });
  expect(tasks).toHaveLength(1);
  return { taskId, taskQueueId, claim: tasks[0], wq: svc.queue(tasks[0].credentials) };
}

async function claimNext(taskQueueId: string) {
  const { tasks } = await svc.queue().claimWork(taskQueueId, { ...worker, tasks: 1 });
  expect(tasks).toHaveLength(1);
  return svc.queue(tasks[0].credentials);
}

describe('createArtifact checks', () => {
  test('errors come in the reference order', async () => {
    const q = svc.queue();
    // Scopes first: another run's credentials are refused before anything else is looked at.
    const { taskId, wq } = await claimedTask({ expires: fromNow(2 * 3600_000) });
    await expectError(wq.createArtifact(taskId, 1, 'public/x', s3()), 403, 'InsufficientScopes');
    await expectError(wq.createArtifact(slugid(), 0, 'public/x', s3()), 403, 'InsufficientScopes');
    // Body schema.
    await expectError(q.createArtifact(taskId, 0, 'public/x', { storageType: 's3', expires: fromNow(3600_000) }), 400, 'InputValidationError');
    await expectError(
      q.createArtifact(taskId, 0, 'public/x', { storageType: 'error', reason: 'bogus', message: 'm', expires: fromNow(3600_000) }),
      400,
      'InputValidationError',
    );
    // Then: expires too far in the past, task missing, run missing, expires after the task.
    const e1 = await expectError(q.createArtifact(slugid(), 0, 'public/x', s3(fromNow(-16 * 60_000))), 400, 'InputError');
    expect(e1.message).toMatch(/Expires must be in the future/);
    const e2 = await expectError(q.createArtifact(slugid(), 0, 'public/x', s3()), 400, 'InputError');
    expect(e2.message).toMatch(/Task not found/);
    const e3 = await expectError(q.createArtifact(taskId, 3, 'public/x', s3()), 400, 'InputError');
    expect(e3.message).toMatch(/Run not found/);
    const e4 = await expectError(wq.createArtifact(taskId, 0, 'public/x', s3(fromNow(3 * 3600_000))), 400, 'InputError');
    expect(e4.message).toMatch(/after the task expiration/);
    // An expiry slightly in the past (clock drift) is fine.
    await wq.createArtifact(taskId, 0, 'public/drift', s3(fromNow(-60_000)));
    // Object artifacts pass the same checks (the rest is in object-artifacts.test.ts).
    const obj = await wq.createArtifact(taskId, 0, 'public/obj', { storageType: 'object', contentType: 'text/plain', expires: fromNow(3600_000) });
    expect(obj.storageType).toBe('object');
  });

  test('a run that was never claimed has no artifacts', async () => {
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef('prov/never-claimed'));
    await svc.queue().cancelTask(taskId);
    const err = await expectError(svc.queue().createArtifact(taskId, 0, 'public/x', s3()), 400, 'InputError');
    expect(err.message).toMatch(/not claimed/);
  });

  test('no artifacts after completed or failed; after exception only for 25 minutes', async () => {
    const done = await claimedTask();
    await done.wq.reportCompleted(done.taskId, 0);
    await expectError(done.wq.createArtifact(done.taskId, 0, 'public/late', s3()), 409, 'RequestConflict');

    const failed = await claimedTask();
    await failed.wq.reportFailed(failed.taskId, 0);
    await expectError(failed.wq.createArtifact(failed.taskId, 0, 'public/late', s3()), 409, 'RequestConflict');

    const exc = await claimedTask();
    await exc.wq.reportException(exc.taskId, 0, { reason: 'malformed-payload' });
    expect(
      await exc.wq.createArtifact(exc.taskId, 0, 'public/logs/after-exception', {
        storageType: 'error',
        reason: 'file-missing-on-worker',
        message: 'm',
        expires: fromNow(3600_000),
      }),
    ).toEqual({ storageType: 'error' });
    // 26 minutes after the exception: closed.
    await execute(svc.services, exc.taskId, (t) => {
      const next = structuredClone(t);
      next.runs[0].resolved = new Date(Date.now() - 26 * 60_000).toJSON();
      // A bookkeeping record: the row changes, no run changes state (no history, no event).
      return { record: { name: 'mark-uploads', runId: 0 }, next, effects: [] };
    });
    await expectError(exc.wq.createArtifact(exc.taskId, 0, 'public/logs/too-late', s3()), 409, 'RequestConflict');
  });

  test('re-creating: identical is fine, expires may grow, contentType and type may not change', async () => {
    const { taskId, wq } = await claimedTask();
    const expires = fromNow(3600_000);
    const first = await wq.createArtifact(taskId, 0, 'public/a.txt', s3(expires));
    const again = await wq.createArtifact(taskId, 0, 'public/a.txt', s3(expires));
    expect(again.storageType).toBe('s3');
    expect(typeof again.putUrl).toBe('string');
    expect(first.contentType).toBe(again.contentType);
    const later = fromNow(2 * 3600_000);
    await wq.createArtifact(taskId, 0, 'public/a.txt', s3(later));
    expect((await svc.queue().artifactInfo(taskId, 0, 'public/a.txt')).expires).toBe(later);
    await expectError(wq.createArtifact(taskId, 0, 'public/a.txt', s3(expires)), 409, 'RequestConflict');
    await expectError(wq.createArtifact(taskId, 0, 'public/a.txt', s3(later, 'application/json')), 409, 'RequestConflict');
    await expectError(
      wq.createArtifact(taskId, 0, 'public/a.txt', { storageType: 'reference', url: 'https://example.com', contentType: 'text/plain', expires: later }),
      409,
      'RequestConflict',
    );
    await expectError(wq.createArtifact(taskId, 0, 'public/a.txt', { storageType: 'link', artifact: 'public/b', expires: later }), 409, 'RequestConflict');
    // contentLength is accepted and listed.
    await wq.createArtifact(taskId, 0, 'public/sized.bin', { ...s3(expires, 'application/octet-stream'), contentLength: 1234 });
    expect(await svc.queue().artifactInfo(taskId, 0, 'public/sized.bin')).toEqual({
      storageType: 's3',
      name: 'public/sized.bin',
      expires,
      contentType: 'application/octet-stream',
      contentLength: 1234,
    });
    // A literal '/' in the URL names the same artifact as %2F (signed by hand: clients always encode).
    const url = `${svc.rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/public/literal/slash.txt`;
    const { header } = hawk.client.header(url, 'POST', { credentials: { id: svc.root.clientId, key: svc.root.accessToken, algorithm: 'sha256' } });
    const r = await fetch(url, { method: 'POST', headers: { authorization: header, 'content-type': 'application/json' }, body: JSON.stringify(s3(expires)) });
    expect(r.status).toBe(200);
    expect((await r.json()).storageType).toBe('s3');
    expect((await svc.queue().artifactInfo(taskId, 0, 'public/literal/slash.txt')).name).toBe('public/literal/slash.txt');
    const info = await svc.queue().latestArtifactInfo(taskId, 'public/sized.bin');
    expect(info.contentLength).toBe(1234);
  });

  test('finishArtifact is only for object artifacts: 404 when missing, 400 otherwise', async () => {
    const { taskId, wq } = await claimedTask();
    await expectError(wq.finishArtifact(taskId, 0, 'public/none', { uploadId: slugid() }), 404, 'ResourceNotFound');
    await wq.createArtifact(taskId, 0, 'public/s3', s3());
    await expectError(wq.finishArtifact(taskId, 0, 'public/s3', { uploadId: slugid() }), 400, 'InputError');
  });

  test('a crash after any storage call of createArtifact is repaired by the client retrying', async () => {
    const failed = await sweeperFor(svc)(async (faulty, n) => {
      // A fresh run each time, so the run's first-upload mark is among the calls that fail.
      const { taskId, wq } = await claimedTask();
      const name = `public/crash-${n}`;
      const expires = fromNow(3600_000 + n * 1000);
      const r = await faulty(() => wq.createArtifact(taskId, 0, name, s3(expires)));
      if (r.hit) expect(r.error?.statusCode).toBe(500);
      await wq.createArtifact(taskId, 0, name, s3(expires));
      const row = await new ArtifactStore(svc.services.storage).get(taskId, 0, name);
      expect(row?.expires).toBe(expires);
      // The expiry index row exists, so the artifact will be collected.
      const keys = indexKeys(runKey(taskId, 0), expires);
      expect(await svc.services.storage.table('Artifacts').get(keys.partitionKey, keys.rowKey)).toBeDefined();
      // The run is marked, so its resolution commits the upload.
      expect((await svc.services.tasks.load(taskId))?.runs[0].uploads).toBe(true);
    });
    expect(failed.length).toBeGreaterThanOrEqual(4);
  });
});

describe('listings', () => {
  test('listArtifacts pages with limit and continuationToken; listLatestArtifacts follows the latest run', async () => {
    const { taskId, taskQueueId, wq } = await claimedTask({ retries: 1 });
    const expires = fromNow(3600_000);
    const names = ['public/a', 'public/b/c', 'public/d e', 'private/z', 'public/y'];
    for (const name of names)
      await wq.createArtifact(taskId, 0, name, {
        storageType: 'reference',
        url: `https://example.com/${encodeURIComponent(name)}`,
        contentType: 'text/plain',
        expires,
      });

    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await svc.queue().listArtifacts(taskId, 0, token ? { limit: 2, continuationToken: token } : { limit: 2 });
      expect(page.artifacts.length).toBeLessThanOrEqual(2);
      for (const a of page.artifacts) expect(a).toEqual({ storageType: 'reference', name: a.name, expires, contentType: 'text/plain' });
      seen.push(...page.artifacts.map((a: any) => a.name));
      token = page.continuationToken;
      pages++;
    } while (token);
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(seen.sort()).toEqual([...names].sort());
    expect((await svc.queue().listArtifacts(taskId, 0)).artifacts).toHaveLength(names.length);
    expect((await svc.queue().listLatestArtifacts(taskId)).artifacts).toHaveLength(names.length);

    // A retry run starts empty; the latest forms follow it.
    await wq.reportException(taskId, 0, { reason: 'worker-shutdown' });
    const wq1 = await claimNext(taskQueueId);
    await wq1.createArtifact(taskId, 1, 'public/run1', { storageType: 'reference', url: 'https://example.com/run1', contentType: 'text/plain', expires });
    expect((await svc.queue().listLatestArtifacts(taskId)).artifacts.map((a: any) => a.name)).toEqual(['public/run1']);
    expect((await svc.queue().latestArtifactInfo(taskId, 'public/run1')).name).toBe('public/run1');
    await expectError(svc.queue().latestArtifactInfo(taskId, 'public/a'), 404, 'ResourceNotFound');
    expect((await svc.queue().artifactInfo(taskId, 0, 'public/a')).name).toBe('public/a');
    expect((await svc.queue().getLatestArtifact(taskId, 'public/run1')).url).toBe('https://example.com/run1');

    await expectError(svc.queue().listArtifacts(taskId, 2), 404, 'ResourceNotFound');
    await expectError(svc.queue().listArtifacts(slugid(), 0), 404, 'ResourceNotFound');
    await expectError(svc.queue().listLatestArtifacts(slugid()), 404, 'ResourceNotFound');
    await expectError(svc.queue().artifactInfo(taskId, 0, 'public/none'), 404, 'ResourceNotFound');
    await expectError(svc.queue().getArtifact(taskId, 0, 'public/none'), 404, 'ResourceNotFound');
  });

  test('latest forms 404 for a task without runs', async () => {
    // A task waiting for an unresolved dependency has no runs.
    const unscheduled = slugid();
    const dep = slugid();
    await svc.queue().createTask(dep, taskDef('prov/norun'));
    await svc.queue().createTask(unscheduled, taskDef('prov/norun', { dependencies: [dep] }));
    await expectError(svc.queue().listLatestArtifacts(unscheduled), 404, 'ResourceNotFound');
    await expectError(svc.queue().getLatestArtifact(unscheduled, 'public/x'), 404, 'ResourceNotFound');
    await expectError(svc.queue().latestArtifact(unscheduled, 'public/x'), 404, 'ResourceNotFound');
  });
});

describe('expiry', () => {
  test('expired artifacts answer 410 until the reaper removes blob and row; live ones stay', async () => {
    const { taskId, wq } = await claimedTask();
    const past = fromNow(-60_000);
    const res = await wq.createArtifact(taskId, 0, 'public/old.log', s3(past));
    const put = await fetch(res.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain', 'content-length': '3' }, body: 'old' });
    expect(put.status).toBe(201);
    await wq.createArtifact(taskId, 0, 'public/old-ref', {
      storageType: 'reference',
      url: 'https://example.com/old',
      contentType: 'text/plain',
      expires: past,
    });
    await wq.createArtifact(taskId, 0, 'public/live-ref', {
      storageType: 'reference',
      url: 'https://example.com/live',
      contentType: 'text/plain',
      expires: fromNow(3600_000),
    });
    await wq.reportCompleted(taskId, 0); // commits the upload
    const blobs = new ArtifactBlobs(svc.services.storage);
    const blobName = blobNameFor(taskId, 0, 'public/old.log');
    expect(await blobs.exists(blobName)).toBe(true);

    await expectError(svc.queue().getArtifact(taskId, 0, 'public/old.log'), 410, 'ResourceExpired');
    await expectError(svc.queue().artifact(taskId, 0, 'public/old-ref'), 410, 'ResourceExpired');
    expect((await svc.queue().listArtifacts(taskId, 0)).artifacts).toHaveLength(3);

    await svc.runReaper();

    expect(await blobs.exists(blobName)).toBe(false);
    await expectError(svc.queue().getArtifact(taskId, 0, 'public/old.log'), 404, 'ResourceNotFound');
    await expectError(svc.queue().getArtifact(taskId, 0, 'public/old-ref'), 404, 'ResourceNotFound');
    expect((await svc.queue().listArtifacts(taskId, 0)).artifacts.map((a: any) => a.name)).toEqual(['public/live-ref']);
    expect((await svc.queue().getArtifact(taskId, 0, 'public/live-ref')).url).toBe('https://example.com/live');
    // The due index row is gone too; the live artifact's index row remains.
    const table = svc.services.storage.table('Artifacts');
    const due = indexKeys(runKey(taskId, 0), new Date(past).toJSON());
    expect(await table.get(due.partitionKey, due.rowKey)).toBeUndefined();
    const live = (await svc.queue().artifactInfo(taskId, 0, 'public/live-ref')).expires;
    const liveKeys = indexKeys(runKey(taskId, 0), live);
    expect(await table.get(liveKeys.partitionKey, liveKeys.rowKey)).toBeDefined();
  });

  test('an extended expiry outlives its old index row', async () => {
    const { taskId, wq } = await claimedTask();
    await wq.createArtifact(taskId, 0, 'public/kept', {
      storageType: 'reference',
      url: 'https://example.com/k',
      contentType: 'text/plain',
      expires: fromNow(-60_000),
    });
    await wq.createArtifact(taskId, 0, 'public/kept', {
      storageType: 'reference',
      url: 'https://example.com/k',
      contentType: 'text/plain',
      expires: fromNow(3600_000),
    });
    await svc.runReaper();
    expect((await svc.queue().getArtifact(taskId, 0, 'public/kept')).url).toBe('https://example.com/k');
  });
});

describe('storage cost', () => {
  test('calls per artifact operation', async () => {
    const { taskId, wq } = await claimedTask();
    const meter = svc.services.storage.meter;
    // Calls of the operation: a retry of an attempt whose answer was lost, or a read after a page
    // Azure cut short, is Azure's doing, not the operation's (the faithful mode counts them apart).
    // The earlier requests' background work (event delivery, index writes) finishes first, so the
    // window holds the operation's calls only, however slow the machine.
    const callsOf = async (fn: () => Promise<unknown>) => {
      await svc.settled();
      const extras = faultExtras(svc.services.storage);
      meter.startCounting();
      await Sweep.run(fn);
      const ops = operationCalls(meter.armedOps, extras.since());
      meter.disarm();
      return ops;
    };
    // The calls themselves, so that a count that is off shows which call it was.
    const count = async (fn: () => Promise<unknown>) => (await callsOf(fn)).sort();
    const expires = fromNow(2 * 3600_000);
    const first = await count(() => wq.createArtifact(taskId, 0, 'public/one', s3(expires)));
    const second = await count(() => wq.createArtifact(taskId, 0, 'public/two', s3(expires)));
    const res = await wq.createArtifact(taskId, 0, 'public/three', s3(expires));
    await fetch(res.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain', 'content-length': '1' }, body: 'x' });
    const firstRead = await count(() => svc.queue().getArtifact(taskId, 0, 'public/three'));
    const secondRead = await count(() => svc.queue().getArtifact(taskId, 0, 'public/three'));
    const sized = await wq.createArtifact(taskId, 0, 'public/sized', { ...s3(expires), contentLength: 1 });
    await fetch(sized.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain', 'content-length': '1' }, body: 'x' });
    const sizedRead = await count(() => svc.queue().getArtifact(taskId, 0, 'public/sized'));
    // Task read + the run's first-upload mark + index upsert + insert; a second artifact with the
    // same expiry skips the mark and the index.
    expect(first).toHaveLength(4);
    expect(second).toHaveLength(2);
    // First read: row + commit + merge (+ a 2-byte read when a length was declared); later: the row.
    expect(firstRead).toHaveLength(3);
    expect(sizedRead).toHaveLength(4);
    expect(secondRead).toHaveLength(1);

    // Resolving: nothing for a run without s3 artifacts; else one query for pending uploads, then
    // a commit and a merge per pending upload.
    const bare = await claimedTask();
    // Only the artifact calls are compared: a background call of the earlier requests (a hint or
    // trigger delete) may land inside the counted window on a loaded machine.
    const artifactCalls = async (fn: () => Promise<unknown>) => {
      const all = await callsOf(fn);
      return { total: all.length, ops: all.filter((op) => /^artifacts\./i.test(op)) };
    };
    const resolveBare = await artifactCalls(() => bare.wq.reportCompleted(bare.taskId, 0));
    const busy = await claimedTask();
    for (const name of ['public/p1', 'public/p2']) {
      const r = await busy.wq.createArtifact(busy.taskId, 0, name, s3(expires));
      await fetch(r.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain', 'content-length': '1' }, body: 'x' });
    }
    const resolveBusy = await artifactCalls(() => busy.wq.reportCompleted(busy.taskId, 0));
    expect(resolveBare.ops).toEqual([]);
    expect(resolveBusy.ops.sort()).toEqual(['Artifacts.merge', 'Artifacts.merge', 'Artifacts.query', 'artifacts.commit', 'artifacts.commit']);
    console.log(
      JSON.stringify({
        createFirst: first.length,
        createSameExpiry: second.length,
        firstRead: firstRead.length,
        firstReadWithLength: sizedRead.length,
        laterRead: secondRead.length,
        reportCompletedNoArtifacts: resolveBare.total,
        reportCompletedTwoPending: resolveBusy.total,
      }),
    );
  });
});
