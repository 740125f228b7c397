/**
 * Matching request paths against route patterns. Matching runs on the path as the client sent
 * it, so `%2F` inside a parameter stays inside it; wildcard parameters also accept a literal `/`.
 */
import type { RouteDef, ServiceName } from './types';

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
  const pattern = def.route.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/<([a-zA-Z0-9_]+)(\*?)>/g, (_m, name: string, star: string) => {
    names.push(name);
    return star ? '(.+?)' : '([^/]+)';
  });
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

/**
 * The Azure Functions route template (under the `api` prefix) for a route. Wildcards become a
 * trailing catch-all; a wildcard in the middle of a route (only `taskQueueId`, always
 * `provisionerId/workerType`) becomes two segments, since catch-alls must come last.
 */
export function azureRoute(def: RouteDef): string {
  const base = basePath(def.service).replace(/^\/api\/?/, '');
  const parts = def.route.split('/').filter(Boolean);
  const out = parts.map((seg, i) => {
    const m = /^<([a-zA-Z0-9_]+)(\*?)>$/.exec(seg);
    if (!m) return seg;
    if (!m[2]) return `{${m[1]}}`;
    if (i === parts.length - 1) return `{*${m[1]}}`;
    return `{${m[1]}_a}/{${m[1]}_b}`;
  });
  return [base, ...out].filter(Boolean).join('/');
}
