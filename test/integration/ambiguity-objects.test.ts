/**
 * Ambiguous object writes (the faithful storage mode): each storage write of the Object API's
 * createUpload and finishUpload, and of an object artifact's createArtifact and finishArtifact, in
 * turn applies, its answer is lost, and the SDK-style retry meets its own success. The caller gets
 * the answer it gets without the fault, and the object downloads byte for byte.
 */
import crypto from 'node:crypto';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, uniqueQueue, uploadObject } from '../helpers/work';
import { eachWrite } from '../helpers/ambiguity';

let svc: TestService;
beforeAll(async () => {
  // Only the sweep's fault: every other call answers as it should.
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_STORAGE_FAULTS: 'seed=1 backoff-ms=0', QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const sweep = (scenario: Parameters<typeof eachWrite>[1]) => eachWrite(svc.services.storage, scenario, { warm: () => svc.auth().currentScopes() });
const objects = () => new svc.tc.Object({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();
const sha256 = (data: Buffer | string) => crypto.createHash('sha256').update(data).digest('hex');

/** The object's bytes as a client downloads them (startDownload, then a GET of the URL). */
async function downloaded(name: string): Promise<string> {
  const { url } = await objects().startDownload(name, { acceptDownloadMethods: { simple: true } });
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return res.text();
}

test('Object API createUpload (data inline) and finishUpload', async () => {
  const ops = await sweep(async (ambiguous, n) => {
    const name = `amb/${slugid()}`;
    const uploadId = slugid();
    const expires = inAnHour();
    const data = Buffer.from(`inline ${n}`);
    const created = await ambiguous(() =>
      objects().createUpload(name, {
        projectId: 'p',
        uploadId,
        expires,
        proposedUploadMethods: { dataInline: { contentType: 'text/plain', objectData: data.toString('base64') } },
      }),
    );
    expect(created.error).toBeUndefined();
    expect(created.value).toEqual({ projectId: 'p', uploadId, expires, uploadMethod: { dataInline: true } });
    await objects().finishUpload(name, { projectId: 'p', uploadId, hashes: { sha256: sha256(data) } });
    expect(await downloaded(name)).toBe(`inline ${n}`);
  });
  expect(ops).toEqual(expect.arrayContaining(['artifacts.upload']));

  const finishOps = await sweep(async (ambiguous, n) => {
    const name = `amb/${slugid()}`;
    const uploadId = slugid();
    const data = Buffer.from(`put ${n}`);
    const o = objects();
    const r = await o.createUpload(name, {
      projectId: 'p',
      uploadId,
      expires: inAnHour(),
      proposedUploadMethods: { putUrl: { contentType: 'text/plain', contentLength: data.length } },
    });
    expect((await fetch(r.uploadMethod.putUrl.url, { method: 'PUT', headers: r.uploadMethod.putUrl.headers, body: data })).status).toBe(201);
    const finished = await ambiguous(() => o.finishUpload(name, { projectId: 'p', uploadId, hashes: { sha256: sha256(data) } }));
    expect(finished.error).toBeUndefined();
    expect(await downloaded(name)).toBe(`put ${n}`);
    // A client's own repeat of finishUpload is still fine, and nothing changed.
    await o.finishUpload(name, { projectId: 'p', uploadId });
    expect((await o.object(name)).hashes).toEqual({ sha256: sha256(data) });
  });
  expect(finishOps).toEqual(expect.arrayContaining(['artifacts.copy']));
});

test('object artifacts: createArtifact and finishArtifact', async () => {
  const tq = uniqueQueue();
  const ops: string[][] = [];
  for (const step of ['create', 'finish'] as const) {
    ops.push(
      await sweep(async (ambiguous, n) => {
        const taskId = slugid();
        await svc.queue().createTask(taskId, taskDef(tq, { projectId: 'proj-a' }));
        const c = await claimOne(svc, tq, taskId);
        const wq = svc.queue(c.credentials);
        const name = `public/amb-${step}-${n}.txt`;
        const data = Buffer.from(`${step} ${n}`);
        const body = { storageType: 'object', contentType: 'text/plain', expires: inAnHour(), contentLength: data.length };
        const created =
          step === 'create'
            ? await ambiguous(() => wq.createArtifact(taskId, 0, name, body))
            : { value: await wq.createArtifact(taskId, 0, name, body), error: undefined };
        expect(created.error).toBeUndefined();
        const res = created.value;
        await uploadObject(svc, res, data);
        const finish = () => wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId });
        if (step === 'finish') expect((await ambiguous(finish)).error).toBeUndefined();
        else await finish();
        const listed = await svc.queue().listArtifacts(taskId, 0);
        expect(listed.artifacts.map((a: any) => [a.name, a.storageType])).toEqual([[name, 'object']]);
        const { url } = await svc.queue().getArtifact(taskId, 0, name);
        expect(await (await fetch(url)).text()).toBe(`${step} ${n}`);
      }),
    );
  }
  expect(ops.flat()).toEqual(expect.arrayContaining(['Artifacts.insert']));
});
