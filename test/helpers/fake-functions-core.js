/**
 * Preloaded with `node --require` to stand in for the Functions host's `@azure/functions-core`
 * module: it records every function the app registers and prints them as JSON on exit.
 */
'use strict';
const Module = require('node:module');
const registered = [];
const core = {
  registerFunction(metadata) {
    registered.push(metadata);
    return { dispose() {} };
  },
  setProgrammingModel() {},
  getProgrammingModel() {},
  registerHook() {
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
