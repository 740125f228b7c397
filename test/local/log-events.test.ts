/**
 * Structured logs: the logger takes only registered events, at their level, with their fields
 * (shared/log-events.ts), and docs/logs.md is the registry as generated.
 * `LOGS_DOC_WRITE=1 npm run jest -- test/local/log-events.test.ts` rewrites the page.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LOG_EVENTS, logEventsMarkdown } from '../../shared/log-events';
import { memoryLogger } from '../../shared/log';
import ts from 'typescript';

const DOC = join(__dirname, '../../docs/logs.md');

test('docs/logs.md lists every registered event with its level, meaning and fields', () => {
  if (process.env.LOGS_DOC_WRITE === '1') writeFileSync(DOC, logEventsMarkdown());
  expect(readFileSync(DOC, 'utf8')).toBe(logEventsMarkdown());
});

test('an event is logged with its level, name and fields', () => {
  const log = memoryLogger();
  log.info('claim-expired', { taskId: 't', runId: 0, retried: true });
  log.error('hook-schedule-failed', { error: 'x' });
  expect(log.records).toEqual([
    { level: 'info', event: 'claim-expired', taskId: 't', runId: 0, retried: true },
    { level: 'error', event: 'hook-schedule-failed', error: 'x' },
  ]);
});

/** Type-checks `body` as a file beside this one that has `log: Logger`; the error codes, line by line. */
function typeErrors(body: string[]): (number | undefined)[] {
  const file = join(__dirname, 'log-calls.check.ts');
  const header = ["import type { Logger } from '../../shared/log';", 'export function calls(log: Logger): void {'];
  const text = [...header, ...body, '}'].join('\n');
  const options = { strict: true, noEmit: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS, types: [] };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang) => (name === file ? ts.createSourceFile(name, text, lang) : read(name, lang));
  const diagnostics = ts.getPreEmitDiagnostics(ts.createProgram([file], options, host)).filter((d) => d.file?.fileName === file);
  return body.map((_, i) => diagnostics.find((d) => d.file!.getLineAndCharacterOfPosition(d.start!).line === header.length + i)?.code);
}

test('unregistered events, wrong levels and wrong fields fail type-checking', () => {
  const errors = typeErrors([
    "log.info('claim-expired', { taskId: 't', runId: 0, retried: true });",
    "log.info('something-happened', { taskId: 't' });", // an event nobody registered
    "log.info('hook-schedule-failed', { error: 'x' });", // an error event logged at info
    "log.info('deadline-exceeded', { taskId: 't', runId: 0 });", // a field the event does not have
    "log.info('claim-expired', { taskId: 't', runId: 0 });", // a required field missing
    "log.warn('index-write-failed', { taskId: 't', error: 42 });", // a field of the wrong type
  ]);
  expect(errors[0]).toBeUndefined();
  for (const e of errors.slice(1)) expect(e).toBeDefined();
}, 60_000);

test('every event has a description and every field a type and a description', () => {
  for (const [name, t] of Object.entries(LOG_EVENTS)) {
    expect(`${name}: ${t.description}`).toMatch(/: \S.*\.$/);
    for (const [f, d] of Object.entries(t.fields as Record<string, { type: string; doc: string }>))
      expect(`${name}.${f}: ${d.type} ${d.doc}`).toMatch(/: \S+.* \S/);
  }
});
