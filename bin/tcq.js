#!/usr/bin/env node
'use strict';
/** `tcq` (the package's bin; `npx tcq` in a clone): the command line, built on first use. */
require('./run-built').run('bin/tcq/main', process.argv.slice(2));
