/**
 * Preloaded with `node --require` to stand in for the Functions host's `@azure/functions-core`
 * module: it records every function the app registers (metadata and handler) and prints the
 * metadata as JSON on exit. `registered()` and `handlers` serve ./package-host.js and ./load-time.js.
 */
'use strict';
const Module = require('node:module');
const registered = [];
const handlers = new Map();
const hooks = [];
const core = {
  registered: () => registered,
  handlers,
  hooks,
  registerFunction(metadata, handler) {
    registered.push(metadata);
    handlers.set(metadata.name, handler);
    return { dispose() {} };
  },
  setProgrammingModel() {},
  getProgrammingModel() {},
  registerHook(name, callback) {
    hooks.push({ name, callback });
    return { dispose() {} };
  },
  log() {},
};
const origResolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === '@azure/functions-core') return '@azure/functions-core';
  return origResolve.call(this, request, ...rest);
};
require.cache['@azure/functions-core'] = { id: '@azure/functions-core', filename: '@azure/functions-core', loaded: true, exports: core };
process.on('exit', () => process.stdout.write('\nREGISTERED ' + JSON.stringify(registered) + '\n'));
