import { parseQueueMessages, decodeTaskMessage, deleteUrlFor, pollUrlFor } from '../../worker/protocols/azure-queue';

const text = Buffer.from(JSON.stringify({ taskId: 'abc', runId: 2, hintId: 'h', sig: 's' })).toString('base64');
const xml = `<?xml version="1.0" encoding="utf-8"?><QueueMessagesList>
  <QueueMessage><MessageId>id-1</MessageId><InsertionTime>x</InsertionTime><PopReceipt>AgAAAA+/ab==&amp;x</PopReceipt><TimeNextVisible>y</TimeNextVisible><DequeueCount>12</DequeueCount><MessageText>${text}</MessageText></QueueMessage>
  <QueueMessage><MessageId>id-2</MessageId><PopReceipt>pr2</PopReceipt><DequeueCount>1</DequeueCount><MessageText>bm90IGpzb24=</MessageText></QueueMessage>
</QueueMessagesList>`;

test('messages are read from the Get Messages XML', () => {
  expect(parseQueueMessages(xml)).toEqual([
    { messageId: 'id-1', popReceipt: 'AgAAAA+/ab==&x', dequeueCount: 12, messageText: text },
    { messageId: 'id-2', popReceipt: 'pr2', dequeueCount: 1, messageText: 'bm90IGpzb24=' },
  ]);
  expect(parseQueueMessages('<?xml version="1.0"?><QueueMessagesList />')).toEqual([]);
});

test('message text is base64 JSON {taskId, runId}', () => {
  expect(decodeTaskMessage(text)).toEqual({ taskId: 'abc', runId: 2 });
  expect(decodeTaskMessage('bm90IGpzb24=')).toBeUndefined();
  expect(decodeTaskMessage(Buffer.from('{"taskId":"a","runId":-1}').toString('base64'))).toBeUndefined();
});

test('the pop receipt is URI-encoded into the delete URL', () => {
  expect(deleteUrlFor('https://a/q/messages/{{messageId}}?popreceipt={{popReceipt}}&sig=x', 'id-1', 'AgAAAA+/ab==&x')).toBe(
    'https://a/q/messages/id-1?popreceipt=AgAAAA%2B%2Fab%3D%3D%26x&sig=x',
  );
  expect(pollUrlFor('https://a/q/messages?sv=1', 50)).toBe('https://a/q/messages?sv=1&numofmessages=32');
  expect(pollUrlFor('https://a/q/messages?sv=1', 3)).toBe('https://a/q/messages?sv=1&numofmessages=3');
});
