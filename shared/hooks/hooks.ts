/**
 * The hooks domain: validating definitions, rendering a hook's task with JSON-e and creating it
 * through the queue's own createTask, trigger tokens, and recording fires.
 */
import crypto from 'node:crypto';
import Ajv, { ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import jsone from 'json-e';
import { Cron, CronOptions } from 'croner';
import * as slugid from 'slugid';
import type { Services } from '../services';
import { ApiError, conflict, inputError, notFound } from '../errors';
import { render, satisfies, unsatisfied } from '../auth/scopes';
import { createTask, CREATE_TASK_SCOPES } from '../tasks/create';
import type { TaskStatus } from '../tasks/model';
import { decryptToken, encryptToken, generateAccessToken } from '../auth/clients';
import { FireRecord, HookDefinition, HookRecord, HookStore, LastFire, fireKeys } from './store';
import { encodeKey } from '../storage/keys';

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

const schemaAjv = new Ajv({ allErrors: true, strict: false });
addFormats(schemaAjv);
/** Compiled trigger schemas kept per process; hooks are few, this only bounds a pathological churn. */
const MAX_COMPILED_SCHEMAS = 500;
const compiledSchemas = new Map<string, ValidateFunction>();

/** Compiles a trigger schema once per distinct text (Ajv's own cache is keyed by object and would grow with every read). */
function compileTriggerSchema(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  let fn = compiledSchemas.get(key);
  if (!fn) {
    fn = schemaAjv.compile(schema);
    schemaAjv.removeSchema(schema);
    if (compiledSchemas.size >= MAX_COMPILED_SCHEMAS) compiledSchemas.delete(compiledSchemas.keys().next().value!);
    compiledSchemas.set(key, fn);
  }
  return fn;
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

/** Checks what the schema cannot: cron patterns, the trigger schema, the template, the bindings. 400 naming the field. */
export function checkDefinition(def: HookDefinition): void {
  if (def.schedule.length > MAX_SCHEDULE_PATTERNS) throw inputError(`schedule may hold at most ${MAX_SCHEDULE_PATTERNS} patterns`);
  def.schedule.forEach((p, i) => {
    try {
      parsePattern(p);
    } catch (e) {
      throw inputError(`schedule[${i}] '${p}' is not a valid cron pattern: ${(e as Error).message.replace(/^CronPattern: /, '')}`);
    }
  });
  try {
    compileTriggerSchema(def.triggerSchema);
  } catch (e) {
    throw inputError(`triggerSchema is not a valid JSON schema: ${(e as Error).message}`);
  }
  // A trial render catches template errors that do not depend on the context's values.
  try {
    jsone(def.task, { firedBy: 'schedule', taskId: slugid.nice(), now: new Date().toJSON(), payload: {}, clientId: '' });
  } catch (e) {
    if ((e as Error).name !== 'InterpreterError') throw inputError(`task is not a valid JSON-e template: ${String(e)}`);
  }
  def.bindings.forEach((b, i) => {
    if (!/^[^\s]+$/.test(b.exchange)) throw inputError(`bindings[${i}].exchange '${b.exchange}' must be an exchange name without spaces`);
    const words = b.routingKeyPattern.split('.');
    if (words.some((w) => w === '' || (/[*#]/.test(w) && w !== '*' && w !== '#'))) {
      throw inputError(`bindings[${i}].routingKeyPattern '${b.routingKeyPattern}' must be dot-separated words, '*' or '#'`);
    }
  });
  if (JSON.stringify(def).length > MAX_DEFINITION_CHARS)
    throw inputError(`the hook definition (task template included) may be at most ${MAX_DEFINITION_CHARS} characters of JSON`);
}

/** The definition as the API returns it. */
export function definitionView(d: HookDefinition) {
  const { overlap, ...rest } = d;
  return overlap ? { ...rest, overlap } : rest;
}

function normalize(hookGroupId: string, hookId: string, body: any): HookDefinition {
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
  checkDefinition(def);
  return def;
}

export async function createHook(d: HookDeps, hookGroupId: string, hookId: string, body: unknown): Promise<HookDefinition> {
  const def = normalize(hookGroupId, hookId, body);
  const store = new HookStore(d.storage);
  const next = nextDate(def.schedule, d.now());
  const rec: HookRecord = {
    definition: def,
    token: encryptToken(d.config.tokenEncryptionKey, generateAccessToken()),
    nextScheduledDate: next?.toJSON() ?? '',
    lastFire: { result: 'no-fire' },
  };
  await bindingsOf(d).widenHookBindings(hookGroupId, hookId, def.bindings);
  if (!(await store.insert(rec))) {
    const cur = await store.get(hookGroupId, hookId);
    // A retried create of the same definition succeeds; anything else is a conflict.
    if (cur && JSON.stringify(cur.definition) === JSON.stringify(def)) return cur.definition;
    throw conflict(`hook ${hookGroupId}/${hookId} already exists`);
  }
  if (def.bindings.length) await syncBindings(d, hookGroupId, hookId);
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
  await new HookStore(d.storage).remove(hookGroupId, hookId);
  await syncBindings(d, hookGroupId, hookId);
}

/** Re-reads and retries on ETag conflicts; `fn` returns the record to write (or undefined to write nothing). */
export async function modifyHook(d: HookDeps, hookGroupId: string, hookId: string, fn: (h: HookRecord) => HookRecord | undefined): Promise<HookRecord> {
  const store = new HookStore(d.storage);
  for (;;) {
    const cur = await store.get(hookGroupId, hookId);
    if (!cur) throw notFound(`hook ${hookGroupId}/${hookId} not found`);
    const next = fn(cur);
    if (!next) return cur;
    if (await store.replace(next)) return next;
  }
}

export async function updateHook(d: HookDeps, hookGroupId: string, hookId: string, body: unknown): Promise<HookDefinition> {
  const def = normalize(hookGroupId, hookId, body);
  const now = d.now();
  await bindingsOf(d).widenHookBindings(hookGroupId, hookId, def.bindings);
  const rec = await modifyHook(d, hookGroupId, hookId, (h) => ({
    ...h,
    definition: def,
    nextScheduledDate: nextDate(def.schedule, now)?.toJSON() ?? '',
  })).catch(async (err) => {
    if ((err as ApiError).code === 'ResourceNotFound') await syncBindings(d, hookGroupId, hookId); // undo the widening
    throw err;
  });
  await syncBindings(d, hookGroupId, hookId);
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

/** Validates a trigger payload against the hook's triggerSchema (400 with the schema's errors). */
export function checkPayload(def: HookDefinition, payload: unknown): void {
  const fn = compileTriggerSchema(def.triggerSchema);
  if (!fn(payload)) {
    const errors = (fn.errors ?? []).map((e) => `  * ${e.instancePath || '/'} ${e.message}`).join('\n');
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
    task = jsone(def.task, context);
  } catch (e) {
    throw inputError(`the hook's task template failed to render: ${String(e)}`);
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

/**
 * A call-triggered fire (triggerHook, triggerHookWithToken): a fresh taskId, created now, the
 * outcome recorded as the hook's last fire. ApiErrors are rethrown to the caller after recording.
 */
export async function triggerHook(d: HookDeps, hookGroupId: string, hookId: string, ctx: FireContext): Promise<TaskStatus | undefined> {
  const h = await loadHook(d, hookGroupId, hookId);
  checkPayload(h.definition, ctx.payload ?? {});
  const taskId = slugid.nice();
  const time = d.now();
  let status: TaskStatus | undefined;
  let error: ApiError | undefined;
  try {
    status = await fireHook(d, h.definition, ctx, taskId, time);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
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
