/**
 * `tcq` against a fake queue on loopback that answers with hostile task data: nothing it sends
 * reaches the terminal as a control character, credentials in the root URL are refused without
 * being echoed, and numbers and durations are bounded before any call (issue 34).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { main as tcq } from '../../bin/tcq/main';
import { untilDate, MAX_AHEAD_DAYS, MAX_LIMIT } from '../../bin/tcq/bounds';
import { safeLine, safeText } from '../../bin/tcq/safe';

/** Clears the screen, sets the clipboard (OSC 52), starts a C1 CSI, reverses text (RLO), and fakes a row. */
const HOSTILE = 'build\u001b[2J\u001b]52;c;ZXZpbA==\u0007\u009b31m\u202eexe.txt\u007f\nFAKE-TASK  completed';
/** What a terminal may act on; none of it may be printed raw. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

let server: http.Server;
let rootUrl: string;
/** Requests the fake queue received: a refused argument must not cause one. */
let calls: string[] = [];

const status = { taskId: 'T1', state: 'failed', taskQueueId: 'p/w', taskGroupId: 'G1', retriesLeft: 0, deadline: '2030-01-01T00:00:00.000Z', runs: [] };
const ANSWERS: Record<string, { status: number; body: unknown }> = {
  '/api/queue/v1/task/T1/status': { status: 200, body: { status } },
  '/api/queue/v1/task/T1': { status: 200, body: { metadata: { name: HOSTILE } } },
  '/api/queue/v1/task/T3/status': { status: 200, body: { status: { ...status, taskId: 'T3', runs: [{ runId: 0, state: 'failed' }] } } },
  '/api/queue/v1/task/T3/runs/0/artifact-content/public%2Flogs%2Flive.log': { status: 200, body: { storageType: 's3', url: 'http://unused' } },
  '/api/queue/v1/task/T3/runs/0/artifacts/public%2Flogs%2Flive.log': { status: 200, body: `line 1\n\tindented\r\n${HOSTILE}\rover` },
  '/api/queue/v1/task-group/G1/list': {
    status: 200,
    body: { taskGroupId: 'G1', tasks: [{ status: { ...status, runs: [{}] }, task: { metadata: { name: HOSTILE } } }] },
  },
  '/api/queue/v1/task/T2/status': { status: 404, body: { code: 'ResourceNotFound', message: `no task ${HOSTILE}` } },
};

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    calls.push(path);
    const a = ANSWERS[path] ?? { status: 404, body: { code: 'ResourceNotFound', message: `fake queue: no ${path}` } };
    const text = typeof a.body === 'string';
    res.writeHead(a.status, { 'content-type': text ? 'text/plain' : 'application/json' });
    res.end(text ? a.body : JSON.stringify(a.body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  rootUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  calls = [];
});

async function run(argv: string[], env: NodeJS.ProcessEnv = { TASKCLUSTER_ROOT_URL: rootUrl }) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await tcq(argv, env, { out: (s) => void out.push(s), err: (s) => void err.push(s) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('control characters from task data', () => {
  test('task status: a hostile task name is one escaped line, not codes the terminal obeys', async () => {
    const r = await run(['task', 'status', 'T1']);
    expect(r.code).toBe(0);
    expect(r.out).not.toMatch(CONTROL);
    const line = r.out.split('\n').find((l) => l.startsWith('task:'))!;
    expect(line).toContain('build\\u001b[2J\\u001b]52;c;ZXZpbA==\\u0007\\u009b31m\\u202eexe.txt\\u007f\\nFAKE-TASK  completed');
    expect(r.out).not.toMatch(/^FAKE-TASK/m);
  });

  test('group status: a name cannot add a row to the table', async () => {
    const r = await run(['group', 'status', 'G1']);
    expect(r.code).toBe(0);
    expect(r.out).not.toMatch(CONTROL);
    expect(r.out.split('\n')).toHaveLength(4); // summary, blank, header, one row
  });

  test('task log: its lines and tabs as they are, every other control escaped', async () => {
    const r = await run(['task', 'log', 'T3']);
    expect(r.code).toBe(0);
    expect(r.out.replaceAll('\r\n', '\n')).not.toMatch(CONTROL);
    expect(r.out).toBe(`line 1\n\tindented\r\n${safeLine(HOSTILE).replace('\\n', '\n')}\\rover`);
  });

  test('--json: JSON.stringify leaves DEL, C1 and bidi raw; tcq escapes them and the JSON still means the same', async () => {
    expect(JSON.stringify(HOSTILE)).toMatch(/[\u007f\u009b\u202e]/);
    const r = await run(['task', 'status', 'T1', '--json']);
    expect(r.code).toBe(0);
    expect(r.out).not.toMatch(CONTROL);
    expect(JSON.parse(r.out).task.metadata.name).toBe(HOSTILE);
    const call = await run(['call', 'queue', 'task', 'T1']);
    expect(call.out).not.toMatch(CONTROL);
    expect(JSON.parse(call.out).metadata.name).toBe(HOSTILE);
  });

  test("an error that echoes the service's message is escaped too", async () => {
    const r = await run(['task', 'status', 'T2']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('no task build\\u001b[2J');
    expect(r.err).not.toMatch(CONTROL);
  });

  test('safeText keeps newlines, tabs and CRLF; safeLine keeps none', () => {
    expect(safeText('a\n\tb\r\nc\rd\u001bx')).toBe('a\n\tb\r\nc\\rd\\u001bx');
    expect(safeLine('a\n\tb\r\nc')).toBe('a\\n\\tb\\r\\nc');
  });
});

describe('credentials in TASKCLUSTER_ROOT_URL', () => {
  test.each([
    'https://admin:s3cr3t-token@tc.example.com',
    'http://:s3cr3t-token@127.0.0.1:7071',
    'admin:s3cr3t-token@tc.example.com',
    'http:/admin:s3cr3t-token@x',
  ])('%s is refused (exit 2) without echoing the token, before any call', async (url) => {
    const r = await run(['task', 'status', 'T1'], { TASKCLUSTER_ROOT_URL: url });
    expect(r).toMatchObject({ code: 2, out: '' });
    expect(r.err).toContain('TASKCLUSTER_ROOT_URL holds credentials (user:token@host)');
    expect(r.err).not.toContain('s3cr3t');
  });

  test('an @ in the path is no credential', async () => {
    expect((await run(['task', 'status', 'T1'], { TASKCLUSTER_ROOT_URL: `${rootUrl}/a@b/` })).err).not.toContain('credentials');
  });
});

describe('numbers and durations are bounded before any call', () => {
  test.each(['1e12', '0', '-1', '1.5', '0x10', String(MAX_LIMIT + 1), 'Infinity'])('--limit %s: exit 2', async (limit) => {
    const r = await run(['queue', 'pending', 'p/w', `--limit=${limit}`]);
    expect(r).toMatchObject({ code: 2, err: `error: --limit must be a whole number from 1 to ${MAX_LIMIT}, got '${limit}'` });
    expect(calls).toEqual([]);
  });

  test.each(['999999d', '367d', '99999999999999999999d', '9000-01-01T00:00:00Z'])('--until %s: exit 2', async (until) => {
    const r = await run(['worker', 'quarantine', 'p/w', 'g', 'w', '--until', until]);
    expect(r).toMatchObject({ code: 2, err: `error: --until may be at most ${MAX_AHEAD_DAYS} days ahead, got '${until}'` });
    expect(calls).toEqual([]);
  });

  test('--until up to the bound, an ISO time, or now', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    expect(untilDate(`${MAX_AHEAD_DAYS}d`, now)).toBe('2027-01-02T00:00:00.000Z');
    expect(untilDate('90m', now)).toBe('2026-01-01T01:30:00.000Z');
    expect(untilDate('2026-06-01T00:00:00Z', now)).toBe('2026-06-01T00:00:00.000Z');
    expect(untilDate('now', now)).toBe(now.toJSON());
  });

  test.each(['1e12', 'Infinity', '0', '0.5', String(MAX_AHEAD_DAYS * 24 * 60 + 1)])('events tail --expires-min %s: exit 2', async (min) => {
    const r = await run(['events', 'tail', '--expires-min', min]);
    expect(r).toMatchObject({ code: 2, err: `error: --expires-min must be a whole number from 1 to ${MAX_AHEAD_DAYS * 24 * 60}, got '${min}'` });
    expect(calls).toEqual([]);
  });
});
