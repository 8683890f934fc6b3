// The dashboard in headless Chromium (Debian's /usr/bin/chromium through playwright-core; no
// browser download): every page loads with auth and is refused without; a run's charts draw the
// real points from Redis and grow when an epoch lands; the sweep leaderboard on the page matches
// `foxhunt sweep-status --json`. Screenshots go to test-artifacts/dashboard/.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Queue } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { chromium } from 'playwright-core';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboard } from '../../src/dashboard/server.js';
import { bullConnection } from '../../src/queue/connection.js';
import { Keys } from '../../src/redis/keys.js';
import { RunStore } from '../../src/redis/runs.js';
import type { LeaderboardRow } from '../../src/sweep/store.js';
import { seedEpochs, seedRun, seedSweep, seedWorkers } from './seed.js';
import { deleteKeys } from '../../src/redis/scan.js';

const CHROMIUM = '/usr/bin/chromium';
const hasChromium = existsSync(CHROMIUM);
const url = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const tag = randomBytes(4).toString('hex');
const keys = new Keys(`fhtest-${tag}`);
const ADMIN = `adm-${tag}`;
const VIEWER = `ro-${tag}`;
const sweepId = `browser-sweep-${tag}`;
const shots = join('test-artifacts', 'dashboard');
let redis: Redis;
let app: FastifyInstance;
let base = '';
let browser: Browser;
let epochsQ: Queue;
let sweepsQ: Queue;

const PAGES: [string, string, string][] = [
  ['fleet', '/', '#workers'],
  ['runs', '/runs', '#runs'],
  ['run', '/runs/browser-run', '#charts .chart'],
  ['sweeps', '/sweeps', '#sweeps'],
  ['sweep', `/sweeps/${sweepId}`, '#leaderboard'],
  ['queues', '/queues', '#root'],
];

beforeAll(async () => {
  if (!hasChromium) return;
  mkdirSync(shots, { recursive: true });
  redis = new Redis(url);
  epochsQ = new Queue(`fhtest-br-epochs-${tag}`, { connection: bullConnection(url) });
  sweepsQ = new Queue(`fhtest-br-sweeps-${tag}`, { connection: bullConnection(url) });
  await seedRun(redis, keys, 'browser-run', 3, 8);
  await seedWorkers(redis, keys);
  await seedSweep(redis, keys, epochsQ, sweepsQ, sweepId);
  app = await buildDashboard({ redis, queues: [epochsQ, sweepsQ], keys, pollMs: 300, auth: { enabled: true, adminToken: ADMIN, readonlyToken: VIEWER } });
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
}, 60_000);

afterAll(async () => {
  if (!hasChromium) return;
  await browser?.close();
  await app?.close();
  for (const q of [epochsQ, sweepsQ]) { await q.obliterate({ force: true }).catch(() => undefined); await q.close(); }
  await deleteKeys(redis, `${keys.prefix}:*`);
  await redis.quit();
});

describe.skipIf(!hasChromium)('dashboard in headless Chromium', () => {
  it('refuses every page without auth', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    for (const [, path] of [...PAGES, ['admin', '/admin/queues', ''] as [string, string, string]]) {
      // the server answers 401 with a basic-auth challenge, and the browser renders nothing
      const res = await page.request.get(base + path);
      expect(res.status(), path).toBe(401);
      expect(res.headers()['www-authenticate'], path).toMatch(/^Basic/);
      await expect(page.goto(base + path), path).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
    }
    // and the API the pages poll refuses too
    expect((await page.request.get(`${base}/api/runs/browser-run`)).status()).toBe(401);
    await ctx.close();
  });

  it('loads every page with auth (admin), with screenshots', async () => {
    const ctx = await browser.newContext({ httpCredentials: { username: 'admin', password: ADMIN }, viewport: { width: 1280, height: 900 } });
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    for (const [name, path, selector] of PAGES) {
      const res = await page.goto(base + path);
      expect(res?.status(), path).toBe(200);
      await page.waitForSelector(selector, { timeout: 15_000 });
      if (name === 'run' || name === 'sweep') await page.waitForSelector('body[data-charts-ready="1"]', { timeout: 15_000 });
      await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
    }
    expect(errors).toEqual([]);
    // the fleet shows the three workers and the quarantined GPU; their heartbeats are refreshed first,
    // as live workers do every few seconds (the seeded hashes expire like real ones, and the pages above
    // can take longer than that on a loaded machine)
    await seedWorkers(redis, keys);
    await page.goto(`${base}/`);
    expect(await page.locator('#workers tbody tr').count()).toBe(3);
    expect(await page.textContent('main')).toContain('Quarantined GPUs');
    await ctx.close();
  });

  it('gives the read-only role every page but not the admin board', async () => {
    const ctx = await browser.newContext({ httpCredentials: { username: 'viewer', password: VIEWER } });
    const page = await ctx.newPage();
    for (const [, path, selector] of PAGES) {
      expect((await page.goto(base + path))?.status(), path).toBe(200);
      await page.waitForSelector(selector, { timeout: 15_000 });
    }
    expect(await page.textContent('header')).toContain('read-only');
    expect((await page.goto(`${base}/admin/queues`))?.status()).toBe(403);
    await ctx.close();
  });

  it("draws a run's real points from Redis and appends a new epoch live", async () => {
    const ctx = await browser.newContext({ httpCredentials: { username: 'admin', password: ADMIN } });
    const page = await ctx.newPage();
    await page.goto(`${base}/runs/browser-run`);
    await page.waitForSelector('body[data-charts-ready="1"]', { timeout: 15_000 });
    type Charts = Record<string, { labels: string[]; data: (number | null)[][] }>;
    const read = (): Promise<Charts> => page.evaluate(() => {
      const out: Record<string, { labels: string[]; data: (number | null)[][] }> = {};
      const charts = (globalThis as unknown as { fhCharts: Record<string, { series: { label: string }[]; data: (number | null)[][] }> }).fhCharts;
      for (const [id, u] of Object.entries(charts)) out[id] = { labels: u.series.map((s) => s.label), data: u.data.map((d) => Array.from(d)) };
      return out;
    });
    const expectMatches = async (charts: Charts): Promise<number> => {
      const entries = await new RunStore(redis, keys).epochs('browser-run');
      const names = new Set<string>();
      for (const c of Object.values(charts)) {
        expect(c.data[0]).toEqual(entries.map((e) => e.epoch));
        c.labels.slice(1).forEach((name, i) => {
          names.add(name);
          expect(c.data[i + 1], name).toEqual(entries.map((e) => e.scalars[name] ?? null));
        });
      }
      // every scalar of the stream is charted somewhere (except the epoch itself, the x axis)
      for (const n of Object.keys(entries[0]?.scalars ?? {})) if (n !== 'epoch') expect(names, n).toContain(n);
      return entries.length;
    };
    const first = await read();
    expect(first['loss']?.labels).toEqual(['epoch', 'loss/mean', 'loss/last']);
    expect(first['val_sharpe']?.labels).toEqual(['epoch', 'val/sharpe', 'flat/sharpe', 'bh/sharpe']);
    expect(await expectMatches(first)).toBe(8);
    // an epoch lands: the charts pick it up by polling
    await seedEpochs(redis, keys, 'browser-run', 3, 9, 9, true);
    await page.waitForFunction(() => (globalThis as unknown as { fhCharts: { loss: { data: number[][] } } }).fhCharts.loss.data[0]!.length === 9, undefined, { timeout: 10_000 });
    expect(await expectMatches(await read())).toBe(9);
    await page.screenshot({ path: join(shots, 'run-live.png'), fullPage: true });
    await ctx.close();
  });

  it('shows the sweep leaderboard exactly as foxhunt sweep-status --json', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/foxhunt.js', 'sweep-status', sweepId, '--json'],
      { env: { ...process.env, REDIS_URL: url, FOXHUNT_PREFIX: keys.prefix } });
    const cli = JSON.parse(stdout) as { leaderboard: LeaderboardRow[] };
    expect(cli.leaderboard).toHaveLength(6);
    const ctx = await browser.newContext({ httpCredentials: { username: 'admin', password: ADMIN } });
    const page = await ctx.newPage();
    await page.goto(`${base}/sweeps/${sweepId}`);
    await page.waitForSelector('body[data-charts-ready="1"]', { timeout: 15_000 });
    const rows = await page.$$eval('#leaderboard tbody tr', (trs) => trs.map((tr) => {
      const td = [...tr.querySelectorAll('td')].map((c) => c.textContent?.trim() ?? '');
      return { rank: Number(td[0]), runId: tr.getAttribute('data-run'), metric: tr.querySelector('[data-metric]')?.getAttribute('data-metric'), epochs: Number(td[4]), status: td[5] };
    }));
    expect(rows).toEqual(cli.leaderboard.map((r) => ({ rank: r.rank, runId: r.runId, metric: r.metric === null ? 'null' : String(r.metric), epochs: r.epochs, status: r.status })));
    // a chart of the metric against each parameter, and rung survival
    const ids = await page.evaluate(() => Object.keys((globalThis as unknown as { fhCharts: Record<string, unknown> }).fhCharts).sort());
    expect(ids).toEqual(['param_agent_gamma', 'param_agent_lr']);
    expect(await page.locator('#rungs tbody tr').count()).toBe(2);
    // the leaderboard links to the trial runs
    await page.click(`#leaderboard a[href="/runs/${cli.leaderboard[0]!.runId}"]`);
    await page.waitForSelector('#charts .chart');
    await ctx.close();
  });
});

if (!hasChromium) {
  it('dashboard browser test', () => {
    process.stdout.write(`skipped: no chromium at ${CHROMIUM} (apt-get install -y chromium)\n`);
  });
}
