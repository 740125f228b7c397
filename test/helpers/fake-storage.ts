/**
 * A local HTTP server standing in for pre-signed blob storage: records each PUT's headers and body
 * and answers with scripted statuses.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Put {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export async function fakeStorage(statuses: number[] = []) {
  const puts: Put[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      puts.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(statuses.shift() ?? 201).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, puts, close: () => new Promise<void>((r) => server.close(() => r())) };
}
