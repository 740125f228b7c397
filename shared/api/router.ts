/**
 * Matching request paths against route patterns. Matching runs on the path as the client sent
 * it, so `%2F` inside a parameter stays inside it; wildcard parameters also accept a literal `/`.
 */
import type { Method, RouteDef, ServiceName } from './types';

export interface CompiledRoute {
  def: RouteDef;
  regex: RegExp;
  names: string[];
}

export function basePath(service: ServiceName): string {
  return service === 'web' ? '/api' : `/api/${service}/v1`;
}

export function compile(def: RouteDef): CompiledRoute {
  const names: string[] = [];
  const last = def.route.replace(/\/$/, '').split('/').length - 1;
  const pattern = def.route
    .split('/')
    .map((seg, i) => {
      const m = /^<([a-zA-Z0-9_]+)(\*?)>$/.exec(seg);
      if (!m) return seg.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
      names.push(m[1]);
      if (!m[2]) return '([^/]+)';
      // A trailing wildcard takes the rest; one in the middle (a taskQueueId) is one segment with
      // `%2F` or two segments, exactly what its two Azure registrations accept (azureRegistrations).
      return i === last ? '(.+?)' : '([^/]+(?:/[^/]+)?)';
    })
    .join('/')
    .replace(/\//g, '\\/');
  return { def, names, regex: new RegExp(`^${basePath(def.service).replace(/\//g, '\\/')}${pattern}\\/?$`) };
}

/** Params from a raw (still percent-encoded) path, or undefined if the route does not match. */
export function matchPath(c: CompiledRoute, rawPath: string): Record<string, string> | undefined {
  const m = c.regex.exec(rawPath);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < c.names.length; i++) {
    try {
      params[c.names[i]] = decodeURIComponent(m[i + 1]);
    } catch {
      return undefined;
    }
  }
  return params;
}

/** Whether a route answers this method: GET routes answer HEAD too (see azureMethods). */
export function answers(def: RouteDef, method: string): boolean {
  return def.method === method || (method === 'HEAD' && def.method === 'GET');
}

/** The local host's choice: the first route of the table (specific routes first) that answers. */
export function findRoute<T extends { c: CompiledRoute }>(compiled: T[], method: string, rawPath: string): T | undefined {
  return compiled.find(({ c }) => answers(c.def, method) && c.regex.test(rawPath));
}

/**
 * The methods Azure registers for a route. GET routes answer HEAD too, as every Taskcluster service
 * does (lib-api is express, whose GET routes answer HEAD): tools probe artifact and download URLs
 * with HEAD, and the local host answers it, so Azure must too. The handler drops the body.
 */
export function azureMethods(def: RouteDef): Method[] {
  return def.method === 'GET' ? ['GET', 'HEAD'] : [def.method];
}

export interface AzureRegistration {
  /** The Azure Function's name: `<service>_<name>`, plus `_split` for the two-segment form. */
  name: string;
  /** Route template under the host's `api` prefix. */
  route: string;
  methods: Method[];
  def: RouteDef;
}

/**
 * The Azure Functions registrations of a route table. A trailing wildcard becomes a catch-all. A
 * wildcard in the middle (only `taskQueueId`, always `provisionerId/workerType`) cannot be a
 * catch-all there, so it is registered twice: as one segment (taskcluster-client sends the `/` as
 * `%2F`, which the platform keeps inside the segment, as ASP.NET Core routing does) and as two
 * segments (a literal `/`, as curl users and the local host accept).
 */
export function azureRegistrations(defs: RouteDef[]): AzureRegistration[] {
  const out: AzureRegistration[] = [];
  for (const def of defs) {
    const base = basePath(def.service).replace(/^\/api\/?/, '');
    const parts = def.route.split('/').filter(Boolean);
    const template = (split: boolean) =>
      [
        base,
        ...parts.map((seg, i) => {
          const m = /^<([a-zA-Z0-9_]+)(\*?)>$/.exec(seg);
          if (!m) return seg;
          if (!m[2]) return `{${m[1]}}`;
          if (i === parts.length - 1) return `{*${m[1]}}`;
          return split ? `{${m[1]}_a}/{${m[1]}_b}` : `{${m[1]}}`;
        }),
      ]
        .filter(Boolean)
        .join('/');
    const name = `${def.service}_${def.name}`;
    const methods = azureMethods(def);
    out.push({ name, route: template(false), methods, def });
    if (parts.some((seg, i) => i < parts.length - 1 && /^<[a-zA-Z0-9_]+\*>$/.test(seg)))
      out.push({ name: `${name}_split`, route: template(true), methods, def });
  }
  return out;
}
