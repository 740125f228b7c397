/**
 * `tcq secret list|get|set|remove`, run in-process against the service on the in-memory store, as
 * an operator types them: the list is a table of names and expiry with expired ones marked and
 * never a value; set takes the value from --payload (inline, a file or stdin) and an expiry.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { main as tcq } from '../../bin/tcq/main';
import { startTestService, TestService, slugid } from '../helpers/service';

let svc: TestService;
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  svc = await startTestService();
  env = { TASKCLUSTER_ROOT_URL: svc.rootUrl, TASKCLUSTER_CLIENT_ID: svc.root.clientId, TASKCLUSTER_ACCESS_TOKEN: svc.root.accessToken };
});
afterAll(async () => svc?.close());

async function run(argv: string[], e: NodeJS.ProcessEnv = env) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await tcq(argv, e, { out: (s) => void out.push(s), err: (s) => void err.push(s) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const DAY = 24 * 3600_000;

test('set, list, get, remove', async () => {
  const prefix = `tcq/${slugid()}`;
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tcq-secret-')), 'value.json');
  fs.writeFileSync(file, JSON.stringify({ token: 'from-a-file' }));
  const set = await run(['secret', 'set', `${prefix}/a`, '--payload', `@${file}`, '--expires', '30d']);
  expect(set.code).toBe(0);
  expect(set.out).not.toContain('from-a-file');
  const expires = /^expires:\s+(\S+)$/m.exec(set.out)![1];
  expect(Date.parse(expires) - svc.clock.ms()).toBeGreaterThan(29 * DAY);
  const old = new Date(svc.clock.ms() - 3600_000).toJSON();
  expect((await run(['secret', 'set', `${prefix}/b`, '--payload', '{"token": "inline"}', '--expires', old])).code).toBe(0);

  const list = await run(['secret', 'list']);
  expect(list.code).toBe(0);
  expect(list.out).not.toMatch(/from-a-file|inline/);
  const lines = list.out.split('\n');
  expect(lines[0]).toMatch(/^NAME\s+EXPIRES\s+STATE$/);
  expect(lines.filter((l) => l.startsWith(prefix))).toEqual([
    expect.stringMatching(new RegExp(`^${prefix}/a\\s+${expires}\\s+live$`)),
    expect.stringMatching(new RegExp(`^${prefix}/b\\s+${old}\\s+expired$`)),
  ]);
  const json = JSON.parse((await run(['secret', 'list', '--json'])).out);
  expect(json.secrets.filter((s: any) => s.name.startsWith(prefix))).toEqual([
    { name: `${prefix}/a`, expires, expired: false },
    { name: `${prefix}/b`, expires: old, expired: true },
  ]);

  const get = await run(['secret', 'get', `${prefix}/a`]);
  expect(get.code).toBe(0);
  expect(get.out).toMatch(new RegExp(`^name:\\s+${prefix}/a\\nexpires:\\s+${expires}\\n\\n\\{\\n  "token": "from-a-file"\\n\\}$`));
  const expired = await run(['secret', 'get', `${prefix}/b`]);
  expect(expired).toMatchObject({ code: 1, err: expect.stringContaining('410') });

  expect(await run(['secret', 'remove', `${prefix}/a`])).toMatchObject({ code: 0, out: `removed ${prefix}/a` });
  expect(await run(['secret', 'get', `${prefix}/a`])).toMatchObject({ code: 1, err: expect.stringContaining('404') });
  expect((await run(['secret', 'list'])).out).not.toContain(`${prefix}/a`);
});

test('set needs a JSON object and an expiry, before any call; list needs secrets:list-secrets', async () => {
  const name = `tcq/${slugid()}`;
  expect(await run(['secret', 'set', name, '--payload', '{"a": 1}'])).toMatchObject({ code: 2, err: expect.stringContaining('needs --expires') });
  expect(await run(['secret', 'set', name, '--payload', '[1]', '--expires', '1d'])).toMatchObject({ code: 2, err: expect.stringContaining('a JSON object') });
  expect(await run(['secret', 'set', name, '--payload', '{}', '--expires', 'soon'])).toMatchObject({ code: 2, err: expect.stringContaining("got 'soon'") });
  expect(await run(['secret', 'get', name])).toMatchObject({ code: 1, err: expect.stringContaining('404') });
  const anonymous = await run(['secret', 'list'], { TASKCLUSTER_ROOT_URL: svc.rootUrl });
  expect(anonymous).toMatchObject({ code: 1, err: expect.stringContaining('InsufficientScopes') });
  const help = (await run(['--help'])).out;
  for (const verb of ['secret list', 'secret get <name>', 'secret set <name>', 'secret remove <name>']) expect(help).toContain(`  ${verb}`);
});
