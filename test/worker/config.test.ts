import path from 'node:path';
import { parseConfig, UsageError, defaultWorkerId } from '../../worker/config';

const env = { TASKCLUSTER_ROOT_URL: 'http://q.example/', TASKCLUSTER_CLIENT_ID: 'c', TASKCLUSTER_ACCESS_TOKEN: 't' };

test('flags, with root URL and credentials from TASKCLUSTER_* by default', () => {
  const c = parseConfig(['--task-queue', 'prov/wt', '--worker-id', 'w1', '--concurrency', '4', '--work-dir', 'wd'], env)!;
  expect(c).toMatchObject({
    rootUrl: 'http://q.example',
    credentials: { clientId: 'c', accessToken: 't' },
    taskQueueId: 'prov/wt',
    provisionerId: 'prov',
    workerType: 'wt',
    workerGroup: 'local',
    workerId: 'w1',
    concurrency: 4,
    protocol: 'claimWork',
    workDir: path.resolve('wd'),
    proxy: false,
    reclaimMarginS: 180,
  });
  const temp = parseConfig(
    ['--task-queue', 'p/w', '--protocol', 'pollTaskUrls', '--client-id', 'x', '--access-token', 'y', '--certificate', '{"version":1}'],
    env,
  )!;
  expect(temp.credentials).toEqual({ clientId: 'x', accessToken: 'y', certificate: '{"version":1}' });
  expect(temp.protocol).toBe('pollTaskUrls');
  expect(parseConfig(['--help'], {})).toBeUndefined();
});

test('clear errors for what is missing or malformed', () => {
  const err = (argv: string[], e: Record<string, string> = env) => {
    try {
      parseConfig(argv, e);
    } catch (x) {
      expect(x).toBeInstanceOf(UsageError);
      return (x as Error).message;
    }
    throw new Error('expected a usage error');
  };
  expect(err(['--task-queue', 'p/w'], {})).toMatch(/--root-url/);
  expect(err(['--task-queue', 'p/w'], { TASKCLUSTER_ROOT_URL: 'http://x' })).toMatch(/credentials are required/);
  expect(err([])).toMatch(/--task-queue/);
  expect(err(['--task-queue', 'p/Bad_Type'])).toMatch(/workerType/);
  expect(err(['--task-queue', 'p/w', '--concurrency', '0'])).toMatch(/--concurrency must be an integer between 1 and 32/);
  expect(err(['--task-queue', 'p/w', '--protocol', 'magic'])).toMatch(/claimWork or pollTaskUrls/);
  expect(err(['--task-queue', 'p/w', '--certificate', 'nope'])).toMatch(/JSON certificate/);
  expect(err(['--task-queue', 'p/w', '--bogus'])).toMatch(/bogus/);
  expect(defaultWorkerId('my.host.example.com')).toBe('my-host-example-com');
});
