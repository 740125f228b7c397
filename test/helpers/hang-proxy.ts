/**
 * A TCP proxy in front of the test Azurite that can stop answering: while it hangs it accepts
 * connections and reads nothing, and open connections stop forwarding, as a storage account
 * does when it stalls. `resume()` drops the stalled connections and forwards again.
 */
import net from 'node:net';

type Service = 'Blob' | 'Queue' | 'Table';
const SERVICES: Service[] = ['Blob', 'Queue', 'Table'];

export class HangProxy {
  private hanging = false;
  private readonly servers: net.Server[] = [];
  private readonly stalled = new Set<net.Socket>();
  private readonly live = new Set<{ client: net.Socket; upstream: net.Socket; frozen: boolean }>();
  /** The connection string with every endpoint pointed at the proxy. */
  connectionString = '';

  static async start(connectionString: string): Promise<HangProxy> {
    const p = new HangProxy();
    let cs = connectionString;
    for (const svc of SERVICES) {
      const m = new RegExp(`${svc}Endpoint=http://([^:/]+):(\\d+)`).exec(cs);
      if (!m) throw new Error(`no ${svc}Endpoint in the test connection string`);
      const port = await p.listen(m[1], Number(m[2]));
      cs = cs.replace(m[0], `${svc}Endpoint=http://127.0.0.1:${port}`);
    }
    p.connectionString = cs;
    return p;
  }

  private listen(host: string, targetPort: number): Promise<number> {
    const server = net.createServer((client) => {
      client.on('error', () => undefined);
      if (this.hanging) {
        this.stalled.add(client);
        return;
      }
      const upstream = net.connect(targetPort, host);
      upstream.on('error', () => client.destroy());
      const pair = { client, upstream, frozen: false };
      this.live.add(pair);
      const forward = (from: net.Socket, to: net.Socket) => from.on('data', (chunk) => !pair.frozen && to.write(chunk));
      forward(client, upstream);
      forward(upstream, client);
      const end = () => {
        this.live.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', end);
      upstream.on('close', end);
    });
    this.servers.push(server);
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
  }

  /** Stop answering: new connections are accepted and ignored, open ones stop forwarding. */
  hang(): void {
    this.hanging = true;
    for (const pair of this.live) pair.frozen = true;
  }

  /** Answer again: stalled connections are dropped (clients reconnect), new ones are forwarded. */
  resume(): void {
    this.hanging = false;
    for (const s of this.stalled) s.destroy();
    this.stalled.clear();
    for (const pair of [...this.live]) {
      if (!pair.frozen) continue;
      pair.client.destroy();
      pair.upstream.destroy();
    }
  }

  async close(): Promise<void> {
    this.resume();
    for (const pair of this.live) pair.client.destroy();
    await Promise.all(this.servers.map((s) => new Promise((r) => s.close(r))));
  }
}
