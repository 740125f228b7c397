/**
 * One hint poller per task queue per instance serves every waiting claimWork request, so many
 * idle workers cost the same storage polls as one. It walks the priorities highest first, backs
 * off on empty polls, and is woken at once when this instance makes a run pending.
 *
 * A priority spread over several shards (shared/tasks/pending.ts) is polled shard by shard and
 * only left for the next lower one once every shard came back empty, so strict priority holds for
 * each claimWork. Each pass starts at the next shard, so busy shards share the load and a pass
 * that is satisfied early touches one queue, not N; an idle pass costs one poll per shard.
 */
import type { Services } from '../services';
import { CountedQueue, QueueMessage, MAX_DEQUEUE, decodeMessage } from '../storage/storage';
import type { Hint, UsedQueue } from '../tasks/pending';
import type { WaitingClaim, WakeHint } from '../tasks/ports';
import type { TaskRecord } from '../tasks/model';

/** First and last sleep after an empty pass; woken early by local activity. */
export const MIN_BACKOFF_MS = 100;
/**
 * A task created on another instance waits for the next poll, half of this on average, plus the
 * create and the claim (~80 ms here): 300 ms keeps that pickup's median near 230 ms (target
 * <= 300 ms; at 500 ms the bench measured 123-371 ms, at 1 s 212-399 ms) for about 3 receives/s
 * per idle pending queue and instance.
 */
export const MAX_BACKOFF_MS = 300;
/**
 * A pass that found the pending queues empty still counts this long for createTask's hand-over:
 * the back-off between passes plus a pass. A run another instance made pending meanwhile may be
 * passed over for that long, as a worker polling then would have missed it too.
 */
const EMPTY_SEEN_MS = 2 * MAX_BACKOFF_MS;
/** Fetch rounds per priority shard per pass, so one busy priority cannot starve the loop forever. */
const ROUNDS_PER_PRIORITY = 10;

export interface LeasedHint {
  hint: Partial<Hint>;
  message: QueueMessage;
  queue: CountedQueue;
}

/** Run 0 of a task created on this instance, claimed for the waiter in the create's own write. */
export interface HandedRun {
  handed: TaskRecord;
}

interface Waiter {
  want: number;
  /** Who waits (absent: no hand-over, e.g. a test's bare poll). */
  worker?: { workerGroup: string; workerId: string };
  resolve: (answer: LeasedHint[] | HandedRun) => void;
  /** Answers [] and leaves. */
  leave: () => void;
  /** (Re)starts the timer of the waiter's window. */
  arm: () => void;
  timer?: NodeJS.Timeout;
  /** Answered (or left): a hand-over given back after that is dropped. */
  done: boolean;
  /** A pass that started after this waiter joined has ended: an empty answer now means nothing was there. */
  looked: boolean;
  /** The window ended before any pass looked: the waiter leaves after the next one. */
  due: boolean;
}

export class HintPoller {
  private waiters: Waiter[] = [];
  private running = false;
  private wakeSleep: (() => void) | undefined;
  /** Where the next pass starts within each priority's shards. */
  private rotation = 0;
  /** The pending queue a local wake named: the next pass starts its priority's shards there. */
  private woken: UsedQueue | undefined;
  /** When a pass last received nothing from any pending queue (0: never, or a local hint since). */
  private emptyAt = 0;
  /** Hints received by the current pass, and local wakes so far (one during a pass: it may have missed that hint). */
  private received = 0;
  private wakes = 0;

  constructor(
    private readonly svc: Services,
    readonly taskQueueId: string,
  ) {}

  /**
   * Resolves with at least one leased hint, or [] once `untilMs` has passed and a pass has looked
   * since the request came (a window shorter than the back-off still gets its look: an empty answer
   * always means the pending queues were empty), or at once when `gone` aborts (the caller hung up).
   */
  request(want: number, untilMs: number, gone?: AbortSignal): Promise<LeasedHint[]>;
  /** With its `worker`, the waiter may also be handed a run createTask claimed for it (`take`). */
  request(want: number, untilMs: number, gone: AbortSignal | undefined, worker: Waiter['worker']): Promise<LeasedHint[] | HandedRun>;
  request(want: number, untilMs: number, gone?: AbortSignal, worker?: Waiter['worker']): Promise<LeasedHint[] | HandedRun> {
    return new Promise((resolve) => {
      if (gone?.aborted) return resolve([]);
      const leave = () => {
        waiter.done = true;
        clearTimeout(waiter.timer);
        gone?.removeEventListener('abort', leave);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve([]);
      };
      const expire = () => {
        if (waiter.looked) return leave();
        waiter.due = true;
        this.wakeSleep?.();
      };
      const waiter: Waiter = {
        want,
        worker,
        resolve: (answer) => {
          waiter.done = true;
          gone?.removeEventListener('abort', leave);
          resolve(answer);
        },
        leave,
        arm: () => {
          waiter.timer = setTimeout(expire, Math.max(0, untilMs - Date.now()));
        },
        done: false,
        looked: false,
        due: false,
      };
      waiter.arm();
      gone?.addEventListener('abort', leave, { once: true });
      this.waiters.push(waiter);
      // A new waiter joins the running loop's schedule: waking it here would make idle cost grow
      // with the rate at which workers arrive instead of staying flat.
      if (!this.running) void this.loop();
    });
  }

  /** `at`: the queue the new hint went to, so a task made pending here is found without empty receives of other shards. */
  wake(at?: UsedQueue): void {
    if (at) this.woken = at;
    this.emptyAt = 0;
    this.wakes++;
    this.wakeSleep?.();
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /**
   * createTask's hand-over: the waiter that came first (with a worker) leaves the line for a task
   * being created here; the create claims run 0 for it in its own write, so that run needs no hint
   * (a put, a receive and a delete saved). Given back, it rejoins the line at its head. Only while
   * a pass has seen the pending queues empty (within EMPTY_SEEN_MS) and no hint was put here since:
   * a run already pending (of any priority) goes first, as a poll would hand it out.
   */
  take(): WaitingClaim | undefined {
    const w = this.handOverTo();
    if (!w) return undefined;
    this.waiters = this.waiters.filter((x) => x !== w);
    clearTimeout(w.timer);
    return {
      worker: w.worker!,
      claimed: (task) => w.resolve({ handed: task }),
      giveBack: () => {
        if (w.done) return;
        this.waiters.unshift(w);
        w.arm();
        if (!this.running) void this.loop();
      },
    };
  }

  /** Whether a task created now would be handed over (`take`). */
  get handsOver(): boolean {
    return this.handOverTo() !== undefined;
  }

  private handOverTo(): Waiter | undefined {
    return Date.now() - this.emptyAt <= EMPTY_SEEN_MS ? this.waiters.find((x) => x.worker) : undefined;
  }

  /** Answers every waiting claimWork with no tasks; the loop ends with its current pass. */
  stop(): void {
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.resolve([]);
    }
    this.wake();
  }

  private async loop(): Promise<void> {
    this.running = true;
    let backoff = MIN_BACKOFF_MS;
    try {
      while (this.waiters.length) {
        const lookedFor = [...this.waiters];
        let got = 0;
        this.received = 0;
        const wakes = this.wakes;
        try {
          got = await this.pass();
          // Seen empty: from now until the back-off's end, or a local hint, a new run may go straight to a waiter.
          if (this.received === 0 && this.wakes === wakes) this.emptyAt = Date.now();
        } catch (err) {
          this.svc.log.error('hint-poller-failed', { taskQueueId: this.taskQueueId, error: String((err as Error)?.message ?? err) });
        }
        for (const w of lookedFor) {
          w.looked = true;
          if (w.due && this.waiters.includes(w)) w.leave();
        }
        if (got > 0) {
          backoff = MIN_BACKOFF_MS;
          continue;
        }
        if (!this.waiters.length) break;
        // A waiter whose window ended before any pass looked gets its look now, not after the back-off.
        if (this.waiters.some((w) => w.due)) continue;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, backoff);
          this.wakeSleep = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.wakeSleep = undefined;
        backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
      }
    } finally {
      this.running = false;
    }
  }

  /** One walk over the priorities (each over all its shards); returns how many hints were handed out. */
  private async pass(): Promise<number> {
    let handed = 0;
    const used = await this.svc.pending.usedQueues(this.taskQueueId);
    const rotation = this.rotation++;
    const woken = this.woken;
    this.woken = undefined;
    for (let i = 0; i < used.length && this.waiters.length;) {
      // The shards of one priority are consecutive in `used`.
      let j = i;
      while (j < used.length && used[j].priority === used[i].priority) j++;
      const block = used.slice(i, j);
      const queues = block.map((u) => this.svc.pending.queue(this.taskQueueId, u.priority, u.shard));
      i = j;
      // From the woken shard, else a rotating start, so busy shards share the load and the first shard does not always go first.
      const at = woken ? block.findIndex((u) => u.priority === woken.priority && u.shard === woken.shard) : -1;
      const start = at >= 0 ? at : rotation;
      handed += await this.drain(queues.map((_, k) => queues[(start + k) % queues.length]));
    }
    return handed;
  }

  /**
   * Up to ROUNDS_PER_PRIORITY rounds over one priority's shards while waiters remain. A round
   * receives shard by shard until it holds what the waiters want, so a batch claimWork gets hints
   * from several shards and a busy shard answers it alone. Returns how many hints were handed out.
   */
  private async drain(shards: CountedQueue[]): Promise<number> {
    let handed = 0;
    let live = shards;
    for (let round = 0; round < ROUNDS_PER_PRIORITY && this.waiters.length && live.length; round++) {
      const want = this.waiters.reduce((n, w) => n + w.want, 0);
      const leased: LeasedHint[] = [];
      const stillFull: CountedQueue[] = [];
      for (const queue of live) {
        const need = Math.min(want - leased.length, MAX_DEQUEUE);
        if (need <= 0) {
          stillFull.push(queue);
          continue;
        }
        const msgs = await queue.receive(need, this.svc.tuning.hintLeaseS);
        this.received += msgs.length;
        // A short page: the shard is empty for now; a full one may hold more for the next round.
        if (msgs.length === need) stillFull.push(queue);
        leased.push(...msgs.map((message) => ({ hint: decodeMessage<Hint>(message) ?? ({} as Partial<Hint>), message, queue })));
      }
      live = stillFull;
      if (!leased.length) break;
      for (const l of leased) {
        if (l.message.dequeueCount > 10) {
          this.svc.log.warn('hint-dequeued-many-times', {
            taskQueueId: this.taskQueueId,
            dequeueCount: l.message.dequeueCount,
            taskId: l.hint.taskId,
            runId: l.hint.runId,
          });
        }
      }
      while (leased.length && this.waiters.length) {
        const w = this.waiters.shift()!;
        clearTimeout(w.timer);
        const share = leased.splice(0, w.want);
        handed += share.length;
        w.resolve(share);
      }
      // Nobody is left to take these: make them visible again at once.
      await Promise.all(leased.map((l) => l.queue.release(l.message.messageId, l.message.popReceipt, 0)));
    }
    return handed;
  }
}

/** The pollers of one services instance, woken by local createTask / rerun / retries (`Services.wake`). */
export class Pollers {
  private readonly pollers = new Map<string, HintPoller>();

  constructor(private readonly svc: Services) {}

  /** A run of `taskQueueId` became pending here: its poller (if one runs) looks again, first where `hinted`'s hint went. */
  wake(taskQueueId: string, hinted?: WakeHint): void {
    this.pollers.get(taskQueueId)?.wake(hinted && { priority: hinted.priority, shard: this.svc.pending.shardOf(taskQueueId, hinted.taskId) });
  }

  /** Stops every poller (the app is shutting down). */
  stop(): void {
    this.pollers.forEach((p) => p.stop());
  }

  /** A waiting claimWork of this instance on `taskQueueId`, for createTask's hand-over (HintPoller.take). */
  take(taskQueueId: string): WaitingClaim | undefined {
    return this.pollers.get(taskQueueId)?.take();
  }

  get(taskQueueId: string): HintPoller {
    let p = this.pollers.get(taskQueueId);
    if (!p) {
      p = new HintPoller(this.svc, taskQueueId);
      this.pollers.set(taskQueueId, p);
    }
    return p;
  }
}
