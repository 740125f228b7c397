/**
 * Reads the body of an Azure Queue "Get Messages" response (`<QueueMessagesList>`), as a worker
 * uploads it in claimWork's `xmlMessage`, with an XML parser; anything that is not well-formed XML
 * of that format is an InputError.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { inputError } from '../errors';

export interface XmlQueueMessage {
  messageId: string;
  popReceipt?: string;
  dequeueCount: number;
  messageText: string;
}

/** Azure returns at most 32 messages per Get Messages call. */
export const MAX_XML_MESSAGES = 32;

const parser = new XMLParser({
  ignoreAttributes: true,
  // Message texts and ids are strings, never numbers or booleans.
  parseTagValue: false,
  // Numeric character references (&#10;) as well as the five XML entities.
  htmlEntities: true,
  isArray: (name) => name === 'QueueMessage',
});

function text(v: unknown): string | undefined {
  if (typeof v === 'string') return v.trim();
  return undefined;
}

/** The messages of a `<QueueMessagesList>` document, in order. */
export function parseQueueMessages(xml: string): XmlQueueMessage[] {
  const body = xml.replace(/^\uFEFF/, '').trim();
  const notList = () => inputError('xmlMessage must be the body of an Azure Queue Get Messages response (<QueueMessagesList>)');
  // Azure never sends a DTD; refusing one keeps entity expansion out of the parser.
  if (/<!DOCTYPE|<!ENTITY/i.test(body) || XMLValidator.validate(body) !== true) throw notList();
  const doc = parser.parse(body) as Record<string, unknown>;
  const roots = Object.keys(doc).filter((k) => k !== '?xml');
  if (roots.length !== 1 || roots[0] !== 'QueueMessagesList') throw notList();
  const list = doc.QueueMessagesList;
  if (list !== '' && (typeof list !== 'object' || list === null || Array.isArray(list))) throw notList();
  const items = list === '' ? [] : ((list as { QueueMessage?: unknown[] }).QueueMessage ?? []);
  if (items.length > MAX_XML_MESSAGES) throw inputError(`xmlMessage holds ${items.length} messages; at most ${MAX_XML_MESSAGES} are allowed`);
  return items.map((item, i) => {
    const m = (typeof item === 'object' && item !== null ? item : {}) as Record<string, unknown>;
    const messageId = text(m.MessageId);
    const messageText = text(m.MessageText);
    if (!messageId || messageText === undefined) throw inputError(`xmlMessage: QueueMessage ${i} lacks MessageId or MessageText`);
    const dequeueCount = Number(text(m.DequeueCount) ?? '0');
    return { messageId, popReceipt: text(m.PopReceipt) || undefined, dequeueCount: Number.isFinite(dequeueCount) ? dequeueCount : 0, messageText };
  });
}
