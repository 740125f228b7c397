/**
 * A host process for tests of how the sandbox's children live and end: loads
 * shared/sandbox/sandbox.ts (each .ts module transpiled as it loads), renders one template with the
 * process's pool, prints
 *   RENDERED <json> <pid of each sandbox child, comma-separated>
 * and then, as argv[2] says, `exit`: returns, so the process ends when nothing holds it (its idle
 * children must not); `stay`: stays until killed; `busy`: as `stay`, with its child running a job
 * that would take days (sent before the line is printed).
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const ts = require('typescript');

require.extensions['.ts'] = (module, file) => {
  const compilerOptions = { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true };
  module._compile(ts.transpileModule(fs.readFileSync(file, 'utf8'), { compilerOptions, fileName: file }).outputText, file);
};
const { sandbox } = require(path.join(__dirname, '..', '..', 'shared', 'sandbox', 'sandbox.ts'));
/** Every job of this host is one owner's (the pool's fairness rule does not matter here). */
const OWNER = { owner: 'test', priority: 'trigger' };

/** This process's children running the sandbox's script. */
function sandboxChildren() {
  const lines = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' }).split('\n');
  return lines.filter((l) => l.includes('sandbox-child/main.js')).map((l) => l.trim().split(/\s+/)[0]);
}

sandbox.run({ kind: 'render', template: { $eval: '1 + 1' }, context: {} }, OWNER).then((r) => {
  const mode = process.argv[2];
  if (mode === 'busy')
    void sandbox.run({ kind: 'validate', schema: { type: 'string', pattern: '^(a+)+$' }, data: 'a'.repeat(60) + '!' }, OWNER).catch(() => undefined);
  process.stdout.write(`RENDERED ${r.json} ${sandboxChildren().join(',')}\n`);
  if (mode !== 'exit') setInterval(() => undefined, 1 << 30);
});
