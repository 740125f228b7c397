/**
 * The services `tcq` can call, with their methods, from the API references this project
 * generates from its route table (shared/api/references.ts): a reference per service name, merging
 * the queue's own extras (operator queries, event subscriptions) into `queue`. taskcluster-client's
 * `createClient` turns each into a client, so every method of every service can be called.
 */
import { REFERENCES, apiReference } from '../../shared/api/references';
import { routes } from '../../shared/api/route-table';
import { closest } from './names';
import { Settings, UsageError } from './settings';

export interface Entry {
  name: string;
  title: string;
  method: string;
  route: string;
  args: string[];
  query: string[];
  input?: string;
  scopes?: unknown;
  stability: string;
}

export interface Reference {
  serviceName: string;
  title: string;
  entries: Entry[];
  [k: string]: unknown;
}

/** The references by service name (queue, auth, object, index, hooks, secrets). */
export function references(): Map<string, Reference> {
  const out = new Map<string, Reference>();
  for (const spec of REFERENCES) {
    const ref = apiReference(spec, routes) as unknown as Reference;
    const have = out.get(ref.serviceName);
    if (have) have.entries.push(...ref.entries.filter((e) => !have.entries.some((h) => h.name === e.name)));
    else out.set(ref.serviceName, { ...ref, entries: [...ref.entries] });
  }
  return out;
}

export function findService(name: string): Reference {
  const refs = references();
  const ref = refs.get(name);
  if (ref) return ref;
  const near = closest(name, [...refs.keys()]);
  throw new UsageError(`no service '${name}'${near.length ? `; did you mean ${near.join(', ')}?` : ''} (services: ${[...refs.keys()].join(', ')})`);
}

export function findEntry(ref: Reference, method: string): Entry {
  const e = ref.entries.find((x) => x.name === method);
  if (e) return e;
  const names = ref.entries.map((x) => x.name);
  const near = closest(method, names);
  throw new UsageError(
    `${ref.serviceName} has no method '${method}'` +
      (near.length ? `; did you mean ${near.join(', ')}?` : '') +
      ` (\`tcq call ${ref.serviceName}\` lists its ${names.length} methods)`,
  );
}

export type Client = any;

/** A taskcluster-client instance for a service, with the settings' root URL and credentials. */
export async function clientFor(service: string, settings: Settings): Promise<Client> {
  let tc;
  try {
    tc = (await import('taskcluster-client')).default;
  } catch {
    throw new UsageError('taskcluster-client is not installed: tcq runs from a clone after `npm ci` (it is a devDependency)');
  }
  const Cls = tc.createClient(findService(service), service);
  // Interactive: a few quick retries on 5xx rather than taskcluster-client's five slow ones.
  return new Cls({ rootUrl: settings.rootUrl, credentials: settings.credentials, retries: 2 });
}
