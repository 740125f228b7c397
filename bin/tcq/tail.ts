/**
 * `tcq events tail`: queue events matching bindings, one line per event (or JSON lines with
 * --json), until Ctrl-C.
 *
 * Creates a subscription (`tail-<random>`, unless --id names one to reuse), reads its queue
 * through the SAS URLs the API returns, prints and deletes each message, and deletes the
 * subscription on Ctrl-C (unless --keep).
 */
import crypto from 'node:crypto';
import { tailBindings, eventLine } from '../../shared/events/tail';
import { parseQueueMessages } from '../../shared/work/queue-xml';
import type { QueueEvent } from '../../shared/events/exchanges';
import { clientFor } from './services';
import { Settings, UsageError } from './settings';
import { safeLine } from './safe';
import { MAX_AHEAD_DAYS, wholeNumber } from './bounds';
import type { Flags } from './commands';

/** Between empty polls: events show within a second, an idle tail costs one request a second. */
const IDLE_POLL_MS = 1000;
/** Fetch fresh SAS URLs this long before the old ones run out. */
const URL_REFRESH_MARGIN_MS = 5 * 60_000;
/** A tail is interactive; its subscription expires on its own soon after it is abandoned. */
const DEFAULT_EXPIRES_MIN = 60;
/** --expires-min counts minutes, its bound days. */
const MINUTES_PER_DAY = 24 * 60;

export const TAIL_USAGE = `tcq events tail [--exchange task-completed ...] [--task-group ID | --task ID | --task-queue P/W | --route R | --pattern KEY]
               [--json] [--id SUBSCRIPTION] [--keep] [--expires-min N]`;

export async function tail(settings: Settings, flags: Flags, stop: AbortSignal, write: (line: string) => void, note: (line: string) => void): Promise<void> {
  const str = (k: string) => flags[k] as string | undefined;
  let bindings;
  try {
    bindings = tailBindings({
      exchanges: flags.exchange as string[] | undefined,
      taskGroupId: str('task-group'),
      taskId: str('task'),
      taskQueueId: str('task-queue'),
      route: str('route'),
      pattern: str('pattern'),
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\nusage: ${TAIL_USAGE}`);
  }
  const raw = str('expires-min');
  const expiresMin = raw === undefined ? DEFAULT_EXPIRES_MIN : wholeNumber('expires-min', raw, 1, MAX_AHEAD_DAYS * MINUTES_PER_DAY);
  const api = await clientFor('queue', settings);
  const subscriptionId = str('id') ?? `tail-${crypto.randomBytes(6).toString('hex')}`;
  const expires = new Date(Date.now() + expiresMin * 60_000).toJSON();
  let sub = await api.createSubscription(subscriptionId, { bindings, expires });
  note(`[events] subscription ${subscriptionId}: ${bindings.map((b) => `${b.exchange.split('/').pop()} ${b.routingKeyPattern}`).join(', ')}`);
  try {
    while (!stop.aborted) {
      if (new Date(sub.urlsExpire).getTime() - Date.now() < URL_REFRESH_MARGIN_MS) sub = await api.subscription(subscriptionId);
      let res: Response;
      try {
        res = await fetch(`${sub.signedPollUrl}&numofmessages=32`, { signal: stop });
      } catch (err) {
        if (stop.aborted) break;
        throw err;
      }
      if (res.status !== 200) throw new Error(`polling the subscription queue gave ${res.status}: ${await res.text()}`);
      const messages = parseQueueMessages(await res.text());
      for (const m of messages) {
        const e = JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as QueueEvent;
        // One event, one line: a name with a newline in it cannot fake another event.
        write(flags.json ? JSON.stringify(e) : safeLine(eventLine(e, new Date())));
        const del = sub.signedDeleteUrl
          .replace('{{messageId}}', encodeURIComponent(m.messageId))
          .replace('{{popReceipt}}', encodeURIComponent(m.popReceipt ?? ''));
        await (await fetch(del, { method: 'DELETE' })).arrayBuffer();
      }
      if (!messages.length)
        await new Promise<void>((r) => {
          const t = setTimeout(r, IDLE_POLL_MS);
          stop.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
        });
    }
  } finally {
    if (!flags.keep) await api.deleteSubscription(subscriptionId);
    note(`[events] ${flags.keep ? 'kept' : 'deleted'} subscription ${subscriptionId}`);
  }
}
