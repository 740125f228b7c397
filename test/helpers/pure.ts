/**
 * The unit tier is pure: a unit test that starts a child process or listens on a port fails here,
 * naming what it did, instead of making the tier slow. Such a test belongs in the local tier
 * (test/local/, see jest.config.js). Patched for the test file's run only: jest may reuse this
 * worker for another project's files, whose tests do need processes and ports.
 */
import childProcess from 'node:child_process';
import net from 'node:net';

const FORBIDDEN = ['spawn', 'spawnSync', 'fork', 'exec', 'execSync', 'execFile', 'execFileSync'] as const;
const saved = FORBIDDEN.map((name) => [name, childProcess[name]] as const);
const listen = net.Server.prototype.listen;

function refuse(what: string): never {
  throw new Error(`the unit tier is pure: ${what} belongs in the local tier (test/local/)`);
}

for (const name of FORBIDDEN) Object.assign(childProcess, { [name]: () => refuse(`child_process.${name}`) });
net.Server.prototype.listen = function () {
  return refuse('listening on a port');
} as typeof listen;

afterAll(() => {
  for (const [name, fn] of saved) Object.assign(childProcess, { [name]: fn });
  net.Server.prototype.listen = listen;
});
