/**
 * The Azure Queue Storage side of the pollTaskUrls protocol: the `<QueueMessagesList>` XML a GET
 * on a signed poll URL returns, the base64 JSON `{taskId, runId}` message text, and the delete URL
 * template with `{{messageId}}` and `{{popReceipt}}` placeholders.
 */

export interface QueueMessage {
  messageId: string;
  popReceipt: string;
  dequeueCount: number;
  messageText: string;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function unescapeXml(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g, (_m, e: string) =>
    e[0] === '#' ? String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)) : ENTITIES[e],
  );
}

function tag(xml: string, name: string): string | undefined {
  const m = new RegExp(`<${name}>([\\s\\S]*?)</${name}>`).exec(xml);
  return m ? unescapeXml(m[1]) : undefined;
}

/** Messages in a Get Messages response (an empty list for an empty queue). */
export function parseQueueMessages(xml: string): QueueMessage[] {
  const out: QueueMessage[] = [];
  for (const m of xml.matchAll(/<QueueMessage>([\s\S]*?)<\/QueueMessage>/g)) {
    const body = m[1];
    const messageId = tag(body, 'MessageId');
    const popReceipt = tag(body, 'PopReceipt');
    if (!messageId || !popReceipt) continue;
    out.push({ messageId, popReceipt, dequeueCount: Number(tag(body, 'DequeueCount') ?? 0), messageText: tag(body, 'MessageText') ?? '' });
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
