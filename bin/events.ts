/**
 * `npm run events -- [options]`: tails queue events matching bindings, one line per event.
 *
 * Creates a subscription (`tail-<random>`, unless --id names one to reuse), reads its queue
 * through the SAS URLs the API returns, prints and deletes each message, and deletes the
 * subscription on Ctrl-C (unless --keep). Credentials and root URL come from the usual
 * TASKCLUSTER_ROOT_URL, TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN.
 *
 *   --exchange task-completed   (repeatable; default: every exchange)
 *   --task-group <id> | --task <id> | --task-queue <prov/type> | --route <route> | --pattern <key pattern>
 *   --json                      print each event as one JSON line instead
 *   --id <subscriptionId>  --keep  --expires-min <n>
 */
import crypto from 'node:crypto';
import { parseArgs } from 'node:util';
import { tailBindings, eventLine } from '../shared/events/tail';
import { eventsApiReference } from '../shared/api/routes/events';
import { parseQueueMessages } from '../shared/work/queue-xml';
import type { QueueEvent } from '../shared/events/exchanges';

/** Between empty polls: events show within a second, an idle tail costs one request a second. */
const IDLE_POLL_MS = 1000;
/** Fetch fresh SAS URLs this long before the old ones run out. */
const URL_REFRESH_MARGIN_MS = 5 * 60_000;
/** A tail is interactive; its subscription expires on its own soon after it is abandoned. */
const DEFAULT_EXPIRES_MIN = 60;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      exchange: { type: 'string', multiple: true },
      'task-group': { type: 'string' },
      task: { type: 'string' },
      'task-queue': { type: 'string' },
      route: { type: 'string' },
      pattern: { type: 'string' },
      json: { type: 'boolean' },
      id: { type: 'string' },
      keep: { type: 'boolean' },
      'expires-min': { type: 'string' },
    },
  });
  const rootUrl = process.env.TASKCLUSTER_ROOT_URL;
  if (!rootUrl) throw new Error('set TASKCLUSTER_ROOT_URL (and TASKCLUSTER_CLIENT_ID / TASKCLUSTER_ACCESS_TOKEN)');
  const credentials = process.env.TASKCLUSTER_CLIENT_ID
    ? { clientId: process.env.TASKCLUSTER_CLIENT_ID, accessToken: process.env.TASKCLUSTER_ACCESS_TOKEN ?? '' }
    : undefined;
  const bindings = tailBindings({
    exchanges: values.exchange,
    taskGroupId: values['task-group'],
    taskId: values.task,
    taskQueueId: values['task-queue'],
    route: values.route,
    pattern: values.pattern,
  });
  const tc = (await import('taskcluster-client')).default;
  const Subscriptions = tc.createClient(eventsApiReference());
  const api = new Subscriptions({ rootUrl, credentials });
  const subscriptionId = values.id ?? `tail-${crypto.randomBytes(6).toString('hex')}`;
  const expires = new Date(Date.now() + Number(values['expires-min'] ?? DEFAULT_EXPIRES_MIN) * 60_000).toJSON();
  let sub = await api.createSubscription(subscriptionId, { bindings, expires });
  console.error(`[events] subscription ${subscriptionId}: ${bindings.map((b) => `${b.exchange.split('/').pop()} ${b.routingKeyPattern}`).join(', ')}`);

  let stopping = false;
  process.on('SIGINT', () => {
    stopping = true;
  });
  while (!stopping) {
    if (new Date(sub.urlsExpire).getTime() - Date.now() < URL_REFRESH_MARGIN_MS) sub = await api.subscription(subscriptionId);
    const res = await fetch(`${sub.signedPollUrl}&numofmessages=32`);
    if (res.status !== 200) throw new Error(`polling the subscription queue gave ${res.status}: ${await res.text()}`);
    const messages = parseQueueMessages(await res.text());
    for (const m of messages) {
      const e = JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as QueueEvent;
      console.log(values.json ? JSON.stringify(e) : eventLine(e, new Date()));
      const del = sub.signedDeleteUrl
        .replace('{{messageId}}', encodeURIComponent(m.messageId))
        .replace('{{popReceipt}}', encodeURIComponent(m.popReceipt ?? ''));
      await (await fetch(del, { method: 'DELETE' })).arrayBuffer();
    }
    if (!messages.length) await new Promise((r) => setTimeout(r, IDLE_POLL_MS));
  }
  if (!values.keep) await api.deleteSubscription(subscriptionId);
  console.error(`[events] ${values.keep ? 'kept' : 'deleted'} subscription ${subscriptionId}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err?.message ?? err);
    process.exit(1);
  },
);
