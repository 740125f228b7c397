import { validatePayload, safeRelativePath, MAX_RUN_TIME_S, DEFAULT_MAX_RUN_TIME_S } from '../../worker/payload';

const now = new Date('2030-01-01T00:00:00Z');
const taskExpires = '2030-02-01T00:00:00.000Z';
const check = (p: unknown) => validatePayload(p, { taskExpires, now });
const problems = (p: unknown) => {
  const v = check(p);
  if (v.ok) throw new Error('expected the payload to be invalid');
  return v.problems;
};

test('a minimal payload gets defaults; artifacts expire with the task', () => {
  expect(check({ command: ['true'], maxRunTime: 5, artifacts: [{ type: 'file', path: './out//a.txt', name: 'public/a.txt' }] })).toEqual({
    ok: true,
    payload: {
      command: ['true'],
      env: {},
      maxRunTime: 5,
      artifacts: [{ type: 'file', path: 'out/a.txt', name: 'public/a.txt', expires: taskExpires, required: false }],
    },
  });
});

test('every problem is reported at once, each saying what is expected', () => {
  const p = problems({ command: 'make', maxRunTime: 0, env: { 'BAD-NAME': 1 }, artifacts: [{ type: 'directory', name: '' }], extra: true });
  expect(p).toEqual([
    "payload has an unknown property 'extra' (allowed: command, env, maxRunTime, artifacts, suspend)",
    'payload.command must be a non-empty array [program, ...args], e.g. ["sh", "-c", "make test"]; got "make"',
    "payload.env name 'BAD-NAME' is not a valid variable name (letters, digits and _, not starting with a digit)",
    'payload.env.BAD-NAME must be a string, got 1',
    `payload.maxRunTime must be an integer number of seconds between 1 and ${MAX_RUN_TIME_S}, got 0`,
    'payload.artifacts[0].type must be \'file\' (the only artifact type this worker uploads), got "directory"',
    "payload.artifacts[0].path is required: the file's path relative to the task directory",
    "payload.artifacts[0].name is required: the artifact name, e.g. 'public/build/output.txt'",
  ]);
});

test('missing command, and non-string arguments; maxRunTime defaults to an hour', () => {
  expect(problems({})).toEqual(['payload.command is required: an array [program, ...args], e.g. ["sh", "-c", "make test"]']);
  expect(check({ command: ['echo', 'hello'] })).toMatchObject({ ok: true, payload: { maxRunTime: DEFAULT_MAX_RUN_TIME_S } });
  expect(DEFAULT_MAX_RUN_TIME_S).toBe(3600);
  expect(problems({ command: ['echo', 3], maxRunTime: 1.5 })).toEqual([
    'payload.command[1] must be a string, got 3',
    `payload.maxRunTime must be an integer number of seconds between 1 and ${MAX_RUN_TIME_S}, got 1.5`,
  ]);
  expect(problems(null)).toEqual(['payload must be an object, got null']);
});

test('artifact paths must stay inside the task directory', () => {
  for (const bad of ['../x', '/etc/passwd', 'a/../../b', '.', '']) expect(safeRelativePath(bad)).toBeUndefined();
  expect(safeRelativePath('a/./b')).toBe('a/b');
  expect(problems({ command: ['x'], maxRunTime: 1, artifacts: [{ type: 'file', path: '../secret', name: 'public/s' }] })).toEqual([
    "payload.artifacts[0].path '../secret' must be a relative path inside the task directory",
  ]);
});

test('artifact names: the log name is reserved, duplicates are refused; expires must fit the task', () => {
  const a = (o: object) => ({ type: 'file', path: 'f', ...o });
  expect(
    problems({
      command: ['x'],
      maxRunTime: 1,
      artifacts: [
        a({ name: 'public/logs/live.log' }),
        a({ name: 'public/a' }),
        a({ name: 'public/a' }),
        a({ name: 'public/b', expires: '2031-01-01T00:00:00Z' }),
        a({ name: 'public/c', expires: '2029-01-01T00:00:00Z' }),
        a({ name: 'public/d', expires: 'tomorrow' }),
        a({ name: 'public/e', required: 'yes' }),
      ],
    }),
  ).toEqual([
    "payload.artifacts[0].name 'public/logs/live.log' is reserved for the task log",
    "payload.artifacts[2].name 'public/a' is declared twice",
    `payload.artifacts[3].expires 2031-01-01T00:00:00Z is after the task expires (${taskExpires}); artifacts cannot outlive their task`,
    'payload.artifacts[4].expires 2029-01-01T00:00:00Z is in the past',
    'payload.artifacts[5].expires must be a date-time string, got "tomorrow"',
    'payload.artifacts[6].required must be true or false, got "yes"',
  ]);
  const ok = check({
    command: ['x'],
    maxRunTime: 1,
    artifacts: [a({ name: 'p', expires: '2030-01-15T00:00:00Z', required: true, contentType: 'application/json' })],
  });
  expect(ok.ok && ok.payload.artifacts[0]).toEqual({
    type: 'file',
    path: 'f',
    name: 'p',
    expires: '2030-01-15T00:00:00.000Z',
    required: true,
    contentType: 'application/json',
  });
});

test('suspend: presence allows the command to suspend; resumeAfter defaults to 0 and is bounded', () => {
  const base = { command: ['true'], maxRunTime: 5 };
  const ok = (suspend: unknown) => validatePayload({ ...base, suspend }, { taskExpires, now });
  expect(ok({})).toMatchObject({ ok: true, payload: { suspend: { resumeAfter: 0 } } });
  expect(ok({ resumeAfter: 60 })).toMatchObject({ ok: true, payload: { suspend: { resumeAfter: 60 } } });
  expect((validatePayload(base, { taskExpires, now }) as { payload: object }).payload).not.toHaveProperty('suspend');
  expect(ok(true)).toMatchObject({ ok: false, problems: [expect.stringContaining('payload.suspend must be an object')] });
  expect(ok({ resumeAfter: -1, after: 2 })).toMatchObject({
    ok: false,
    problems: [expect.stringContaining("unknown property 'after'"), expect.stringContaining('payload.suspend.resumeAfter must be an integer')],
  });
});
