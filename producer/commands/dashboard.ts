/**
 * `foxhunt dashboard [--port 8080] [--host 127.0.0.1] [--no-auth] [--metrics-auth]`: bull-board,
 * the fleet/runs/sweeps dashboard, the JSON API and Prometheus /metrics on one server.
 */
import { Queue } from 'bullmq';
import type { Command } from 'commander';
import pino from 'pino';
import { resolveAuth } from '../../src/dashboard/auth.js';
import { buildDashboard } from '../../src/dashboard/server.js';
import { bullConnection, redactUrl, redisUrl, serviceRedis } from '../../src/queue/connection.js';
import { epochsQueueName, sweepsQueueName } from '../../src/queue/names.js';

export function register(program: Command): void {
  program.command('dashboard')
    .description('serve bull-board, the fleet/runs/sweeps dashboard, the JSON API and /metrics')
    .option('--port <port>', 'TCP port', '8080')
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--no-auth', 'turn auth off (only allowed on 127.0.0.1/localhost)')
    .option('--metrics-auth', 'require auth on /metrics too')
    .option('--poll-ms <ms>', 'how often pages refresh their live parts', '2000')
    .action(async (o: { port: string; host: string; auth: boolean; metricsAuth?: boolean; pollMs: string }) => {
      const log = pino({ name: 'foxhunt-dashboard' }, pino.destination(2));
      const port = Number(o.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port ${o.port}: expected 0..65535`);
      const auth = resolveAuth(o.host, !o.auth);
      const url = redisUrl();
      const redis = serviceRedis(url);
      redis.on('error', (err) => log.warn({ err: err.message }, 'redis error'));
      const queues = [epochsQueueName(), sweepsQueueName()].map((name) => new Queue(name, { connection: bullConnection(url) }));
      const app = await buildDashboard({ redis, queues, auth, metricsAuth: o.metricsAuth === true, pollMs: Number(o.pollMs) || 2000 });
      const address = await app.listen({ port, host: o.host });
      log.info({ address, redis: redactUrl(url), auth: auth.enabled, readonlyRole: auth.readonlyToken !== undefined }, 'dashboard listening');
      process.stdout.write(`dashboard on ${address} (auth ${auth.enabled ? 'on' : 'OFF'}); queues at ${address}/queues\n`);
      let closing = false;
      const close = async (): Promise<void> => {
        if (closing) return;
        closing = true;
        const steps = [() => app.close(), ...queues.map((q) => () => q.close()), () => redis.quit()];
        for (const step of steps) {
          try { await step(); } catch (err) { log.warn({ err: (err as Error).message }, 'close step failed'); }
        }
        process.exit(0);
      };
      process.once('SIGTERM', () => void close());
      process.once('SIGINT', () => void close());
    });
}
