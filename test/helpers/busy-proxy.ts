/**
 * An HTTP proxy in front of one endpoint of the test Azurite that answers the first `busy`
 * requests it is told to throttle with Azure's 503 ServerBusy, and passes everything else through:
 * what a throttled account does to a call the SDK's retry policy must retry.
 */
import http from 'node:http';
import net from 'node:net';

/** Azure's 503 answer, in the service's own error format. */
export interface BusyAnswer {
  contentType: string;
  body: string;
}

export class BusyProxy {
  /** How many more matching requests get the 503. */
  busy = 0;
  /** Every request, as `METHOD path` without the account (`POST $batch`, `DELETE q/messages/…`). */
  readonly seen: string[] = [];
  /** The connection string with the endpoint pointed at this proxy (after `start`). */
  connectionString = '';
  private server!: http.Server;
  private readonly agent = new http.Agent({ keepAlive: true });

  constructor(
    private readonly endpoint: 'TableEndpoint' | 'QueueEndpoint',
    private readonly throttles: (path: string) => boolean,
    private readonly answer: BusyAnswer,
  ) {}

  async start(connection: string): Promise<void> {
    const m = new RegExp(`${this.endpoint}=http://([^:/]+):(\\d+)`).exec(connection)!;
    const [host, port] = [m[1], Number(m[2])];
    this.server = http.createServer((req, res) => {
      const body: Buffer[] = [];
      req.on('data', (c: Buffer) => body.push(c));
      req.on('end', () => {
        const path = req.url!.split('?')[0];
        this.seen.push(`${req.method} ${path.split('/').slice(2).join('/')}`);
        if (this.busy > 0 && this.throttles(path)) {
          this.busy--;
          res.writeHead(503, { 'x-ms-error-code': 'ServerBusy', 'content-type': this.answer.contentType });
          res.end(this.answer.body);
          return;
        }
        const up = http.request({ host, port, path: req.url, method: req.method, headers: req.headers, agent: this.agent }, (r) => {
          res.writeHead(r.statusCode!, r.headers);
          r.pipe(res);
        });
        up.on('error', () => res.destroy());
        up.end(Buffer.concat(body));
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const own = (this.server.address() as net.AddressInfo).port;
    this.connectionString = connection.replace(m[0], `${this.endpoint}=http://127.0.0.1:${own}`);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    this.agent.destroy();
    await new Promise((r) => this.server.close(r));
  }
}
