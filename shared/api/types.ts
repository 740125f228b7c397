/**
 * The shape of one API endpoint in the route table, and of what its handler sees and returns.
 */
import type { InvocationContext } from '@azure/functions';
import type { Template } from '../auth/scopes';
import type { Caller } from '../auth/authenticate';
import type { Services } from '../services';

export type Method = 'GET' | 'PUT' | 'POST' | 'DELETE' | 'HEAD';

/** `/api/<service>/v1` prefixes each route; `web` routes sit directly under `/api`. */
export type ServiceName = 'queue' | 'auth' | 'web' | 'index' | 'hooks';

export interface RouteDef {
  /** Unique within its service; the Azure Function is named `<service>_<name>`. */
  name: string;
  service: ServiceName;
  method: Method;
  /** Taskcluster-style pattern: `<param>` is one segment, `<param*>` may hold `/` (wildcard). */
  route: string;
  /** Allowed query keys (besides `bewit`). */
  query?: string[];
  /**
   * Scope template, or null for endpoints that never authenticate. When every parameter of the
   * template is a URL parameter, authorization runs before the handler; otherwise the handler
   * calls `req.authorize(params)`.
   */
  scopes: Template | null;
  /** JSON schema id of the request body (see shared/api/schemas.ts). */
  input?: string;
  /** Accept a body even without an input schema (taskcluster-client sends none; older clients may). */
  handler: (req: ApiRequest) => Promise<ApiResponse>;
  description?: string;
}

export interface ApiRequest {
  route: RouteDef;
  params: Record<string, string>;
  query: Record<string, string>;
  body: any;
  headers: Headers;
  services: Services;
  context: InvocationContext;
  /** The caller, authenticated lazily (cached). */
  caller(): Promise<Caller>;
  /** Renders the route's scope template with these params and checks the caller (401/403). */
  authorize(params: Record<string, unknown>): Promise<void>;
  /** Whether the caller satisfies an arbitrary expression, without failing. */
  satisfies(expr: import('../auth/scopes').Expression): Promise<boolean>;
}

export interface ApiResponse {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Raw (non-JSON) body, e.g. for static pages. */
  raw?: string | Uint8Array;
}

export const ok = (body: unknown): ApiResponse => ({ status: 200, body });
