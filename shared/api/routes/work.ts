/**
 * The worker side: claimWork, claimTask, reclaimTask and the three reports; plus the creator
 * actions schedule, rerun and cancel.
 */
import { RouteDef, ApiRequest, ok } from '../types';
import { notFound, conflict } from '../../errors';
import { claimRun, reclaimRun, resolveRun, cancelTask, rerunTask, scheduleTask, Outcome } from '../../lifecycle/resolve';
import { taskStatus, TaskRecord } from '../../tasks/model';
import { MAX_RUNS } from '../../lifecycle/transitions';
import { claimResponse, claimWork } from '../../work/claim';
import { runCredentials } from '../../work/credentials';
import { claimFromXml } from '../../work/xml-claim';

const runIdOf = (req: ApiRequest) => Number(req.params.runId);

/** Lists claims in the worker's recentTasks; never throws: the claims stand even if that write fails. */
function recorder(req: ApiRequest, taskQueueId: string, worker: { workerGroup: string; workerId: string }) {
  return (runs: { taskId: string; runId: number }[]) =>
    req.services.workers.claimed(taskQueueId, worker.workerGroup, worker.workerId, runs).catch((err) => {
      req.services.log.warn('recent-tasks-write-failed', { taskQueueId, ...worker, error: String((err as Error)?.message ?? err) });
    });
}

async function recordClaims<C extends { status: { taskId: string }; runId: number }>(
  req: ApiRequest,
  taskQueueId: string,
  worker: { workerGroup: string; workerId: string },
  claims: C[],
): Promise<C[]> {
  await recorder(req, taskQueueId, worker)(claims.map((c) => ({ taskId: c.status.taskId, runId: c.runId })));
  return claims;
}

async function loadTask(req: ApiRequest): Promise<TaskRecord> {
  const t = await req.services.tasks.load(req.params.taskId);
  if (!t) throw notFound(`task ${req.params.taskId} not found`);
  return t;
}

function report(name: string, path: string, title: string, description: string, outcome: (req: ApiRequest) => Outcome, input?: string): RouteDef {
  return {
    name,
    title,
    description,
    stability: 'stable',
    output: 'task-status-response',
    service: 'queue',
    method: 'POST',
    route: `/task/<taskId>/runs/<runId>/${path}`,
    scopes: 'queue:resolve-task:<taskId>/<runId>',
    input,
    // Only the legacy {success: false} body of reportCompleted; taskcluster-client sends none.
    legacyInput: name === 'reportCompleted',
    handler: async (req) => ok({ status: await resolveRun(req.services, req.params.taskId, runIdOf(req), outcome(req)) }),
  };
}

/** schedule/rerun/cancel: the task is loaded first (404), then scopes use its stored ids. */
function creatorAction(
  verb: 'schedule' | 'rerun' | 'cancel',
  title: string,
  description: string,
  act: (req: ApiRequest, t: TaskRecord) => Promise<unknown>,
): RouteDef {
  return {
    name: `${verb}Task`,
    title,
    description,
    stability: 'stable',
    output: 'task-status-response',
    service: 'queue',
    method: 'POST',
    route: `/task/<taskId>/${verb}`,
    scopes: {
      AnyOf: [
        `queue:${verb}-task:<schedulerId>/<taskGroupId>/<taskId>`,
        `queue:${verb}-task-in-project:<projectId>`,
        { AllOf: [`queue:${verb}-task`, 'assume:scheduler-id:<schedulerId>/<taskGroupId>'] },
      ],
    },
    handler: async (req) => {
      const t = await loadTask(req);
      const d = t.definition;
      await req.authorize({ taskId: t.taskId, schedulerId: d.schedulerId, taskGroupId: d.taskGroupId, projectId: d.projectId });
      return ok({ status: await act(req, t) });
    },
  };
}

export const workRoutes: RouteDef[] = [
  {
    name: 'claimWork',
    title: 'Claim Work',
    description:
      'Claim pending tasks of a task queue for a worker, waiting up to the poll time for work. Each claim comes with the task, its status and temporary credentials valid until takenUntil.',
    stability: 'stable',
    output: 'claim-work-response',
    service: 'queue',
    method: 'POST',
    route: '/claim-work/<taskQueueId*>',
    scopes: { AllOf: ['queue:claim-work:<taskQueueId>', 'queue:worker-id:<workerGroup>/<workerId>'] },
    input: 'claim-work-request',
    handler: async (req) => {
      const { workerGroup, workerId, tasks, xmlMessage } = req.body;
      await req.authorize({ taskQueueId: req.params.taskQueueId, workerGroup, workerId });
      const worker = { workerGroup, workerId };
      // One worker-row read per call (quarantine + throttled "seen"); a quarantined worker waits out the poll.
      const w = await req.services.workers.seen(req.params.taskQueueId, workerGroup, workerId);
      if (req.services.workers.isQuarantined(w)) {
        await new Promise((r) => setTimeout(r, req.services.config.claimWorkPollS * 1000));
        return ok({ tasks: [] });
      }
      // Draft protocol: the worker already polled its queue via a poll URL and sends the response.
      const tq = req.params.taskQueueId;
      if (xmlMessage !== undefined) return ok({ tasks: await recordClaims(req, tq, worker, await claimFromXml(req.services, tq, worker, xmlMessage)) });
      return ok({ tasks: await claimWork(req.services, tq, worker, tasks, undefined, recorder(req, tq, worker), req.gone) });
    },
  },
  {
    name: 'claimTask',
    title: 'Claim Task',
    description: 'Claim a specific pending run of a task. Prefer claimWork.',
    stability: 'deprecated',
    output: 'task-claim-response',
    service: 'queue',
    method: 'POST',
    route: '/task/<taskId>/runs/<runId>/claim',
    scopes: { AllOf: ['queue:claim-task:<provisionerId>/<workerType>', 'queue:worker-id:<workerGroup>/<workerId>'] },
    input: 'claim-task-request',
    handler: async (req) => {
      const t = await loadTask(req);
      const { workerGroup, workerId } = req.body;
      await req.authorize({ provisionerId: t.definition.provisionerId, workerType: t.definition.workerType, workerGroup, workerId });
      const runId = runIdOf(req);
      if (new Date(t.definition.deadline) <= req.services.now()) throw conflict(`task ${t.taskId} has passed its deadline`);
      if (!t.runs[runId]) throw notFound(`run ${runId} of task ${t.taskId} not found`);
      // A quarantined worker gets `{}`, as Taskcluster answers.
      if (req.services.workers.isQuarantined(await req.services.workers.seen(t.definition.taskQueueId, workerGroup, workerId))) return ok({});
      const outcome = await claimRun(req.services, t.taskId, runId, { workerGroup, workerId }, null, t);
      if (outcome.kind === 'task-not-found') throw notFound(`task ${t.taskId} not found`);
      if (outcome.kind === 'conflict') throw conflict(`cannot claim run ${runId} of task ${t.taskId}: ${outcome.reason}`);
      const [claimed] = await recordClaims(req, t.definition.taskQueueId, { workerGroup, workerId }, [claimResponse(req.services, outcome.task, outcome.run)]);
      return ok(claimed);
    },
  },
  {
    name: 'reclaimTask',
    title: 'Reclaim task',
    description: 'Extend the claim of a running run (takenUntil) and get new temporary credentials; call it before takenUntil passes.',
    stability: 'stable',
    output: 'task-reclaim-response',
    service: 'queue',
    method: 'POST',
    route: '/task/<taskId>/runs/<runId>/reclaim',
    scopes: 'queue:reclaim-task:<taskId>/<runId>',
    handler: async (req) => {
      const { task, run } = await reclaimRun(req.services, req.params.taskId, runIdOf(req));
      await req.services.workers.seen(task.definition.taskQueueId, run.workerGroup!, run.workerId!);
      return ok({
        status: taskStatus(task),
        runId: run.runId,
        workerGroup: run.workerGroup,
        workerId: run.workerId,
        takenUntil: run.takenUntil,
        credentials: runCredentials(
          req.services.clients,
          { taskId: task.taskId, runId: run.runId, workerGroup: run.workerGroup!, workerId: run.workerId!, takenUntil: run.takenUntil! },
          task.definition.scopes,
          req.services.now(),
        ),
      });
    },
  },
  // Legacy: a reportCompleted body of {success: false} means failed.
  report(
    'reportCompleted',
    'completed',
    'Report Run Completed',
    'Report a running run completed successfully; dependents may now be scheduled.',
    (req) => (req.body && req.body.success === false ? { state: 'failed' } : { state: 'completed' }),
    'report-completed-request',
  ),
  report('reportFailed', 'failed', 'Report Run Failed', 'Report a running run failed (the task itself failed, e.g. a non-zero exit).', () => ({
    state: 'failed',
  })),
  report(
    'reportException',
    'exception',
    'Report Task Exception',
    'Report a running run ended by an exception (worker shutdown, malformed payload, …); some reasons retry the task.',
    (req) => ({ state: 'exception', reason: req.body.reason }),
    'task-exception-request',
  ),
  creatorAction('schedule', 'Schedule Defined Task', 'Make an unscheduled task pending now, without waiting for its dependencies.', (req, t) =>
    scheduleTask(req.services, t),
  ),
  creatorAction(
    'rerun',
    'Rerun a Resolved Task',
    `Add a new pending run to a resolved (or unscheduled) task and reset its retries: \`task.retries\` automatic retries again, as far as the limit of ${MAX_RUNS} runs allows.`,
    (req, t) => rerunTask(req.services, t),
  ),
  creatorAction('cancel', 'Cancel Task', 'Resolve an unresolved task as exception/canceled; a running run is canceled too.', (req, t) =>
    cancelTask(req.services, t),
  ),
];
