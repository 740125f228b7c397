'use strict';
/**
 * The sandbox's child process (forked by shared/sandbox/sandbox.ts with its heap limit in execArgv):
 * renders JSON-e templates and compiles and runs trigger schemas, one job at a time, answering each
 * over the IPC channel. Plain CommonJS so node runs it the same from the source tree, from dist/
 * (bin/copy-assets.js copies it) and from the deployment package (bin/package.js bundles it with
 * its libraries into one file). Its settings come as arguments: the schema cache size and the
 * largest result it may send.
 *
 * The same file is the child's watchdog thread, which ends the child once its host is gone: a job
 * that loops holds the event loop, so the child would not hear the IPC channel close until the job
 * ended, which for a catastrophic pattern is days.
 */
const { isMainThread, parentPort, Worker, workerData } = require('node:worker_threads');

/** How often the watchdog checks for its host (one kill(pid, 0); a busy orphan lives at most this long). */
const HOST_CHECK_MS = 1_000;

/** Whether process `pid` still exists (process.ppid will not tell: Node 22 reads it once, and a thread's may be read late). */
function exists(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code !== 'ESRCH';
  }
}

function watchdog() {
  setInterval(() => {
    if (!exists(workerData.host)) process.kill(process.pid, 'SIGKILL');
  }, HOST_CHECK_MS);
  parentPort.postMessage('watching');
}

function child() {
  // Started first: a thread's start can wait for the main thread, which a job may hold for good.
  const dog = new Worker(__filename, { workerData: { host: process.ppid } });
  // It must not keep an idle child alive once the channel has closed.
  dog.unref();
  const jsone = require('json-e');
  const Ajv = require('ajv').default;
  const addFormats = require('ajv-formats').default;
  const [schemaCache, resultChars] = process.argv.slice(2).map(Number);
  const ajv = new Ajv({ allErrors: true, strict: false });
  addFormats(ajv);
  const compiled = new Map();

  const compile = (schema) => {
    const key = JSON.stringify(schema);
    let fn = compiled.get(key);
    if (!fn) {
      fn = ajv.compile(schema);
      ajv.removeSchema(schema);
      if (compiled.size >= schemaCache) compiled.delete(compiled.keys().next().value);
      compiled.set(key, fn);
    }
    return fn;
  };

  const run = (job) => {
    if (job.kind === 'render') {
      const json = JSON.stringify(jsone(job.template, job.context));
      // Checked here, before sending: a huge result would cost the host its memory to receive.
      if (json !== undefined && json.length > resultChars)
        return { ok: false, name: 'ResultTooLarge', message: `the rendered result is ${json.length} characters of JSON, more than ${resultChars}` };
      return { ok: true, json: json === undefined ? 'null' : json };
    }
    const fn = compile(job.schema);
    if (job.kind === 'compile') return { ok: true };
    const valid = fn(job.data);
    return { ok: true, valid, errors: valid ? [] : (fn.errors || []).slice(0, 20).map((e) => ({ instancePath: e.instancePath, message: e.message })) };
  };

  process.on('message', (job) => {
    let out;
    try {
      out = run(job);
    } catch (e) {
      out = { ok: false, name: (e && e.name) || 'Error', message: String((e && e.message) || e) };
    }
    process.send(out);
  });
  // The host closed the channel or ended: no orphan outlives it.
  process.on('disconnect', () => process.exit(0));
  // Ready once the watchdog is watching: no job runs unwatched.
  dog.once('message', () => process.send({ ready: true }));
}

if (isMainThread) child();
else watchdog();
