/**
 * The dashboard server (fastify): bull-board for the queues (read-only board at /queues for
 * every role, full board at /admin/queues for the admin role only), the fleet/runs/sweeps pages,
 * the JSON API behind them, and Prometheus /metrics.
 *
 *   public:      GET /healthz, GET /static/*, GET /metrics (unless metricsAuth)
 *   any role:    GET / (fleet), /runs, /runs/:id, /sweeps, /sweeps/:id (?fragment=1: live part),
 *                GET /api/fleet, /api/runs, /api/runs/:id?after=N, /api/sweeps, /api/sweeps/:id,
 *                /queues/* (bull-board, read-only mode)
 *   admin only:  /admin/* (bull-board with retry/remove/...)
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { Queue } from 'bullmq';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { Keys } from '../redis/keys.js';
import { authHook } from './auth.js';
import type { AuthOptions, Role } from './auth.js';
import { DashboardData } from './data.js';
import { FleetMetrics } from './metrics.js';
import { fleetFragment, page, runBody, runFragment, runsFragment, sweepBody, sweepFragment, sweepsFragment } from './pages.js';
import type { QueueCounts } from './pages.js';

export interface DashboardOptions {
  redis: Redis;
  /** The epochs and sweeps queues (bull-board and /metrics). */
  queues: readonly Queue[];
  auth: AuthOptions;
  keys?: Keys;
  /** Require auth on /metrics too (off by default: Prometheus scrapes it). */
  metricsAuth?: boolean;
  pollMs?: number;
  logger?: boolean;
}

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const UPLOT_DIR = dirname(require.resolve('uplot/dist/uPlot.iife.min.js'));

const STATIC: Record<string, { file: string; type: string }> = {
  'app.js': { file: join(here, 'static', 'app.js'), type: 'text/javascript; charset=utf-8' },
  'style.css': { file: join(here, 'static', 'style.css'), type: 'text/css; charset=utf-8' },
  'uplot/uPlot.iife.min.js': { file: join(UPLOT_DIR, 'uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  'uplot/uPlot.min.css': { file: join(UPLOT_DIR, 'uPlot.min.css'), type: 'text/css; charset=utf-8' },
};

function mountBoard(app: FastifyInstance, queues: readonly Queue[], basePath: string, readOnlyMode: boolean): void {
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(basePath);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode, allowRetries: !readOnlyMode })),
    // @bull-board/fastify ships its own copy of @bull-board/api's types: same shape, other declarations
    serverAdapter: serverAdapter as unknown as Parameters<typeof createBullBoard>[0]['serverAdapter'],
    options: { uiConfig: { boardTitle: readOnlyMode ? 'foxhunt (read-only)' : 'foxhunt (admin)' } },
  });
  void app.register(serverAdapter.registerPlugin(), { prefix: basePath });
}

export async function buildDashboard(opts: DashboardOptions): Promise<FastifyInstance> {
  const keys = opts.keys ?? new Keys();
  const data = new DashboardData(opts.redis, keys);
  const metrics = new FleetMetrics(data, opts.queues);
  const pollMs = opts.pollMs ?? 2000;
  const app = Fastify({ logger: opts.logger ?? false });

  const publicPath = (p: string): boolean => p === '/healthz' || p.startsWith('/static/') || (p === '/metrics' && opts.metricsAuth !== true);
  const adminOnly = (p: string): boolean => p === '/admin' || p.startsWith('/admin/');
  app.addHook('onRequest', authHook(opts.auth, { publicPaths: publicPath, adminOnly }));

  app.get('/healthz', async () => ({ ok: true }));
  app.get('/metrics', async (_req, reply) => {
    const text = await metrics.text();
    return reply.type(metrics.registry.contentType).send(text);
  });
  app.get('/static/*', async (req, reply) => {
    const name = (req.params as { '*': string })['*'];
    const s = STATIC[name];
    if (s === undefined) return reply.code(404).send({ error: 'not found' });
    return reply.type(s.type).header('cache-control', 'no-cache').send(await readFile(s.file));
  });

  mountBoard(app, opts.queues, '/queues', true);
  mountBoard(app, opts.queues, '/admin/queues', false);

  const queueCounts = async (): Promise<QueueCounts[]> =>
    Promise.all(opts.queues.map(async (q) => ({ name: q.name, counts: await q.getJobCounts() })));
  const role = (req: FastifyRequest): Role => req.role ?? 'viewer';
  const fragment = (req: FastifyRequest): boolean => (req.query as Record<string, string | undefined>)['fragment'] === '1';
  const html = (reply: FastifyReply, body: string): FastifyReply => reply.type('text/html; charset=utf-8').send(body);
  const notFound = (reply: FastifyReply, what: string): FastifyReply => reply.code(404).send({ error: 'not found', message: `no ${what}` });

  // ---- JSON API ----
  app.get('/api/fleet', async () => ({ workers: await data.workers(), queues: await queueCounts() }));
  app.get('/api/runs', async () => ({ runs: await data.runList() }));
  app.get('/api/runs/:id', async (req, reply) => {
    const { id } = req.params as { id: string };
    const after = Number((req.query as Record<string, string | undefined>)['after'] ?? 0);
    const r = await data.run(id, Number.isFinite(after) && after > 0 ? Math.floor(after) : 0);
    return r === null ? notFound(reply, `run ${id}`) : r;
  });
  app.get('/api/sweeps', async () => ({ sweeps: await data.sweepList() }));
  app.get('/api/sweeps/:id', async (req, reply) => {
    const { id } = req.params as { id: string };
    const v = await data.sweep(id);
    return v === null ? notFound(reply, `sweep ${id}`) : v;
  });

  // ---- pages ----
  app.get('/', async (req, reply) => {
    const live = fleetFragment(await data.workers(), await queueCounts());
    if (fragment(req)) return html(reply, live);
    return html(reply, page({ title: 'Fleet', role: role(req), active: 'fleet', pollMs, body: `<h1>Fleet</h1><div id="live">${live}</div>` }));
  });
  app.get('/runs', async (req, reply) => {
    const live = runsFragment(await data.runList());
    if (fragment(req)) return html(reply, live);
    return html(reply, page({ title: 'Runs', role: role(req), active: 'runs', pollMs, body: `<h1>Runs</h1><div id="live">${live}</div>` }));
  });
  app.get('/runs/:id', async (req, reply) => {
    const { id } = req.params as { id: string };
    const run = await data.runs.get(id);
    if (run === null) return notFound(reply, `run ${id}`);
    if (fragment(req)) return html(reply, runFragment(run));
    return html(reply, page({ title: `Run ${id}`, role: role(req), active: 'runs', pollMs, body: runBody(run) }));
  });
  app.get('/sweeps', async (req, reply) => {
    const live = sweepsFragment(await data.sweepList());
    if (fragment(req)) return html(reply, live);
    return html(reply, page({ title: 'Sweeps', role: role(req), active: 'sweeps', pollMs, body: `<h1>Sweeps</h1><div id="live">${live}</div>` }));
  });
  app.get('/sweeps/:id', async (req, reply) => {
    const { id } = req.params as { id: string };
    const v = await data.sweep(id);
    if (v === null) return notFound(reply, `sweep ${id}`);
    if (fragment(req)) return html(reply, sweepFragment(v));
    return html(reply, page({ title: `Sweep ${id}`, role: role(req), active: 'sweeps', pollMs, body: sweepBody(v) }));
  });

  await app.ready();
  return app;
}
