/**
 * Event Grid delivery, without an emulator: the @azure/eventgrid client's requests are received by
 * a local HTTP endpoint and checked against CloudEvents 1.0 (the batch content type, the required
 * attributes, our type/subject/data mapping). A topic that answers 5xx gets the events later from
 * the reaper's sweep.
 */
import http from 'node:http';
import { AddressInfo } from 'node:net';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, uniqueQueue, reapUntil } from '../helpers/work';

interface Received {
  headers: http.IncomingHttpHeaders;
  url: string;
  body: any[];
}

let topic: http.Server;
let received: Received[] = [];
let failNext = 0;
let svc: TestService;

beforeAll(async () => {
  topic = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (failNext > 0) {
        failNext--;
        res.writeHead(503).end();
        return;
      }
      received.push({ headers: req.headers, url: req.url ?? '', body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => topic.listen(0, '127.0.0.1', r));
  const port = (topic.address() as AddressInfo).port;
  svc = await startTestService(
    { QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_EVENTGRID_ENDPOINT: `http://127.0.0.1:${port}/api/events`, QUEUE_EVENTGRID_KEY: 'topic-key' },
    { tuning: { eventSweepDelayS: 1, triggerLeaseS: 2 } },
  );
});
afterAll(async () => {
  await svc?.close();
  await new Promise((r) => topic.close(r));
});

const events = () => received.flatMap((r) => r.body);

test('each event is published as a CloudEvent 1.0: type per exchange, subject = routing key, data = message + routes', async () => {
  received = [];
  const tq = uniqueQueue();
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq, { routes: ['notify.test'], tags: { a: 'b' } }));
  const c = await claimOne(svc, tq, taskId);
  await svc.queue(c.credentials).reportCompleted(taskId, 0);

  for (const r of received) {
    expect(r.url).toMatch(/^\/api\/events\?api-version=/);
    expect(r.headers['content-type']).toMatch(/^application\/cloudevents-batch\+json/);
    expect(r.headers['aeg-sas-key']).toBe('topic-key');
  }
  const mine = events().filter((e) => e.data?.status?.taskId === taskId);
  expect(mine.map((e) => e.type)).toEqual([
    'taskcluster.queue.v1.task-defined',
    'taskcluster.queue.v1.task-pending',
    'taskcluster.queue.v1.task-running',
    'taskcluster.queue.v1.task-completed',
  ]);
  const status = (await svc.queue().status(taskId)).status;
  const done = mine[3];
  expect(done).toMatchObject({
    specversion: '1.0',
    id: `${taskId}.4`,
    source: svc.rootUrl,
    subject: `primary.${taskId}.0.${c.workerGroup}.${c.workerId}.${tq.replace('/', '.')}.-.${taskId}._`,
    datacontenttype: 'application/json',
    tcseq: 4,
  });
  expect(typeof done.time).toBe('string');
  expect(done.data).toEqual({
    version: 1,
    status,
    runId: 0,
    workerGroup: c.workerGroup,
    workerId: c.workerId,
    task: { tags: { a: 'b' } },
    routes: ['route.notify.test'],
  });
  expect(mine[0].data.task).toEqual({ tags: { a: 'b' } });

  // The hooks' exchanges are typed after their service.
  const hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const hookId = `h${slugid()}`;
  const metadata = { name: 'h', description: 'a hook', owner: 'tester@example.com' };
  await hooks.createHook('eg', hookId, { metadata, task: { taskQueueId: tq, payload: {}, metadata: { ...metadata, source: 'https://example.com/h' } } });
  const hookEvents = events().filter((e) => e.data?.hookId === hookId);
  expect(hookEvents.map((e) => [e.type, e.subject, e.data])).toEqual([['taskcluster.hooks.v1.hook-created', '_', { hookGroupId: 'eg', hookId, routes: [] }]]);
});

test('a topic that fails gets the events from the reaper', async () => {
  received = [];
  failNext = 1; // the publish right after the commit fails; the client does not retry it itself
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(uniqueQueue()));
  expect(failNext).toBe(0);
  expect(events().filter((e) => e.data?.status?.taskId === taskId)).toEqual([]);
  await reapUntil(svc, async () => events().filter((e) => e.data?.status?.taskId === taskId).length === 2, 15_000);
  expect(
    events()
      .filter((e) => e.data?.status?.taskId === taskId)
      .map((e) => e.id),
  ).toEqual([`${taskId}.1`, `${taskId}.2`]);
}, 30_000);
