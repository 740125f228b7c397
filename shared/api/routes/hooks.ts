/**
 * The Hooks service (/api/hooks/v1): hooks create tasks from a JSON-e template on a schedule, on
 * a call (with credentials or a trigger token) or on queue events (bindings).
 */
import '../hooks-schemas';
import { ApiRequest, RouteDef, ok } from '../types';
import { authFailed, badUrlParam, notFound } from '../../errors';
import { decodeToken, encodeToken, isPageToken, pageLimit } from '../continuation';
import { HookStore } from '../../hooks/store';
import { createHook, definitionView, loadHook, removeHook, resetToken, tokenMatches, tokenOf, triggerHook, updateHook } from '../../hooks/hooks';
import { heartbeatRoute, lbheartbeatRoute } from './health';
import { MAX_HOOK_ID_LENGTH } from '../../hooks/ids';

const ids = (req: ApiRequest) => [req.params.hookGroupId, req.params.hookId] as const;

/** taskcluster-client leaves hookGroupId/hookId unchecked; these are Taskcluster's formats (a hookId may hold `/`). */
const HOOK_PARAMS = {
  hookGroupId: new RegExp(`^[a-zA-Z0-9-_]{1,${MAX_HOOK_ID_LENGTH}}$`),
  hookId: new RegExp(`^[a-zA-Z0-9-_/]{1,${MAX_HOOK_ID_LENGTH}}$`),
};
function checkIds(req: ApiRequest): void {
  for (const k of ['hookGroupId', 'hookId'] as const) {
    const v = req.params[k];
    if (v !== undefined && !HOOK_PARAMS[k].test(v)) throw badUrlParam(k, v, HOOK_PARAMS[k]);
  }
}

/** Taskcluster's answer (since v42): the taskId, again under `status` where older clients look; {} when no task was made. */
const triggerResponse = (status: { taskId: string } | undefined) => ok(status ? { taskId: status.taskId, status: { taskId: status.taskId } } : {});

export const hookRoutes: RouteDef[] = [
  {
    name: 'ping',
    title: 'Ping Server',
    stability: 'stable',
    output: 'ping-response',
    service: 'hooks',
    method: 'GET',
    route: '/ping',
    scopes: null,
    description: 'Whether the service is up.',
    handler: async (req) => ok({ alive: true, uptime: (Date.now() - req.services.startedAt.getTime()) / 1000 }),
  },
  lbheartbeatRoute('hooks'),
  heartbeatRoute('hooks'),
  {
    name: 'listHookGroups',
    title: 'List hook groups',
    stability: 'stable',
    output: 'list-hook-groups-response',
    service: 'hooks',
    method: 'GET',
    route: '/hooks',
    scopes: 'hooks:list-hooks:',
    description: 'The hook groups that hold at least one hook.',
    handler: async (req) => ok({ groups: await new HookStore(req.services.storage).groups() }),
  },
  {
    name: 'listHooks',
    title: 'List hooks in a given group',
    stability: 'stable',
    output: 'list-hooks-response',
    service: 'hooks',
    method: 'GET',
    route: '/hooks/<hookGroupId>',
    scopes: 'hooks:list-hooks:<hookGroupId>',
    description: 'The hooks of a group (404 when it has none).',
    handler: async (req) => {
      checkIds(req);
      const hooks = await new HookStore(req.services.storage).list(req.params.hookGroupId);
      if (hooks.length === 0) throw notFound(`no hooks in group ${req.params.hookGroupId}`);
      return ok({ hooks: hooks.map((h) => definitionView(h.definition)) });
    },
  },
  {
    name: 'hook',
    title: 'Get hook definition',
    stability: 'stable',
    output: 'hook-definition',
    service: 'hooks',
    method: 'GET',
    route: '/hooks/<hookGroupId>/<hookId>',
    scopes: 'hooks:get:<hookGroupId>:<hookId>',
    description: "A hook's definition.",
    handler: async (req) => {
      checkIds(req);
      return ok(definitionView((await loadHook(req.services, ...ids(req))).definition));
    },
  },
  {
    name: 'getHookStatus',
    title: 'Get hook status',
    stability: 'deprecated',
    output: 'hook-status',
    service: 'hooks',
    method: 'GET',
    route: '/hooks/<hookGroupId>/<hookId>/status',
    scopes: 'hooks:status:<hookGroupId>/<hookId>',
    description: "A hook's last fire and next scheduled fire.",
    handler: async (req) => {
      checkIds(req);
      const h = await loadHook(req.services, ...ids(req));
      return ok({ lastFire: h.lastFire, ...(h.nextScheduledDate ? { nextScheduledDate: h.nextScheduledDate } : {}) });
    },
  },
  {
    name: 'createHook',
    title: 'Create a hook',
    stability: 'stable',
    output: 'hook-definition',
    service: 'hooks',
    method: 'PUT',
    route: '/hooks/<hookGroupId>/<hookId>',
    scopes: { AllOf: ['hooks:modify-hook:<hookGroupId>/<hookId>', 'assume:hook-id:<hookGroupId>/<hookId>'] },
    input: 'create-hook-request',
    description: 'Creates a hook (400 naming the field for a bad cron pattern, trigger schema, template or binding; 409 if a different one exists).',
    handler: async (req) => {
      checkIds(req);
      return ok(definitionView(await createHook(req.services, ...ids(req), req.body)));
    },
  },
  {
    name: 'updateHook',
    title: 'Update a hook',
    stability: 'stable',
    output: 'hook-definition',
    service: 'hooks',
    method: 'POST',
    route: '/hooks/<hookGroupId>/<hookId>',
    scopes: { AllOf: ['hooks:modify-hook:<hookGroupId>/<hookId>', 'assume:hook-id:<hookGroupId>/<hookId>'] },
    input: 'create-hook-request',
    description: "Replaces a hook's definition; its next fire is recomputed from the new schedule.",
    handler: async (req) => {
      checkIds(req);
      return ok(definitionView(await updateHook(req.services, ...ids(req), req.body)));
    },
  },
  {
    name: 'removeHook',
    title: 'Delete a hook',
    stability: 'stable',
    output: 'empty-response',
    service: 'hooks',
    method: 'DELETE',
    route: '/hooks/<hookGroupId>/<hookId>',
    scopes: 'hooks:modify-hook:<hookGroupId>/<hookId>',
    description: 'Removes a hook (its last fires expire on their own).',
    handler: async (req) => {
      checkIds(req);
      await removeHook(req.services, ...ids(req));
      return ok({});
    },
  },
  {
    name: 'triggerHook',
    title: 'Trigger a hook',
    stability: 'stable',
    output: 'trigger-hook-response',
    service: 'hooks',
    method: 'POST',
    route: '/hooks/<hookGroupId>/<hookId>/trigger',
    scopes: 'hooks:trigger-hook:<hookGroupId>/<hookId>',
    input: 'trigger-hook-request',
    description:
      "Fires a hook now with a payload checked against its triggerSchema; returns the created task's id ({} when the template renders null). " +
      'A `taskId` in the payload (a slugid) names the task to create.',
    handler: async (req) => {
      checkIds(req);
      const caller = await req.caller();
      const ctx = { firedBy: 'triggerHook' as const, payload: req.body, clientId: caller.clientId };
      return triggerResponse(await triggerHook(req.services, ...ids(req), ctx));
    },
  },
  {
    name: 'getTriggerToken',
    title: 'Get a trigger token',
    stability: 'stable',
    output: 'trigger-token-response',
    service: 'hooks',
    method: 'GET',
    route: '/hooks/<hookGroupId>/<hookId>/token',
    scopes: 'hooks:get-trigger-token:<hookGroupId>/<hookId>',
    description: "The hook's trigger token (for triggerHookWithToken).",
    handler: async (req) => {
      checkIds(req);
      return ok({ token: tokenOf(req.services, await loadHook(req.services, ...ids(req))) });
    },
  },
  {
    name: 'resetTriggerToken',
    title: 'Reset a trigger token',
    stability: 'stable',
    output: 'trigger-token-response',
    service: 'hooks',
    method: 'POST',
    route: '/hooks/<hookGroupId>/<hookId>/token',
    scopes: 'hooks:reset-trigger-token:<hookGroupId>/<hookId>',
    description: 'Replaces the trigger token; the old one stops working.',
    handler: async (req) => {
      checkIds(req);
      return ok({ token: await resetToken(req.services, ...ids(req)) });
    },
  },
  {
    name: 'triggerHookWithToken',
    title: 'Trigger a hook with a token',
    stability: 'stable',
    output: 'trigger-hook-response',
    service: 'hooks',
    method: 'POST',
    route: '/hooks/<hookGroupId>/<hookId>/trigger/<token>',
    scopes: null,
    input: 'trigger-hook-request',
    description:
      'Fires a hook without credentials, authorized by its trigger token (compared in constant time). ' +
      'A `taskId` in the payload (a slugid) names the task to create.',
    handler: async (req) => {
      checkIds(req);
      const h = await loadHook(req.services, ...ids(req));
      if (!tokenMatches(tokenOf(req.services, h), req.params.token)) throw authFailed('invalid hook trigger token');
      return triggerResponse(await triggerHook(req.services, ...ids(req), { firedBy: 'triggerHookWithToken', payload: req.body }));
    },
  },
  {
    name: 'listLastFires',
    title: 'Get information about recent hook fires',
    stability: 'stable',
    output: 'list-lastFires-response',
    service: 'hooks',
    method: 'GET',
    route: '/hooks/<hookGroupId>/<hookId>/last-fires',
    query: ['continuationToken', 'limit'],
    scopes: 'hooks:list-last-fires:<hookGroupId>/<hookId>',
    description: "The hook's fires of the last year, newest first, paged.",
    handler: async (req) => {
      checkIds(req);
      await loadHook(req.services, ...ids(req));
      const limit = pageLimit(req.query.limit);
      const token = decodeToken(req.query.continuationToken, isPageToken);
      const page = await new HookStore(req.services.storage).listFires(req.params.hookGroupId, req.params.hookId, limit, token?.c);
      const body: Record<string, unknown> = { lastFires: page.items };
      if (page.continuation) body.continuationToken = encodeToken({ c: page.continuation });
      return ok(body);
    },
  },
];
