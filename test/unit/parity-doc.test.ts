/**
 * docs/taskcluster-parity.md lists, for each served service, every method of taskcluster-client's
 * reference and every method this deployment adds, each as served, differs, not served or own;
 * this keeps it true: a new client method, a new route, or a route removed fails here until the
 * table says so. Every client class (the services not served and the exchanges) is named too.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { routes } from '../../shared/api/route-table';
import type { ServiceName } from '../../shared/api/types';

const DOC = readFileSync(join(__dirname, '..', '..', 'docs', 'taskcluster-parity.md'), 'utf8');
type Apis = Record<string, { reference: { entries: { name: string }[] } }>;
/** taskcluster-client's references (an ES module: imported once the tests run). */
let APIS: Apis;
beforeAll(async () => {
  APIS = (await import('taskcluster-client/src/apis.js' as string)).default;
});

/** Each served service: its section's heading, taskcluster-client's class, the route table's service. */
const SERVED: [heading: string, cls: string, service: ServiceName][] = [
  ['Queue', 'Queue', 'queue'],
  ['Auth', 'Auth', 'auth'],
  ['Index', 'Index', 'index'],
  ['Hooks', 'Hooks', 'hooks'],
  ['Object', 'Object', 'object'],
  ['Secrets', 'Secrets', 'secrets'],
];
const STATUSES = ['served', 'differs', 'not served', 'own'] as const;
type Status = (typeof STATUSES)[number];

/** The text under `## <heading>`, up to the next `## `. */
function section(heading: string): string {
  const start = DOC.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/taskcluster-parity.md has no section "## ${heading}"`);
  const end = DOC.indexOf('\n## ', start + 1);
  return DOC.slice(start, end < 0 ? undefined : end);
}

/** The method rows of a section: `| \`name\` | status | notes |`. */
function rows(text: string): Map<string, Status> {
  const out = new Map<string, Status>();
  for (const [, name, status] of text.matchAll(/^\| `([A-Za-z0-9]+)` \| ([a-z ]+) \|/gm)) {
    expect([name, STATUSES.includes(status as Status)]).toEqual([name, true]);
    expect([name, out.has(name)]).toEqual([name, false]);
    out.set(name, status as Status);
  }
  return out;
}

test('rows are read as the doc writes them', () => {
  expect([...rows('| `ping` | served | |\n| `version` | not served | why |\n| `x` | own | |\n')]).toEqual([
    ['ping', 'served'],
    ['version', 'not served'],
    ['x', 'own'],
  ]);
});

/** A served service's methods: as the doc lists them, as taskcluster-client has them, as the route table has them. */
function methods(heading: string, cls: string, service: ServiceName) {
  return {
    listed: rows(section(heading)),
    theirs: APIS[cls].reference.entries.map((e) => e.name),
    ours: new Set(routes.filter((r) => r.service === service).map((r) => r.name)),
  };
}

test("each served service's table lists every method of taskcluster-client's class, and this deployment's own", () => {
  for (const [heading, cls, service] of SERVED) {
    const { listed, theirs, ours } = methods(heading, cls, service);
    const own = [...ours].filter((n) => !theirs.includes(n));
    expect([heading, [...listed.keys()].sort()]).toEqual([heading, [...theirs, ...own].sort()]);
  }
});

test('served, differs or own only for methods the route table has; not served for those it lacks; own only for those the client lacks', () => {
  for (const [heading, cls, service] of SERVED) {
    const { listed, theirs, ours } = methods(heading, cls, service);
    for (const [name, status] of listed) {
      expect([heading, name, status, ours.has(name)]).toEqual([heading, name, status, status !== 'not served']);
      expect([heading, name, status, theirs.includes(name)]).toEqual([heading, name, status, status !== 'own']);
    }
  }
});

test('names every client class: the services not served and the exchanges too', () => {
  for (const cls of Object.keys(APIS)) expect([cls, DOC.includes(`\`${cls}\``)]).toEqual([cls, true]);
  const notServed = section('Services not served');
  for (const cls of ['WorkerManager', 'PurgeCache', 'Github', 'Notify'])
    expect(notServed).toMatch(new RegExp(`\`${cls}\`, ${APIS[cls].reference.entries.length} methods\\): not served: `));
});
