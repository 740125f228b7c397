/**
 * The Azure Queue Storage side of the pollTaskUrls protocol: the `<QueueMessagesList>` XML a GET
 * on a signed poll URL returns, the base64 JSON `{taskId, runId}` message text, and the delete URL
 * template with `{{messageId}}` and `{{popReceipt}}` placeholders.
 */
import { XMLParser } from 'fast-xml-parser';

export interface QueueMessage {
  messageId: string;
  popReceipt: string;
  dequeueCount: number;
  messageText: string;
}

const parser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, htmlEntities: true, isArray: (name) => name === 'QueueMessage' });

const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Messages in a Get Messages response (an empty list for an empty queue). */
export function parseQueueMessages(xml: string): QueueMessage[] {
  const doc = parser.parse(xml) as { QueueMessagesList?: { QueueMessage?: unknown[] } | string };
  const list = doc.QueueMessagesList;
  const out: QueueMessage[] = [];
  for (const item of typeof list === 'object' && list ? (list.QueueMessage ?? []) : []) {
    const m = (typeof item === 'object' && item !== null ? item : {}) as Record<string, unknown>;
    const messageId = text(m.MessageId);
    const popReceipt = text(m.PopReceipt);
    if (!messageId || !popReceipt) continue;
    out.push({ messageId, popReceipt, dequeueCount: Number(text(m.DequeueCount) ?? 0), messageText: text(m.MessageText) ?? '' });
  }
  return out;
}

/** `{taskId, runId}` from a message, or undefined when the text is not what the queue writes. */
export function decodeTaskMessage(text: string): { taskId: string; runId: number } | undefined {
  try {
    const obj = JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
    if (typeof obj?.taskId === 'string' && Number.isInteger(obj?.runId) && obj.runId >= 0) return { taskId: obj.taskId, runId: obj.runId };
  } catch {
    // fall through
  }
  return undefined;
}

/** The delete URL for one message; the pop receipt MUST be URI-encoded or deletes fail intermittently. */
export function deleteUrlFor(template: string, messageId: string, popReceipt: string): string {
  return template.split('{{messageId}}').join(encodeURIComponent(messageId)).split('{{popReceipt}}').join(encodeURIComponent(popReceipt));
}

/** Appends `numofmessages` (1..32) to a signed poll URL. */
export function pollUrlFor(signedPollUrl: string, count: number): string {
  const n = Math.max(1, Math.min(32, Math.floor(count)));
  return signedPollUrl + (signedPollUrl.includes('?') ? '&' : '?') + `numofmessages=${n}`;
}
