/**
 * The worker side of the poll-URL protocol (seed 000), written the way an old worker does it:
 * raw HTTP against the signed URLs and a tiny reader for the Azure Get Messages XML.
 */

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

function tag(block: string, name: string): string {
  const m = new RegExp(`<${name}>([\\s\\S]*?)</${name}>`).exec(block);
  return (m?.[1] ?? '')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** The messages of a `<QueueMessagesList>` body. */
export function parseMessages(xml: string): PolledMessage[] {
  if (!xml.includes('<QueueMessagesList')) throw new Error(`not a QueueMessagesList: ${xml.slice(0, 200)}`);
  return [...xml.matchAll(/<QueueMessage>([\s\S]*?)<\/QueueMessage>/g)].map(([, b]) => {
    const messageText = tag(b, 'MessageText');
    return {
      messageId: tag(b, 'MessageId'),
      popReceipt: tag(b, 'PopReceipt'),
      dequeueCount: Number(tag(b, 'DequeueCount')),
      messageText,
      body: JSON.parse(Buffer.from(messageText, 'base64').toString('utf8')),
    };
  });
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
