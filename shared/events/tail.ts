/**
 * The pieces of `tcq events tail` (bin/tcq/tail.ts) that need no network: bindings from command-line
 * options, one line per event, and an API reference of the subscription endpoints that
 * taskcluster-client's createClient turns into a Hawk-signing client.
 */
import { EXCHANGES, EXCHANGE_PREFIX, ExchangeName, QueueEvent, TASK_EXCHANGES } from './exchanges';
import { Binding, bindingProblem } from './topic';

export interface TailOptions {
  /** Short exchange names (`task-completed`); default: every exchange. */
  exchanges?: string[];
  taskGroupId?: string;
  taskId?: string;
  /** `<provisionerId>/<workerType>` */
  taskQueueId?: string;
  /** A task route: matched as the CC `route.<route>` (may use `*` and `#`). */
  route?: string;
  /** A raw routing-key pattern. */
  pattern?: string;
}

/** Bindings for the options: each selected exchange with one pattern (all selectors AND-ed into it). */
export function tailBindings(o: TailOptions): Binding[] {
  // Task-level selectors say nothing about groups: then only task exchanges, unless named.
  const taskLevel = !!(o.taskId || o.taskQueueId || o.route);
  const wanted = (o.exchanges?.length ? o.exchanges : taskLevel ? [...TASK_EXCHANGES] : [...EXCHANGES]) as ExchangeName[];
  const selectors = [o.route, o.pattern, o.taskGroupId || o.taskId || o.taskQueueId ? 'x' : undefined].filter(Boolean).length;
  if (selectors > 1) throw new Error('give one of --route, --pattern, or the --task-group/--task/--task-queue selectors');
  const bindings = wanted.map((ex) => {
    const isTask = (TASK_EXCHANGES as readonly string[]).includes(ex);
    let pattern = '#';
    if (o.route) pattern = `route.${o.route}`;
    else if (o.pattern) pattern = o.pattern;
    else if (isTask && (o.taskGroupId || o.taskId || o.taskQueueId)) {
      const [prov, wt] = o.taskQueueId ? o.taskQueueId.split('/') : ['*', '*'];
      pattern = ['primary', o.taskId ?? '*', '*', '*', '*', prov, wt ?? '*', '*', o.taskGroupId ?? '*', '#'].join('.');
    } else if (!isTask && o.taskGroupId) pattern = `primary.${o.taskGroupId}.*.#`;
    return { exchange: EXCHANGE_PREFIX + ex, routingKeyPattern: pattern };
  });
  for (const b of bindings) {
    const p = bindingProblem(b);
    if (p) throw new Error(p);
  }
  return bindings;
}

/** One line: time, exchange, task/run (or group), state, worker, then the id for dedupe. */
export function eventLine(e: QueueEvent, at: Date): string {
  const p = e.payload as Record<string, any>;
  const ex = e.exchange.startsWith(EXCHANGE_PREFIX) ? e.exchange.slice(EXCHANGE_PREFIX.length) : e.exchange;
  const what = p.status ? `${p.status.taskId}${p.runId === undefined ? '' : `/${p.runId}`}` : `group ${p.taskGroupId}`;
  const state = p.status ? p.status.state : p.sealed ? 'sealed' : '';
  const worker = p.workerId ? ` ${p.workerGroup}/${p.workerId}` : '';
  const artifact = p.artifact ? ` ${p.artifact.name}` : '';
  return `${at.toISOString()} ${ex.padEnd(19)} ${what} ${state}${worker}${artifact}  #${e.seq} ${e.id}`;
}
