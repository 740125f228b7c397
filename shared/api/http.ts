/**
 * Turns a route definition into an Azure Functions HTTP handler: raw-URL parameter matching,
 * query and body validation, lazy authentication, and the Taskcluster error shape. The local host
 * calls exactly these handlers too.
 */
import crypto from 'node:crypto';
import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { ApiError, STATUS_OF, badQueryParam, badUrlParam } from '../errors';
import { Caller } from '../auth/authenticate';
import { Expression, Template, render, satisfies, templateParams, unsatisfied } from '../auth/scopes';
import { CompiledRoute, compile, matchPath } from './router';
import { validate } from './schemas';
import { checkDeclaredLength, parseBody } from './body';
import type { ApiRequest, ApiResponse, RouteDef } from './types';
import type { Services } from '../services';
import { InjectedFault, invocationTally, newInvocation } from '../storage/counter';
import { StorageLimit } from '../storage/port';
import { ActorContext, runAs } from '../ops/actor';

const PARAM_PATTERNS: Record<string, RegExp> = {
  taskId: /^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$/,
  taskGroupId: /^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$/,
  taskQueueId: /^[a-zA-Z0-9-_]{1,38}\/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$/,
  provisionerId: /^[a-zA-Z0-9-_]{1,38}$/,
  workerType: /^[a-zA-Z0-9-_]{1,38}$/,
  workerGroup: /^[a-zA-Z0-9-_]{1,38}$/,
  workerId: /^[a-zA-Z0-9-_]{1,38}$/,
  runId: /^[1-9]*[0-9]+$/,
  name: /^[\x20-\x7e]+$/,
  clientId: /^[A-Za-z0-9!@/:.+|_-]+$/,
  roleId: /^[\x20-\x7e]+$/,
};

/**
 * Query-string parameters with a format, checked (as Taskcluster does) before anything else. None
 * today: triggerHook's `taskId`, the one there was, is read from the payload, as Taskcluster's.
 */
const QUERY_PATTERNS: Record<string, RegExp> = {};

const COMMON_HEADERS: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-allow-headers': 'X-Requested-With,Content-Type,Authorization,Accept,Origin,Cache-Control',
  'access-control-allow-methods': 'OPTIONS,GET,HEAD,POST,PUT,DELETE,TRACE,CONNECT',
  'access-control-expose-headers': 'location,x-taskcluster-artifact-storage-type',
  'cache-control': 'no-store no-cache must-revalidate',
};

interface ErrorContext {
  method: string;
  params: Record<string, string>;
  payload: unknown;
}

export function errorResponse(err: ApiError, ctx: ErrorContext): HttpResponseInit {
  const time = new Date().toJSON();
  const status = STATUS_OF[err.code];
  const message = `${err.message}\n\n---\n\n* method:     ${ctx.method}\n* errorCode:  ${err.code}\n* statusCode: ${status}\n* time:       ${time}`;
  const headers: Record<string, string> = { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8' };
  if (err.code === 'AuthenticationFailed') headers['www-authenticate'] = 'hawk';
  return {
    status,
    headers,
    body: JSON.stringify({ code: err.code, message, requestInfo: { method: ctx.method, params: ctx.params, payload: ctx.payload ?? {}, time } }, null, 2),
  };
}

function toResponse(r: ApiResponse): HttpResponseInit {
  const headers: Record<string, string> = { ...COMMON_HEADERS, ...(r.headers ?? {}) };
  if (r.raw !== undefined) return { status: r.status ?? 200, headers, body: r.raw as never };
  if (r.body === undefined) return { status: r.status ?? 204, headers };
  headers['content-type'] = 'application/json; charset=utf-8';
  return { status: r.status ?? 200, headers, body: JSON.stringify(r.body) };
}

/** The path and query exactly as the client sent them (App Service keeps them in a header). */
export function rawResource(req: HttpRequest): string {
  const unencoded = req.headers.get('x-waws-unencoded-url');
  if (unencoded) return unencoded;
  const u = new URL(req.url);
  return u.pathname + u.search;
}

function describeAnonymous(expr: Expression): string {
  return `This request requires Taskcluster credentials that satisfy the following scope expression:\n\n\`\`\`\n${JSON.stringify(expr, null, 2)}\n\`\`\``;
}

function insufficient(caller: Caller, expr: Expression): ApiError {
  if (!caller.clientId) return new ApiError('InsufficientScopes', describeAnonymous(expr));
  const missing = unsatisfied(caller.scopes, expr);
  return new ApiError(
    'InsufficientScopes',
    `Client ID ${caller.clientId} does not have sufficient scopes and is missing the following scopes:\n\n\`\`\`\n${JSON.stringify(missing, null, 2)}\n\`\`\`\n\n` +
      `This request requires the client to satisfy the following scope expression:\n\n\`\`\`\n${JSON.stringify(expr, null, 2)}\n\`\`\``,
  );
}

/** Whether every parameter of the template can be filled from the URL. */
function urlOnly(t: Template, c: CompiledRoute): boolean {
  return [...templateParams(t)].every((p) => c.names.includes(p));
}

export type ServiceProvider = () => Promise<Services>;

export function makeHandler(def: RouteDef, services: ServiceProvider) {
  const compiled = compile(def);
  const auto = def.scopes !== null && urlOnly(def.scopes, compiled);

  /** `gone`: the caller hung up (a host that can tell passes it; Azure's cannot, so a long poll runs its full time). */
  return async function handler(request: HttpRequest, context: InvocationContext, gone?: AbortSignal): Promise<HttpResponseInit> {
    const tally = newInvocation();
    const actor: ActorContext = { transitions: 0 };
    const response = await invocationTally.run(tally, () => runAs(actor, () => handle(request, context, tally, actor, gone)));
    // HEAD is answered like GET, without the body.
    return request.method === 'HEAD' ? { ...response, body: undefined } : response;
  };

  async function handle(
    request: HttpRequest,
    context: InvocationContext,
    tally: { calls: number },
    actor: ActorContext,
    gone: AbortSignal | undefined,
  ): Promise<HttpResponseInit> {
    const started = Date.now();
    const errCtx: ErrorContext = { method: def.name, params: {}, payload: {} };
    let svc: Services | undefined;
    let status = 500;
    try {
      svc = await services();
      const resource = rawResource(request);
      const qIndex = resource.indexOf('?');
      const rawPath = qIndex >= 0 ? resource.slice(0, qIndex) : resource;
      const params = matchPath(compiled, rawPath);
      if (!params) throw new ApiError('ResourceNotFound', `no route ${request.method} ${rawPath}`);
      errCtx.params = params;

      // Query parameters: only the declared ones, plus bewit.
      const query: Record<string, string> = {};
      const search = new URLSearchParams(qIndex >= 0 ? resource.slice(qIndex + 1) : '');
      for (const [k, v] of search) {
        if (k === 'bewit') continue;
        if (!def.query?.includes(k)) throw new ApiError('InvalidRequestArguments', `query parameter '${k}' is not allowed for ${def.name}`);
        const re = QUERY_PATTERNS[k];
        if (re && !re.test(v)) throw badQueryParam(k, v, re);
        query[k] = v;
      }
      if (query.limit !== undefined && !/^[0-9]+$/.test(query.limit)) {
        throw new ApiError('InvalidRequestArguments', 'limit must be a non-negative integer');
      }

      // Lazy authentication: only when scopes must be checked.
      let callerP: Promise<Caller> | undefined;
      let body: unknown = undefined;
      const url = new URL(svc.config.publicUrl);
      const caller = () =>
        (callerP ??= (def.authenticator?.(body, svc!) ?? svc!.authenticator)
          .authenticate({
            method: request.method,
            resource,
            host: url.hostname,
            port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)),
            authorization: request.headers.get('authorization') ?? undefined,
            contentType: request.headers.get('content-type') ?? undefined,
          })
          .then((c) => {
            actor.actor = c.clientId; // task history names who made each transition
            return c;
          }));
      let authorized = def.scopes === null;
      const authorize = async (p: Record<string, unknown>) => {
        const expr = render(def.scopes!, p);
        const c = await caller();
        authorized = true;
        if (!satisfies(c.scopes, expr)) throw insufficient(c, expr);
      };

      if (auto) await authorize(params);

      for (const [k, v] of Object.entries(params)) {
        const re = PARAM_PATTERNS[k];
        if (re && !re.test(v)) throw badUrlParam(k, v, re);
      }

      if (request.method !== 'GET' && request.method !== 'HEAD') {
        checkDeclaredLength(request.headers.get('content-length'));
        body = parseBody(Buffer.from(await request.arrayBuffer()));
      }
      if (def.input) {
        if (body === undefined) body = {};
        errCtx.payload = JSON.parse(JSON.stringify(body));
        if (def.cleanPayload) errCtx.payload = def.cleanPayload(errCtx.payload);
        const errors = validate(def.input, body);
        if (errors.length) {
          throw new ApiError(
            'InputValidationError',
            `Schema Validation Failed!\nRejecting Schema: ${def.input}\nErrors:\n${errors.map((e) => `  * ${e}`).join('\n')}`,
          );
        }
      }

      const apiReq: ApiRequest = {
        route: def,
        params,
        query,
        body,
        headers: request.headers as unknown as Headers,
        services: svc,
        context,
        gone,
        caller,
        authorize,
        satisfies: async (expr) => satisfies((await caller()).scopes, expr),
      };
      const result = await def.handler(apiReq);
      if (!authorized) throw new Error(`${def.name}: deferred authorization was never checked`);
      status = result.status ?? 200;
      return toResponse(result);
    } catch (err) {
      if (err instanceof ApiError) {
        status = err.status;
        return errorResponse(err, errCtx);
      }
      if (err instanceof StorageLimit) {
        // Input that would store more than Azure Storage holds: the caller's to shrink, not a fault of ours.
        const tooLarge = new ApiError('InputTooLarge', `the request is larger than storage holds: ${err.message}`);
        status = tooLarge.status;
        return errorResponse(tooLarge, errCtx);
      }
      const incidentId = crypto.randomUUID();
      if (!(err instanceof InjectedFault)) context.error(`${def.name} failed, incidentId ${incidentId}:`, err);
      status = 500;
      return errorResponse(new ApiError('InternalServerError', `Internal Server Error, incidentId ${incidentId}.`), errCtx);
    } finally {
      svc?.log.request({ fn: def.name, method: request.method, status, ms: Date.now() - started, storageCalls: tally.calls });
    }
  }
}
