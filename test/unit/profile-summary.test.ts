/**
 * The bench's CPU profile summary (bench/profile.ts): each sample's time is charged to one
 * component by its whole stack, so a socket write made by the storage SDK counts as storage I/O
 * and the idle bucket counts nowhere.
 */
import { summarize } from '../../bench/profile';

const frame = (functionName: string, url = '') => ({ functionName, url, lineNumber: 0 });

test('samples are charged to the component their stack names, idle left out', () => {
  const nodes = [
    { id: 1, callFrame: frame('(root)'), children: [2, 5, 7, 8] },
    { id: 2, callFrame: frame('sendRequest', '/x/node_modules/@azure/core-rest-pipeline/dist/commonjs/x.js'), children: [3] },
    { id: 3, callFrame: frame('_flush', 'node:_http_outgoing'), children: [4] },
    { id: 4, callFrame: frame('writev', 'node:internal/stream_base_commons') },
    { id: 5, callFrame: frame('authenticate', '/repo/dist/shared/auth/authenticate.js'), children: [6] },
    { id: 6, callFrame: frame('authenticate', '/x/node_modules/hawk/lib/server.js') },
    { id: 7, callFrame: frame('(idle)') },
    { id: 8, callFrame: frame('(garbage collector)') },
  ];
  // 3 samples in the SDK's socket write, 1 in Hawk, 1 in GC, 5 idle; 1 ms each.
  const samples = [4, 4, 4, 6, 8, 7, 7, 7, 7, 7];
  const s = summarize({ nodes, samples, timeDeltas: samples.map(() => 1000) }, 'p.cpuprofile');
  expect(s.totalMs).toBe(5);
  expect(Object.fromEntries(s.components.map((c) => [c.name, c.pct]))).toEqual({
    'socket writes to storage': 60,
    'Hawk and scopes': 20,
    'garbage collector': 20,
  });
  expect(s.areas.map((a) => a.name)).toEqual(['node:stream_base_commons', 'hawk', '(garbage collector)']);
});
