/**
 * The registry of structured log events: every line the service logs is one of these, at its
 * level, with these fields (Logger in shared/log.ts only accepts them, so an unregistered event
 * or a wrong field fails type-checking). docs/logs.md is generated from it (`logEventsMarkdown`),
 * and a unit test keeps the two equal.
 */

type FieldType = 'string' | 'number' | 'boolean' | 'string[]' | 'string | null' | 'object';
interface FieldDoc {
  type: FieldType;
  doc: string;
  optional?: true;
}
export type LogLevel = 'info' | 'warn' | 'error';
interface LogEventType {
  level: LogLevel;
  description: string;
  fields: Record<string, FieldDoc>;
}

const str = (doc: string) => ({ type: 'string', doc }) as const;
const num = (doc: string) => ({ type: 'number', doc }) as const;
const bool = (doc: string) => ({ type: 'boolean', doc }) as const;
const opt = <F extends FieldDoc>(f: F) => ({ ...f, optional: true }) as const;

// Fields many events share, described once.
const error = str('the error message');
const taskId = str('the task');
const runId = num('the run');
const taskQueueId = str('`<provisionerId>/<workerType>`');
const workerGroup = str("the worker's group");
const workerId = str("the worker's id");
const hookGroupId = str("the hook's group");
const hookId = str('the hook');

export const LOG_EVENTS = {
  // ---- requests and transitions ----
  request: {
    level: 'info',
    description: 'One per API call or function invocation.',
    fields: {
      fn: str('the route or function name'),
      method: str('HTTP method'),
      status: num('HTTP status answered'),
      ms: num('latency'),
      storageCalls: num('storage calls the call made'),
    },
  },
  'task-transition': {
    level: 'info',
    description: "One per history entry a write adds (a run's transition, or the task's creation).",
    fields: {
      taskId,
      taskQueueId,
      transition: str('`created`, `scheduled`, `claimed`, `reclaimed`, `resolved` or `prioritized`'),
      seq: num("the entry's number in the task's history"),
      time: str('when it was written'),
      runId: opt(runId),
      from: { type: 'string | null', doc: "the run's state before (null: a new run or task)" },
      to: str("the run's or task's state after"),
      reason: str('reasonCreated, reasonResolved, or the transition'),
      actor: opt(str('clientId of the caller, or `reaper`')),
      workerGroup: opt(workerGroup),
      workerId: opt(workerId),
      takenUntil: opt(str("the claim's end")),
    },
  },
  'claim-expired': {
    level: 'info',
    description: "A run's claim expired without a reclaim; it is retried if retries are left.",
    fields: { taskId, runId, retried: bool('a new run was scheduled') },
  },
  'deadline-exceeded': {
    level: 'info',
    description: 'A task reached its deadline unresolved.',
    fields: { taskId },
  },
  'worker-gone': {
    level: 'info',
    description: 'A run resolved as `worker-shutdown` because its worker was declared gone.',
    fields: { taskId, runId, workerGroup, workerId },
  },
  'worker-declared-gone': {
    level: 'info',
    description: '`declareWorkerGone` finished: how many runs it resolved.',
    fields: { taskQueueId, workerGroup, workerId, resolved: num('runs resolved') },
  },
  'deadline-rearm-failed': {
    level: 'warn',
    description: "The deadline trigger that guarded a write's events was not re-armed; it fires early and is re-armed then.",
    fields: { taskId, error },
  },
  'resolved-net-delete-failed': {
    level: 'warn',
    description: "A resolution's safety-net trigger was not deleted; it fires and finds nothing to do.",
    fields: { taskId, error },
  },
  'dependency-tracking-interrupted': {
    level: 'warn',
    description: "createTask's background dependency tracking stopped; its tracking trigger finishes it.",
    fields: { taskId, error },
  },

  // ---- claiming work ----
  'claim-failed': {
    level: 'error',
    description: 'A hinted run could not be claimed; the hint comes back.',
    fields: { taskId, runId, error },
  },
  'hint-invalid': {
    level: 'warn',
    description: 'A pending-queue message that is no hint of this queue was dropped.',
    fields: { queue: str('the storage queue'), messageId: str('the message') },
  },
  'hint-cleanup-failed': {
    level: 'warn',
    description: 'A used or stale hint was not deleted; it is dropped when it shows again.',
    fields: { taskId, runId, error },
  },
  'hint-dequeued-many-times': {
    level: 'warn',
    description: 'A hint was received more than 10 times: something keeps failing to claim it.',
    fields: { taskQueueId, dequeueCount: num("the message's dequeue count"), taskId: opt(taskId), runId: opt(runId) },
  },
  'hint-poller-failed': {
    level: 'error',
    description: "A task queue's hint poller round failed; it tries again.",
    fields: { taskQueueId, error },
  },
  'hint-repaired': {
    level: 'warn',
    description: 'A pending run whose hint was lost or hidden got a fresh one.',
    fields: { taskId, runId, taskQueueId },
  },
  'xml-hint-forged': {
    level: 'warn',
    description: 'claimWork with `xmlMessage` got a message this queue did not sign (400).',
    fields: { taskQueueId, messageId: str('the message'), workerGroup, workerId },
  },
  'recent-tasks-write-failed': {
    level: 'warn',
    description: "A worker's recentTasks were not updated; the claims stand.",
    fields: { taskQueueId, workerGroup, workerId, error },
  },

  // ---- the reaper ----
  'reaper-pass': {
    level: 'info',
    description: 'One per reaper pass: what each of its steps handled.',
    fields: {
      deadline: num('deadlines acted on: expiry-index rows and deadline messages'),
      claim: num('claims expired or found ended: expiry-index rows and claim-expiry messages'),
      resolved: num('resolution safety nets'),
      events: num('event sweeps and fan-out messages'),
      consumed: opt(num('events applied by the index and hooks consumers')),
      expired: num('records expired'),
      rehinted: num('pending runs given a fresh hint'),
      deferred: num('triggers not due yet by our clock'),
      failed: num('handlers that failed (their triggers come back)'),
      transitions: num('run transitions the pass made'),
      ms: num('how long the pass took'),
    },
  },
  'reaper-handler-failed': {
    level: 'error',
    description: 'A trigger handler failed; the trigger comes back after a back-off.',
    fields: { queue: str('the trigger queue'), message: { type: 'object', doc: "the trigger's body" }, error },
  },
  'expiry-kind-unknown': {
    level: 'warn',
    description: 'An expiry index row of an unknown kind was left in place.',
    fields: { kind: str("the row's kind"), id: str("the row's id") },
  },
  'expiry-failed': {
    level: 'error',
    description: 'A record could not be expired; its expiry row stays for the next pass.',
    fields: { kind: str("the row's kind"), id: str("the row's id"), error },
  },
  'carried-expiries-failed': {
    level: 'error',
    description: "The expiry rows that a sweep page's deadline rows carry could not be recorded; those deadline rows stay for the next pass.",
    fields: { rows: num('deadline rows'), error },
  },
  'expiry-rows-remove-failed': {
    level: 'error',
    description: 'Expired records were removed but their expiry rows were not; the next pass redoes them.',
    fields: { rows: num('expiry rows'), error },
  },
  'artifacts-expired': {
    level: 'info',
    description: "A pass's artifact expiry, when it did something.",
    fields: { runs: num('runs whose artifacts expired'), artifacts: num('artifacts removed'), failed: num('runs that failed') },
  },
  'artifact-expiry-failed': {
    level: 'error',
    description: "A run's artifacts (or the whole step) could not be expired; tried again next pass.",
    fields: { run: opt(str('the run (`<taskId>/<runId>`), or `object <name>`')), error },
  },
  'hint-repair-failed': {
    level: 'error',
    description: "The reaper's hint repair step failed.",
    fields: { error },
  },
  'hook-schedule-failed': {
    level: 'error',
    description: "The reaper's hook schedule step failed.",
    fields: { error },
  },

  // ---- events ----
  'event-delivery-failed': {
    level: 'error',
    description: "A write's events were not delivered; their sweep trigger delivers them.",
    fields: { ids: { type: 'string[]', doc: 'the event ids' }, error },
  },
  'event-republish-failed': {
    level: 'warn',
    description: "An idempotent repeat's events were not published again (a courtesy; the first call's were).",
    fields: { taskId, error },
  },
  'events-redelivered': {
    level: 'info',
    description: "A run's claim-expiry message (it guards the run's events) found its run ended and delivered its events again.",
    fields: { taskId, runId, events: num('events delivered') },
  },
  'events-swept': {
    level: 'info',
    description: 'An event sweep or fan-out message delivered events.',
    fields: {
      kind: str('`task`, `run`, `artifact`, `group-sealed`, `hook` or `event`'),
      delivered: num('events delivered'),
      fanout: bool('a fan-out message'),
    },
  },
  'consumer-failed': {
    level: 'error',
    description: 'The index and hooks consumer failed on an event; it comes back.',
    fields: { messageId: str('the message'), dequeueCount: num("the message's dequeue count"), error },
  },

  // ---- read models and charts ----
  'index-write-failed': {
    level: 'warn',
    description: "A read-model write was lost; the task's next transition repairs it.",
    fields: { taskId, error },
  },
  'rollup-write-failed': {
    level: 'warn',
    description: "A minute's chart tallies were not written.",
    fields: { minute: str('the minute'), error },
  },
  'rollup-prune-failed': {
    level: 'warn',
    description: 'Old chart rows were not removed; tried again later.',
    fields: { partition: str('the rollup partition'), error },
  },

  // ---- index and hooks ----
  'index-route-skipped': {
    level: 'warn',
    description: 'An `index.` route of a completed task was not indexed.',
    fields: { taskId, route: str('the route'), error },
  },
  'hook-fire-failed': {
    level: 'error',
    description: 'A scheduled hook fire failed; the tick is tried again.',
    fields: { hookGroupId, hookId, error },
  },
  'hook-fire-skipped': {
    level: 'info',
    description: "A scheduled fire skipped (`overlap: skip`): the previous fire's task is unresolved.",
    fields: { hookGroupId, hookId, previousTaskId: opt(str("the previous fire's task")), scheduled: str('the tick') },
  },
  'sandbox-process-ended': {
    level: 'warn',
    description:
      'A sandbox child process (it renders JSON-e templates and runs trigger schemas) ended on its own. Out of memory, the job it ran is refused as over its memory budget (a 400); the next job starts a fresh process.',
    fields: {
      exit: str('`code <n>` or `signal <name>`'),
      outOfMemory: bool('V8 reported reaching the heap limit (its report is not logged)'),
      running: bool('it was running a job (or starting for one)'),
      stderr: opt(str('the start of its stderr, when it was not the heap-limit report')),
    },
  },
  'hook-event-dropped': {
    level: 'info',
    description: "An event bound to a hook was not fired: its payload does not match the hook's triggerSchema.",
    fields: { hookGroupId, hookId, eventId: str('the event'), reason: str('why') },
  },
} as const satisfies Record<string, LogEventType>;

type Registry = typeof LOG_EVENTS;
export type LogEventName = keyof Registry;
/** The events logged at `level`. */
export type LogEventAt<L extends LogLevel> = { [E in LogEventName]: Registry[E]['level'] extends L ? E : never }[LogEventName];

type TypeOf<T extends FieldType> = T extends 'string'
  ? string
  : T extends 'number'
    ? number
    : T extends 'boolean'
      ? boolean
      : T extends 'string[]'
        ? string[]
        : T extends 'string | null'
          ? string | null
          : Record<string, unknown>;
type Shape<F extends Record<string, FieldDoc>> = { [K in keyof F as F[K] extends { optional: true } ? never : K]: TypeOf<F[K]['type']> } & {
  [K in keyof F as F[K] extends { optional: true } ? K : never]?: TypeOf<F[K]['type']>;
};
/** The fields of event `E` (of each, for a union of events). */
export type LogFields<E extends LogEventName> = E extends LogEventName ? Shape<Registry[E]['fields']> : never;

/** docs/logs.md: the registry as a table per level. */
export function logEventsMarkdown(): string {
  const lines = [
    '# Log events',
    '',
    'Every line the service logs is one JSON object: `time`, `level`, `event` and the fields below. This',
    'page is generated from `shared/log-events.ts`, the registry the logger accepts (a unit test keeps',
    'them equal). `?` marks a field that may be absent. The [README](../README.md#operating) has the summary.',
  ];
  for (const level of ['info', 'warn', 'error'] as const) {
    lines.push('', `## ${level}`, '', '| event | what it means | fields |', '|---|---|---|');
    for (const [name, t] of Object.entries(LOG_EVENTS as Record<string, LogEventType>)) {
      if (t.level !== level) continue;
      const fields = Object.entries(t.fields).map(([f, d]) => `\`${f}${d.optional ? '?' : ''}\` (${d.type}): ${d.doc}`);
      lines.push(`| \`${name}\` | ${t.description} | ${fields.join('; ').replace(/\|/g, '\\|')} |`);
    }
  }
  return lines.join('\n') + '\n';
}
