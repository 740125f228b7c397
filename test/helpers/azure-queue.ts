/**
 * The worker side of the poll-URL protocol (seed 000), written the way an old worker does it:
 * raw HTTP against the signed URLs, reading the Azure Get Messages XML with an XML parser.
 */
import { XMLParser } from 'fast-xml-parser';

export interface PolledMessage {
  messageId: string;
  popReceipt: string;
  dequeueCount: number;
  messageText: string;
  /** MessageText base64-decoded and JSON-parsed. */
  body: { taskId: string; runId: number; hintId?: string; sig?: string };
}

export interface PollUrls {
  queues: { signedPollUrl: string; signedDeleteUrl: string }[];
  expires: string;
}

const parser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, htmlEntities: true, isArray: (name) => name === 'QueueMessage' });

/** The messages of a `<QueueMessagesList>` body. */
export function parseMessages(xml: string): PolledMessage[] {
  const doc = parser.parse(xml) as { QueueMessagesList?: { QueueMessage?: Record<string, string>[] } | string };
  if (doc.QueueMessagesList === undefined) throw new Error(`not a QueueMessagesList: ${xml.slice(0, 200)}`);
  const list = doc.QueueMessagesList;
  return (typeof list === 'object' ? (list.QueueMessage ?? []) : []).map((m) => ({
    messageId: m.MessageId,
    popReceipt: m.PopReceipt,
    dequeueCount: Number(m.DequeueCount),
    messageText: m.MessageText,
    body: JSON.parse(Buffer.from(m.MessageText, 'base64').toString('utf8')),
  }));
}

/** GET one poll URL; returns the raw body and the parsed messages. */
export async function poll(url: string, numofmessages?: number): Promise<{ status: number; xml: string; messages: PolledMessage[] }> {
  const res = await fetch(numofmessages ? `${url}&numofmessages=${numofmessages}` : url);
  const xml = await res.text();
  return { status: res.status, xml, messages: res.status === 200 ? parseMessages(xml) : [] };
}

/** Walks the queues in the given order and returns the first non-empty poll (seed 000). */
export async function pollInOrder(urls: PollUrls, numofmessages?: number): Promise<{ index: number; xml: string; messages: PolledMessage[] } | undefined> {
  for (let index = 0; index < urls.queues.length; index++) {
    const r = await poll(urls.queues[index].signedPollUrl, numofmessages);
    if (r.status !== 200) throw new Error(`poll of queue ${index} gave ${r.status}: ${r.xml}`);
    if (r.messages.length) return { index, ...r };
  }
  return undefined;
}

/** DELETE a message through the signed delete URL, URI-encoding both placeholders. */
export async function deleteMessage(deleteUrl: string, m: { messageId: string; popReceipt: string }): Promise<number> {
  const url = deleteUrl.replace('{{messageId}}', encodeURIComponent(m.messageId)).replace('{{popReceipt}}', encodeURIComponent(m.popReceipt));
  const res = await fetch(url, { method: 'DELETE' });
  await res.arrayBuffer();
  return res.status;
}
