/**
 * The claimWork `xmlMessage` reader: Azure's Get Messages format in, InputError for anything else.
 */
import { parseQueueMessages } from '../../shared/work/queue-xml';

const msg = (id: string, text: string, extra = '') => `<QueueMessage><MessageId>${id}</MessageId>${extra}<MessageText>${text}</MessageText></QueueMessage>`;

test('reads messages in order, with entities, pop receipts and dequeue counts', () => {
  const xml =
    '\uFEFF<?xml version="1.0" encoding="utf-8"?><QueueMessagesList>' +
    msg('a&amp;b&#65;', 'MTIz', '<PopReceipt>r+/=</PopReceipt><DequeueCount>3</DequeueCount>') +
    msg('two', '') +
    '</QueueMessagesList>';
  expect(parseQueueMessages(xml)).toEqual([
    { messageId: 'a&bA', popReceipt: 'r+/=', dequeueCount: 3, messageText: 'MTIz' },
    { messageId: 'two', popReceipt: undefined, dequeueCount: 0, messageText: '' },
  ]);
  expect(parseQueueMessages('<QueueMessagesList />')).toEqual([]);
  expect(parseQueueMessages('<QueueMessagesList></QueueMessagesList>')).toEqual([]);
});

test.each([
  ['not XML', 'hello'],
  ['another root', '<Other><QueueMessage/></Other>'],
  ['two roots', '<QueueMessagesList/><QueueMessagesList/>'],
  ['unclosed', '<QueueMessagesList><QueueMessage>'],
  ['a DTD', '<!DOCTYPE x [<!ENTITY e "x">]><QueueMessagesList/>'],
  ['a message without an id', `<QueueMessagesList><QueueMessage><MessageText>x</MessageText></QueueMessage></QueueMessagesList>`],
  ['nested markup as the text', `<QueueMessagesList>${msg('a', '<b>x</b>')}</QueueMessagesList>`],
  ['more than 32 messages', `<QueueMessagesList>${Array.from({ length: 33 }, (_, i) => msg(String(i), 'x')).join('')}</QueueMessagesList>`],
])('%s is an InputError', (_name, xml) => {
  expect(() => parseQueueMessages(xml)).toThrow(expect.objectContaining({ code: 'InputError' }));
});
