/**
 * Test helpers of the fleet suite: random Redis prefixes and queue names, worker processes
 * (the real `foxhunt-worker` entry, CPU backend), private redis-servers, the reference run.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { loadRunConfig } from '../../src/config/load.js';
import type { RunConfig } from '../../src/config/schema.js';
import { bullConnection, newRedis, connectionOptions } from '../../src/queue/connection.js';
import { Keys } from '../../src/redis/keys.js';
import type { Scalars } from '../../src/trainer/scalars.js';
import { trainLocal } from '../../src/trainer/local.js';
import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { deleteKeys } from '../../src/redis/scan.js';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const TINY = join(ROOT, 'config', 'runs', 'tiny.toml');
export const REDIS_URL = process.env['REDIS_URL'] || 'redis://127.0.0.1:6379';

export function rid(tag: string): string {
  return `${tag}${randomBytes(4).toString('hex')}`;
}

/** A fresh prefix + queue name, a Redis connection and a Queue on them. */
export interface FleetEnv {
  url: string;
  prefix: string;
  queueName: string;
  keys: Keys;
  redis: Redis;
  queue: Queue;
  cacheDir: string;
  dataRoot: string;
  workers: WorkerProc[];
  cleanup(): Promise<void>;
}

export function fleetEnv(url: string = REDIS_URL): FleetEnv {
  const prefix = rid('fhtest');
  const queueName = rid('fhq');
  const keys = new Keys(prefix);
  const redis = newRedis({ ...connectionOptions(url), maxRetriesPerRequest: null });
  redis.on('error', () => undefined);
  const queue = new Queue(queueName, { connection: bullConnection(url) });
  queue.on('error', () => undefined);
  const env: FleetEnv = {
    url, prefix, queueName, keys, redis, queue,
    cacheDir: mkdtempSync(join(tmpdir(), 'fh-cache-')),
    dataRoot: mkdtempSync(join(tmpdir(), 'fh-data-')),
    workers: [],
    async cleanup() {
      for (const w of env.workers) w.kill('SIGKILL');
      await Promise.all(env.workers.map((w) => w.exited));
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close().catch(() => undefined);
      for (const pattern of [`${prefix}:*`, `bull:${queueName}:*`, `bull:${queueName}-sweeps:*`]) {
        await deleteKeys(redis, pattern);
      }
      redis.disconnect();
    },
  };
  return env;
}

export interface WorkerProc {
  proc: ChildProcess;
  log: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(sig?: NodeJS.Signals): void;
  /** Resolves when a log line matches. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<string>;
}

export function startWorker(env: FleetEnv, extraEnv: Record<string, string> = {}, args: string[] = ['--cpu', '--health-port', '-1']): WorkerProc {
  const proc = spawn(process.execPath, [join(ROOT, 'bin', 'foxhunt-worker.js'), ...args], {
    cwd: ROOT,
    env: {
      ...process.env,
      REDIS_URL: env.url,
      FOXHUNT_PREFIX: env.prefix,
      FOXHUNT_EPOCHS_QUEUE: env.queueName,
      FOXHUNT_SWEEPS_QUEUE: `${env.queueName}-sweeps`,
      FOXHUNT_CACHE_DIR: env.cacheDir,
      FOXHUNT_DATA_ROOT: env.dataRoot,
      FOXHUNT_LOCK_MS: '3000',
      FOXHUNT_STALLED_MS: '1000',
      FOXHUNT_LOG_LEVEL: 'info',
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log: string[] = [];
  const waiters: { re: RegExp; resolve(l: string): void }[] = [];
  let buf = '';
  const onData = (d: Buffer): void => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      log.push(line);
      if (process.env['FLEET_TEST_VERBOSE'] === '1') process.stderr.write(`[worker ${proc.pid}] ${line}\n`);
      for (const w of [...waiters]) {
        if (w.re.test(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  };
  proc.stdout?.on('data', onData);
  proc.stderr?.on('data', onData);
  const w: WorkerProc = {
    proc, log, exited: exited(proc),
    kill: (sig = 'SIGTERM') => { if (proc.exitCode === null && proc.signalCode === null) proc.kill(sig); },
    waitFor: (re, timeoutMs = 60_000) => {
      const found = log.find((l) => re.test(l));
      if (found !== undefined) return Promise.resolve(found);
      return new Promise<string>((res, rej) => {
        const t = setTimeout(() => rej(new Error(`timed out waiting for ${re} in worker log:\n${log.slice(-20).join('\n')}`)), timeoutMs);
        waiters.push({ re, resolve: (l) => { clearTimeout(t); res(l); } });
      });
    },
  };
  env.workers.push(w);
  return w;
}

/** Resolves with a child's exit code and signal: at once if it has exited already. */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

export async function waitUntil<T>(what: string, fn: () => Promise<T | null | undefined | false>, timeoutMs = 60_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export function tinyConfig(sets: string[] = []): RunConfig {
  return loadRunConfig(TINY, sets);
}

/** Scalars without timings and throughput (which vary run to run). */
export function deterministic(s: Scalars): Scalars {
  const out: Scalars = {};
  for (const [k, v] of Object.entries(s)) if (!k.startsWith('time/') && !k.startsWith('perf/')) out[k] = v;
  return out;
}

/** The uninterrupted local run (`foxhunt train`'s loop) of a config. */
export async function referenceScalars(cfg: RunConfig, epochs: number, cacheDir: string, dataRoot: string): Promise<Scalars[]> {
  const out: Scalars[] = [];
  await trainLocal(cfg, {
    epochs, backend: 'cpu', env: { cacheDir, dataRoot }, log: pino({ level: 'silent' }),
    onEpoch: (_s, scalars) => out.push(deterministic(scalars)),
  });
  return out;
}

/**
 * The tiny config's uninterrupted local run of `epochs` epochs, computed once per test file (in
 * beforeAll, with its own fleet environment, cleaned up in afterAll): the returned array is filled
 * before the first test runs.
 */
export function referenceRun(epochs: number): Scalars[] {
  const reference: Scalars[] = [];
  let refEnv: FleetEnv | null = null;
  beforeAll(async () => {
    refEnv = fleetEnv();
    reference.push(...await referenceScalars(tinyConfig(), epochs, refEnv.cacheDir, refEnv.dataRoot));
  });
  afterAll(async () => refEnv?.cleanup());
  return reference;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => res(port));
    });
    s.on('error', rej);
  });
}

/** GET url (with a bearer token if given): its status and body, or status 0 when nothing answers in timeoutMs. */
export async function httpGet(url: string, token?: string, timeoutMs = 5_000): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: token ? { authorization: `Bearer ${token}` } : {} });
    return { status: res.status, body: await res.text() };
  } catch {
    return { status: 0, body: '' };
  }
}

export function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version']).status === 0;
}

/** A private redis-server (AOF on, so a restart keeps every key). */
export interface PrivateRedis {
  port: number;
  url: string;
  dir: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function privateRedis(extra: string[] = []): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'fh-redis-'));
  let proc: ChildProcess | null = null;
  const r: PrivateRedis = {
    port, dir, url: `redis://127.0.0.1:${port}`,
    async start() {
      if (proc !== null) return;
      const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes',
        '--appendfsync', 'always', '--save', '', ...extra], { stdio: 'ignore' });
      proc = p;
      p.on('exit', () => { if (proc === p) proc = null; });
      await waitUntil('redis-server to answer', async () => spawnSync('redis-cli', ['-p', String(port), 'ping']).stdout?.toString().includes('PONG'), 10_000);
    },
    async stop() {
      const p = proc;
      if (p === null) return;
      const gone = new Promise((res) => p.once('exit', res));
      p.kill('SIGTERM');
      await gone;
      proc = null;
    },
  };
  await r.start();
  return r;
}
