/**
 * The shape of one API endpoint in the route table, and of what its handler sees and returns.
 */
import type { InvocationContext } from '@azure/functions';
import type { Template } from '../auth/scopes';
import type { Authenticator, Caller } from '../auth/authenticate';
import type { Services } from '../services';

export type Method = 'GET' | 'PUT' | 'POST' | 'DELETE' | 'HEAD';

/** `/api/<service>/v1` prefixes each route; `web` routes sit directly under `/api`. */
export type ServiceName = 'queue' | 'auth' | 'object' | 'web' | 'index' | 'hooks' | 'secrets';

/** Taskcluster's stability levels, shown in the API reference. */
export type Stability = 'stable' | 'experimental' | 'deprecated';

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
  /** The body is validated when sent but is no argument in the API reference (a legacy body clients no longer send). */
  legacyInput?: boolean;
  /** JSON schema id of a successful JSON response body (shared/api/output-schemas.ts); none for raw or empty bodies. */
  output?: string;
  handler: (req: ApiRequest) => Promise<ApiResponse>;
  /** Authenticates against these credentials instead of the service's clients (testAuthenticate's fixed test client). */
  authenticator?: (body: any, services: Services) => Authenticator;
  /** What an error answer may echo of the body (as Taskcluster's `cleanPayload`: a secret's value is never echoed). */
  cleanPayload?: (payload: any) => unknown;
  /** One line for the API reference. */
  title: string;
  /** What the endpoint does, for the API reference (markdown). */
  description: string;
  stability: Stability;
  /** Groups entries in the API reference (shared/api/references.ts); defaults to the service's title. */
  category?: string;
}

export interface ApiRequest {
  route: RouteDef;
  params: Record<string, string>;
  query: Record<string, string>;
  body: any;
  headers: Headers;
  services: Services;
  context: InvocationContext;
  /**
   * Aborted when the caller hangs up, where the host can tell (the local host): a long poll
   * (claimWork) then stops waiting, so a worker that aborted its poll is not handed claims it will
   * never receive.
   */
  gone?: AbortSignal;
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
