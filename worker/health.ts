/**
 * The health server (DESIGN §8): GET /healthz → 200 while the process lives; GET /readyz → 200
 * only when Redis answers and the GPU is not quarantined (503 with the reason otherwise).
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Readiness {
  ready(): Promise<{ ok: boolean; reason: string }>;
}

export async function startHealthServer(port: number, host: string, r: Readiness): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405).end();
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      r.ready().then(({ ok, reason }) => {
        res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(`${reason}\n`);
      }, (err: unknown) => {
        res.writeHead(503, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`);
      });
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return { server, port: (server.address() as AddressInfo).port };
}
