/**
 * The hooks domain: validating definitions, rendering a hook's task with JSON-e and creating it
 * through the queue's own createTask, trigger tokens, and recording fires.
 */
import crypto from 'node:crypto';
import { Cron, CronOptions } from 'croner';
import * as slugid from 'slugid';
import type { Services } from '../services';
import { ApiError, conflict, inputError, notFound } from '../errors';
import { render, satisfies, unsatisfied } from '../auth/scopes';
import { createTask, CREATE_TASK_SCOPES } from '../lifecycle/create';
import type { TaskStatus } from '../tasks/model';
import { decryptToken, encryptToken, generateAccessToken } from '../auth/clients';
import { FireRecord, HookDefinition, HookRecord, HookStore, LastFire, definitionDigest, fireKeys } from './store';
import { encodeKey } from '../storage/keys';
import { SLUGID } from '../tasks/vocabulary';
import { BudgetExceeded, Sandbox, SandboxBusy, SandboxJob, SandboxOwner, SandboxResult, overBudget } from '../sandbox/sandbox';
import { deniedExchange } from './denylist';

/** What hook code needs: the queue's task dependencies plus roles (for the hook's scopes) and the token key. */
export type HookDeps = Services;

/** Cron patterns per hook: every tick computes each pattern's next date. */
export const MAX_SCHEDULE_PATTERNS = 64;
/** The definition is one string property of the hook row (64 KiB, UTF-16). */
export const MAX_DEFINITION_CHARS = 30_000;
/** Last fires are kept this long (Taskcluster keeps them a year). */
export const FIRE_RETENTION_MS = 365 * 24 * 3600 * 1000;
/** Defaults of a rendered task without them (Taskcluster's). */
const DEFAULT_DEADLINE_MS = 24 * 3600 * 1000;
const DEFAULT_EXPIRES_MS = 31 * 24 * 3600 * 1000;
export const EXPIRY_KIND_FIRE = 'hook-fire';

/**
 * A trigger refused because its hook has too many sandbox jobs waiting (shared/sandbox/sandbox.ts).
 * Taskcluster's error codes have no 429 or 503, and a 5xx would be wrong twice: taskcluster-client
 * retries 5xx five times (multiplying a flood) and no caller may make the service answer 5xx
 * (docs/hardening.md). RequestConflict (409, "conflicts with server state": the hook's share of the
 * sandbox is full) is not retried by the client and tells the caller to try again later. Not
 * recorded as a fire: the hook did not fire.
 */
export class HookBusy extends ApiError {
  constructor(e: SandboxBusy) {
    const why = e.penalized ? 'after one of its jobs went over its time or memory budget' : 'already';
    super('RequestConflict', `hook ${e.owner} has ${e.waiting} triggers waiting for the sandbox ${why}; try again in a few seconds`);
  }
}

/** A hook's work in the sandbox: its pool, and whether it is schedule- or trigger-class work (SandboxOwner). */
export interface HookJob {
  pool: Sandbox;
  def: Pick<HookDefinition, 'hookGroupId' | 'hookId'>;
  priority: SandboxOwner['priority'];
}

/** Schedule and event-bound fires are paced by the reaper; triggers by their callers. */
export const priorityOf = (firedBy: FireRecord['firedBy']): SandboxOwner['priority'] =>
  firedBy === 'triggerHook' || firedBy === 'triggerHookWithToken' ? 'trigger' : 'schedule';

/**
 * Runs a job in the sandbox (shared/sandbox/sandbox.ts) on the hook's account; `what` names the
 * template or schema in the 400 when it goes over a budget.
 */
async function sandboxed(use: HookJob, what: string, job: SandboxJob): Promise<SandboxResult> {
  const { pool, def, priority } = use;
  try {
    const r = await pool.run(job, { owner: `${def.hookGroupId}/${def.hookId}`, priority });
    if (!r.ok && r.name === 'ResultTooLarge') throw overBudget(what, 'size', pool.budget);
    return r;
  } catch (e) {
    if (e instanceof BudgetExceeded) throw overBudget(what, e.budget, pool.budget);
    if (e instanceof SandboxBusy) throw new HookBusy(e);
    throw e;
  }
}

/** Renders a JSON-e template in the sandbox; a template error is thrown as `{name, message}` (an Error). */
export async function renderTemplate(use: HookJob, what: string, template: unknown, context: Record<string, unknown>): Promise<unknown> {
  const r = await sandboxed(use, what, { kind: 'render', template, context });
  if (!r.ok) throw Object.assign(new Error(r.message), { name: r.name });
  return JSON.parse(r.json!);
}

export const hookRole = (h: { hookGroupId: string; hookId: string }) => `hook-id:${h.hookGroupId}/${h.hookId}`;

/** The next fire after `after` over all patterns, or undefined with no patterns. */
/**
 * Taskcluster's hook schedules (cron-parser syntax: 5 fields, or 6 with seconds first) in croner's
 * terms, in UTC: a day matches the day or the day-of-week field (as Vixie cron ORs them), and `5/15`
 * means "from 5, every 15".
 */
const HOOK_CRON: CronOptions = { timezone: 'UTC', mode: '5-or-6-parts', sloppyRanges: true, paused: true };

/** A parsed hook schedule pattern; throws on a bad one. */
const parsePattern = (pattern: string): Cron => new Cron(pattern, HOOK_CRON);

export function nextDate(schedule: string[], after: Date): Date | undefined {
  let best: Date | undefined;
  for (const pattern of schedule) {
    const d = parsePattern(pattern).nextRun(after) ?? undefined;
    if (d && (!best || d < best)) best = d;
  }
  return best;
}

/**
 * Checks what the schema cannot: cron patterns, the trigger schema, the template, the bindings. 400
 * naming the field. Schedule-class sandbox work: the hook's writer is authenticated, and a flood of
 * its triggers must not keep it from fixing the hook.
 */
export async function checkDefinition(def: HookDefinition, pool: Sandbox): Promise<void> {
  const use: HookJob = { pool, def, priority: 'schedule' };
  if (def.schedule.length > MAX_SCHEDULE_PATTERNS) throw inputError(`schedule may hold at most ${MAX_SCHEDULE_PATTERNS} patterns`);
  def.schedule.forEach((p, i) => {
    try {
      parsePattern(p);
    } catch (e) {
      throw inputError(`schedule[${i}] '${p}' is not a valid cron pattern: ${(e as Error).message.replace(/^CronPattern: /, '')}`);
    }
  });
  if (JSON.stringify(def).length > MAX_DEFINITION_CHARS)
    throw inputError(`the hook definition (task template included) may be at most ${MAX_DEFINITION_CHARS} characters of JSON`);
  const compiled = await sandboxed(use, 'triggerSchema', { kind: 'compile', schema: def.triggerSchema });
  if (!compiled.ok) throw inputError(`triggerSchema is not a valid JSON schema: ${compiled.message}`);
  // A trial render catches template errors that do not depend on the context's values.
  try {
    await renderTemplate(use, "the hook's task template", def.task, {
      firedBy: 'schedule',
      taskId: slugid.nice(),
      now: new Date().toJSON(),
      payload: {},
      clientId: '',
    });
  } catch (e) {
    if (e instanceof ApiError) throw e;
    if ((e as Error).name !== 'InterpreterError') throw inputError(`task is not a valid JSON-e template: ${(e as Error).name}: ${(e as Error).message}`);
  }
  if (def.bindings.some((b) => deniedExchange(b.exchange))) {
    throw inputError(`One or more of the exchanges below have been denied access to hooks\n${JSON.stringify(def.bindings)}`);
  }
  def.bindings.forEach((b, i) => {
    if (!/^[^\s]+$/.test(b.exchange)) throw inputError(`bindings[${i}].exchange '${b.exchange}' must be an exchange name without spaces`);
    const words = b.routingKeyPattern.split('.');
    if (words.some((w) => w === '' || (/[*#]/.test(w) && w !== '*' && w !== '#'))) {
      throw inputError(`bindings[${i}].routingKeyPattern '${b.routingKeyPattern}' must be dot-separated words, '*' or '#'`);
    }
  });
}

/** The definition as the API returns it. */
export function definitionView(d: HookDefinition) {
  const { overlap, ...rest } = d;
  return overlap ? { ...rest, overlap } : rest;
}

async function normalize(d: HookDeps, hookGroupId: string, hookId: string, body: any): Promise<HookDefinition> {
  for (const [k, v] of [
    ['hookGroupId', hookGroupId],
    ['hookId', hookId],
  ] as const) {
    if (body[k] !== undefined && body[k] !== v) throw inputError(`${k} in the body ('${body[k]}') does not match the URL ('${v}')`);
  }
  const def: HookDefinition = {
    hookGroupId,
    hookId,
    metadata: body.metadata,
    schedule: body.schedule,
    task: body.task,
    triggerSchema: body.triggerSchema,
    bindings: body.bindings,
    ...(body.overlap ? { overlap: body.overlap } : {}),
  };
  await checkDefinition(def, d.sandbox);
  return def;
}

export async function createHook(d: HookDeps, hookGroupId: string, hookId: string, body: unknown): Promise<HookDefinition> {
  const def = await normalize(d, hookGroupId, hookId, body);
  const store = new HookStore(d.storage);
  const next = nextDate(def.schedule, d.now());
  const rec: HookRecord = {
    definition: def,
    token: encryptToken(d.config.tokenEncryptionKey, generateAccessToken()),
    nextScheduledDate: next?.toJSON() ?? '',
    lastFire: { result: 'no-fire' },
  };
  await bindingsOf(d).widenHookBindings(hookGroupId, hookId, def.bindings);
  const announce = await d.events.prepareHookChanged('hook-created', hookGroupId, hookId, slugid.nice(), definitionDigest(def));
  if (!(await store.insert(rec))) {
    const cur = await store.get(hookGroupId, hookId);
    // A retried create of the same definition succeeds (and, as Taskcluster's, announces it again); anything else is a conflict.
    if (cur && JSON.stringify(cur.definition) === JSON.stringify(def)) {
      await d.events.delivered(announce);
      return cur.definition;
    }
    await d.events.discard(announce);
    throw conflict(`hook ${hookGroupId}/${hookId} already exists`);
  }
  if (def.bindings.length) await syncBindings(d, hookGroupId, hookId);
  await d.events.delivered(announce);
  return def;
}

/**
 * The hook bindings the events dispatcher reads (shared/events/subscriptions.ts). Every hook write
 * widens them before (so a crash leaves at most extra bindings, whose events the consumer drops)
 * and makes them exact after.
 */
const bindingsOf = (d: HookDeps) => d.events.dispatcher.subscriptions;

function syncBindings(d: HookDeps, hookGroupId: string, hookId: string): Promise<void> {
  const store = new HookStore(d.storage);
  return bindingsOf(d).syncHookBindings(hookGroupId, hookId, async () => (await store.get(hookGroupId, hookId))?.definition);
}

export async function removeHook(d: HookDeps, hookGroupId: string, hookId: string): Promise<void> {
  const announce = await d.events.prepareHookChanged('hook-deleted', hookGroupId, hookId, slugid.nice());
  await new HookStore(d.storage).remove(hookGroupId, hookId);
  await syncBindings(d, hookGroupId, hookId);
  await d.events.delivered(announce);
}

/** Changes the hook under its ETag, again after a lost race; `fn` returns the record to write (or undefined to write nothing). */
export async function modifyHook(d: HookDeps, hookGroupId: string, hookId: string, fn: (h: HookRecord) => HookRecord | undefined): Promise<HookRecord> {
  const stored = await new HookStore(d.storage).modify(hookGroupId, hookId, (cur) => {
    if (!cur) throw notFound(`hook ${hookGroupId}/${hookId} not found`);
    return fn(cur);
  });
  return stored!;
}

export async function updateHook(d: HookDeps, hookGroupId: string, hookId: string, body: unknown): Promise<HookDefinition> {
  const def = await normalize(d, hookGroupId, hookId, body);
  const now = d.now();
  await bindingsOf(d).widenHookBindings(hookGroupId, hookId, def.bindings);
  const announce = await d.events.prepareHookChanged('hook-updated', hookGroupId, hookId, slugid.nice(), definitionDigest(def));
  const rec = await modifyHook(d, hookGroupId, hookId, (h) => ({
    ...h,
    definition: def,
    nextScheduledDate: nextDate(def.schedule, now)?.toJSON() ?? '',
  })).catch(async (err) => {
    if ((err as ApiError).code === 'ResourceNotFound') {
      await d.events.discard(announce);
      await syncBindings(d, hookGroupId, hookId); // undo the widening
    }
    throw err;
  });
  await syncBindings(d, hookGroupId, hookId);
  await d.events.delivered(announce);
  return rec.definition;
}

export async function loadHook(d: HookDeps, hookGroupId: string, hookId: string): Promise<HookRecord> {
  const h = await new HookStore(d.storage).get(hookGroupId, hookId);
  if (!h) throw notFound(`hook ${hookGroupId}/${hookId} not found`);
  return h;
}

export function tokenOf(d: HookDeps, h: HookRecord): string {
  return decryptToken(d.config.tokenEncryptionKey, h.token);
}

export async function resetToken(d: HookDeps, hookGroupId: string, hookId: string): Promise<string> {
  const token = generateAccessToken();
  await modifyHook(d, hookGroupId, hookId, (h) => ({ ...h, token: encryptToken(d.config.tokenEncryptionKey, token) }));
  return token;
}

/** Constant-time comparison (of digests, so lengths leak nothing either). */
export function tokenMatches(expected: string, given: string): boolean {
  const a = crypto.createHash('sha256').update(expected).digest();
  const b = crypto.createHash('sha256').update(given).digest();
  return crypto.timingSafeEqual(a, b);
}

/** Validates a trigger payload against the hook's triggerSchema (400 with the schema's errors), as `firedBy` fires it. */
export async function checkPayload(d: Pick<HookDeps, 'sandbox'>, def: HookDefinition, payload: unknown, firedBy: FireRecord['firedBy']): Promise<void> {
  const use: HookJob = { pool: d.sandbox, def, priority: priorityOf(firedBy) };
  const r = await sandboxed(use, "the hook's triggerSchema validation", { kind: 'validate', schema: def.triggerSchema, data: payload });
  if (!r.ok) throw inputError(`the hook's triggerSchema cannot be used: ${r.message}`);
  if (!r.valid) {
    const errors = (r.errors ?? []).map((e) => `  * ${e.instancePath || '/'} ${e.message}`).join('\n');
    throw new ApiError('InputValidationError', `payload does not match the hook's triggerSchema:\n${errors}`);
  }
}

export interface FireContext {
  firedBy: FireRecord['firedBy'];
  payload?: unknown;
  clientId?: string;
}

/**
 * Renders the hook's task and creates it as `taskId` with the hook's role as its only authority.
 * `time` is JSON-e's `now` and the default `created`. Undefined when the template renders null.
 * Errors: ApiError (template, invalid task, scopes, createTask's 4xx); others are storage trouble.
 */
export async function fireHook(d: HookDeps, def: HookDefinition, ctx: FireContext, taskId: string, time: Date): Promise<TaskStatus | undefined> {
  const context: Record<string, unknown> = { firedBy: ctx.firedBy, taskId, now: time.toJSON() };
  if (ctx.payload !== undefined) context.payload = ctx.payload;
  if (ctx.clientId !== undefined) context.clientId = ctx.clientId;
  let task: any;
  try {
    task = await renderTemplate({ pool: d.sandbox, def, priority: priorityOf(ctx.firedBy) }, "the hook's task template", def.task, context);
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw inputError(`the hook's task template failed to render: ${(e as Error).name}: ${(e as Error).message}`);
  }
  if (task === null) return undefined;
  if (typeof task !== 'object' || Array.isArray(task)) throw inputError("the hook's task template must render to an object (or null)");
  task.created ??= time.toJSON();
  task.deadline ??= new Date(new Date(task.created).getTime() + DEFAULT_DEADLINE_MS).toJSON();
  task.expires ??= new Date(new Date(task.created).getTime() + DEFAULT_EXPIRES_MS).toJSON();
  const errors = d.checkTask(task);
  if (errors.length) throw new ApiError('InputValidationError', `the hook's rendered task is not a valid task:\n${errors.map((e) => `  * ${e}`).join('\n')}`);
  // The task is created with authorizedScopes [assume:hook-id:<group>/<hook>]: what that role grants.
  const scopes = await d.clients.expand([`assume:${hookRole(def)}`]);
  const authorize = async (params: Record<string, unknown>) => {
    const expr = render(CREATE_TASK_SCOPES, params);
    if (!satisfies(scopes, expr)) {
      throw new ApiError(
        'InsufficientScopes',
        `role ${hookRole(def)} lacks scopes to create this task:\n${JSON.stringify(unsatisfied(scopes, expr), null, 2)}`,
      );
    }
  };
  return createTask(d, taskId, task, authorize);
}

/** Records a fire (result or error) for a year; idempotent. */
export async function recordFire(d: HookDeps, f: FireRecord): Promise<void> {
  const store = new HookStore(d.storage);
  const keys = fireKeys(f);
  const expires = new Date(new Date(f.taskCreateTime).getTime() + FIRE_RETENTION_MS).toJSON();
  // Expiry row first, so the fire row is always found when its year is up.
  await d.expiry.record(EXPIRY_KIND_FIRE, encodeKey(`${keys.partitionKey}~${keys.rowKey}`), expires, keys);
  await store.recordFire(f);
}

export function lastFireOf(result: { taskId: string; time: string; error?: ApiError }): LastFire {
  if (result.error) return { result: 'error', error: { code: result.error.code, message: result.error.message }, time: result.time };
  return { result: 'success', taskId: result.taskId, time: result.time };
}

/** Taskcluster's slugid pattern, for a `taskId` a trigger payload names. */
const SLUGID_RE = new RegExp(SLUGID);

/**
 * The taskId a trigger payload asks for (Taskcluster v106 reads `taskId` from the payload), or
 * undefined; a malformed one is a 400 InputError.
 */
export function payloadTaskId(payload: unknown): string | undefined {
  if (typeof payload !== 'object' || payload === null || !('taskId' in payload)) return undefined;
  const taskId = (payload as { taskId: unknown }).taskId;
  if (typeof taskId !== 'string' || !SLUGID_RE.test(taskId))
    throw inputError(`taskId in the payload must be a slugid (${SLUGID}), got ${JSON.stringify(taskId)}`);
  return taskId;
}

/**
 * A call-triggered fire (triggerHook, triggerHookWithToken): the payload's taskId or a fresh one, created now, the
 * outcome recorded as the hook's last fire. ApiErrors are rethrown to the caller after recording.
 */
export async function triggerHook(d: HookDeps, hookGroupId: string, hookId: string, ctx: FireContext): Promise<TaskStatus | undefined> {
  const h = await loadHook(d, hookGroupId, hookId);
  await checkPayload(d, h.definition, ctx.payload ?? {}, ctx.firedBy);
  const taskId = payloadTaskId(ctx.payload) ?? slugid.nice();
  const time = d.now();
  let status: TaskStatus | undefined;
  let error: ApiError | undefined;
  try {
    status = await fireHook(d, h.definition, ctx, taskId, time);
  } catch (err) {
    if (!(err instanceof ApiError) || err instanceof HookBusy) throw err; // a refused trigger is no fire
    error = err;
  }
  if (status || error) {
    await recordFire(d, {
      hookGroupId,
      hookId,
      firedBy: ctx.firedBy,
      taskId,
      taskCreateTime: time.toJSON(),
      result: error ? 'error' : 'success',
      error: error?.message ?? '',
    });
    const last = lastFireOf({ taskId, time: time.toJSON(), error });
    await modifyHook(d, hookGroupId, hookId, (cur) => ({ ...cur, lastFire: last, lastTaskId: status ? taskId : cur.lastTaskId }));
  }
  if (error) throw error;
  return status;
}
