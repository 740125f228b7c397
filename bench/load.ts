/**
 * The load generator in a process of its own: the bench process then holds the service alone, so
 * its `process.cpuUsage` is the service's CPU, and the clients' (Hawk signing, JSON, sockets) is
 * read apart from /proc. Forked from the bench; one job at a time over the IPC channel.
 */
import { fork, ChildProcess } from 'node:child_process';
import { LoadJob, LoadResult, runJob } from './client';

export interface LoadProcess {
  pid: number;
  run(job: LoadJob): Promise<LoadResult>;
  stop(): Promise<void>;
}

type Reply = { ok: true; result: LoadResult } | { ok: false; error: string };

export async function startLoad(): Promise<LoadProcess> {
  // No --cpu-prof or --inspect inherited: a profile of the bench is the service's alone.
  const child: ChildProcess = fork(__filename, [], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  let queue: Promise<unknown> = Promise.resolve();
  const once = (job: LoadJob) =>
    new Promise<LoadResult>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`load process exited (${code}) during a ${job.kind} job`));
      child.once('exit', onExit);
      child.once('message', (m: Reply) => {
        child.off('exit', onExit);
        if (m.ok) resolve(m.result);
        else reject(new Error(m.error));
      });
      child.send(job);
    });
  return {
    pid: child.pid!,
    run(job) {
      const p = queue.then(() => once(job));
      queue = p.catch(() => undefined);
      return p;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.disconnect();
      await exited;
    },
  };
}

if (require.main === module) {
  process.on('message', (job: LoadJob) => {
    runJob(job).then(
      (result) => process.send!({ ok: true, result } satisfies Reply),
      (err) => process.send!({ ok: false, error: String((err as Error)?.stack ?? err) } satisfies Reply),
    );
  });
  // The bench disconnects when done; client sockets would otherwise keep this process alive.
  process.on('disconnect', () => process.exit(0));
}
