/**
 * Reads the body of an Azure Queue "Get Messages" response (`<QueueMessagesList>`), as a worker
 * uploads it in claimWork's `xmlMessage`. The format is flat and fixed, so a tolerant tag reader
 * is enough; anything that is not that format is an InputError.
 */
import { inputError } from '../errors';

export interface XmlQueueMessage {
  messageId: string;
  popReceipt?: string;
  dequeueCount: number;
  messageText: string;
}

/** Azure returns at most 32 messages per Get Messages call. */
export const MAX_XML_MESSAGES = 32;

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

function unescapeXml(s: string): string {
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, e: string) => {
    if (e.startsWith('#x')) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return String.fromCodePoint(parseInt(e.slice(1), 10));
    return ENTITIES[e] ?? whole;
  });
}

function field(block: string, tag: string): string | undefined {
  const m = new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(block);
  if (m) return unescapeXml(m[1].trim());
  return new RegExp(`<${tag}\\s*/>`).test(block) ? '' : undefined;
}

/** The messages of a `<QueueMessagesList>` document, in order. */
export function parseQueueMessages(xml: string): XmlQueueMessage[] {
  const body = xml
    .replace(/^\uFEFF/, '')
    .replace(/<\?xml[\s\S]*?\?>/, '')
    .trim();
  if (!/^<QueueMessagesList\s*\/>$/.test(body) && !/^<QueueMessagesList>[\s\S]*<\/QueueMessagesList>$/.test(body)) {
    throw inputError('xmlMessage must be the body of an Azure Queue Get Messages response (<QueueMessagesList>)');
  }
  const blocks = [...body.matchAll(/<QueueMessage>([\s\S]*?)<\/QueueMessage>/g)].map((m) => m[1]);
  if (blocks.length > MAX_XML_MESSAGES) throw inputError(`xmlMessage holds ${blocks.length} messages; at most ${MAX_XML_MESSAGES} are allowed`);
  return blocks.map((b, i) => {
    const messageId = field(b, 'MessageId');
    const messageText = field(b, 'MessageText');
    if (!messageId || messageText === undefined) throw inputError(`xmlMessage: QueueMessage ${i} lacks MessageId or MessageText`);
    const dequeueCount = Number(field(b, 'DequeueCount') ?? '0');
    return { messageId, popReceipt: field(b, 'PopReceipt') || undefined, dequeueCount: Number.isFinite(dequeueCount) ? dequeueCount : 0, messageText };
  });
}
