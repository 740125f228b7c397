import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseSuspendRequest, readSuspendRequest, MAX_SUSPEND_FILE_BYTES } from '../../worker/suspend';

const now = new Date('2030-01-01T00:00:00.000Z');
const parse = (text: string, resumeAfterDefault = 30) => parseSuspendRequest(text, { now, resumeAfterDefault });

test('a request names its continuation and when to resume: resumeAt, resumeAfter or the payload default', () => {
  expect(parse('{"continuation": {"a": 1}}')).toEqual({ ok: true, continuation: { a: 1 }, resumeAt: '2030-01-01T00:00:30.000Z' });
  expect(parse('{"continuation": null, "resumeAfter": 90}')).toEqual({ ok: true, continuation: null, resumeAt: '2030-01-01T00:01:30.000Z' });
  expect(parse('{"continuation": "s", "resumeAt": "2030-01-02T00:00:00+01:00"}')).toEqual({
    ok: true,
    continuation: 's',
    resumeAt: '2030-01-01T23:00:00.000Z',
  });
});

test('invalid requests say what is wrong', () => {
  expect(parse('not json')).toMatchObject({ ok: false, problem: expect.stringContaining('not JSON') });
  expect(parse('[1]')).toMatchObject({ ok: false, problem: expect.stringContaining('`continuation` property') });
  expect(parse('{"continuation": 1, "when": 2}')).toMatchObject({ ok: false, problem: expect.stringContaining('unknown properties when') });
  expect(parse('{"continuation": 1, "resumeAt": "2030-01-02T00:00:00Z", "resumeAfter": 1}')).toMatchObject({
    ok: false,
    problem: 'give resumeAt or resumeAfter, not both',
  });
  expect(parse('{"continuation": 1, "resumeAt": "tomorrow"}')).toMatchObject({ ok: false, problem: expect.stringContaining('resumeAt must be a date-time') });
  expect(parse('{"continuation": 1, "resumeAfter": -5}')).toMatchObject({
    ok: false,
    problem: expect.stringContaining('resumeAfter must be a number of seconds'),
  });
});

test('no file is no request; an oversized file is refused unread', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'suspend-test-'));
  try {
    const file = path.join(dir, 'suspend.json');
    expect(await readSuspendRequest(file, { now, resumeAfterDefault: 0 })).toBeUndefined();
    fs.writeFileSync(file, JSON.stringify({ continuation: 'x'.repeat(MAX_SUSPEND_FILE_BYTES) }));
    expect(await readSuspendRequest(file, { now, resumeAfterDefault: 0 })).toMatchObject({ ok: false, problem: expect.stringContaining('at most') });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
