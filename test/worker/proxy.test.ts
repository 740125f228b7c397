import { targetUrl, hawkExt } from '../../worker/proxy';

test('proxy paths map onto the root URL; anything else is refused', () => {
  expect(targetUrl('http://q', '/api/queue/v1/task/T/status')).toBe('http://q/api/queue/v1/task/T/status');
  expect(targetUrl('http://q', '/queue/v1/task/T?x=1')).toBe('http://q/api/queue/v1/task/T?x=1');
  expect(targetUrl('http://q', '//evil.example/x')).toBeUndefined();
  expect(targetUrl('http://q', 'http://evil.example/x')).toBeUndefined();
  expect(targetUrl('http://q', '/etc/passwd')).toBeUndefined();
});

test('ext carries the certificate and authorizedScopes = task.scopes', () => {
  const ext = JSON.parse(Buffer.from(hawkExt({ clientId: 'c', accessToken: 'a', certificate: '{"version":1,"scopes":["*"]}' }, ['s:1']), 'base64').toString());
  expect(ext).toEqual({ authorizedScopes: ['s:1'], certificate: { version: 1, scopes: ['*'] } });
  const plain = JSON.parse(Buffer.from(hawkExt({ clientId: 'c', accessToken: 'a' }, []), 'base64').toString());
  expect(plain).toEqual({ authorizedScopes: [] });
});
