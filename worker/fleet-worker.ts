/**
 * One fleet worker: one GPU (or the CPU backend), concurrency 1. It checks Redis (refusing an
 * evicting one), announces itself with a heartbeat, serves /healthz and /readyz, and consumes the
 * epochs queue (epochs and precompute jobs) and, when src/sweep/processor.ts exists, the sweeps
 * queue. Repeated trainer crashes quarantine the GPU: the worker stops taking jobs and says so.
 */
import { hostname } from 'node:os';
import { UnrecoverableError, Worker } from 'bullmq';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Server } from 'node:http';
import { bullConnection, checkEvictionPolicy, redactUrl, serviceRedis } from '../src/queue/connection.js';
import { JOB_EPOCHS, JOB_PRECOMPUTE } from '../src/queue/names.js';
import { Keys } from '../src/redis/keys.js';
import { RunStore } from '../src/redis/runs.js';
import { HEARTBEAT_EVERY_MS, removeHeartbeat, writeHeartbeat } from '../src/redis/workers.js';
import type { WorkerState } from '../src/redis/workers.js';
import { closeSweepHooks, processEpochsJob, processPrecomputeJob } from './epochs-job.js';
import type { JobContext } from './epochs-job.js';
import type { GpuInfo } from './gpu.js';
import { startHealthServer } from './health.js';

export interface FleetWorkerOptions {
  url: string;
  keys: Keys;
  epochsQueue: string;
  sweepsQueue: string;
  gpu: GpuInfo | null;
  backend: 'cpu' | 'cuda';
  /** null: no health server; 0: an ephemeral port */
  healthPort: number | null;
  healthHost: string;
  lockMs: number;
  stalledMs: number;
  quarantineAfter: number;
  keepLast: number;
  log: Logger;
}

type SweepProcessor = (job: Job, opts: { redis?: Redis; keys?: Keys }) => Promise<unknown>;

export class FleetWorker {
  readonly workerId: string;
  readonly #o: FleetWorkerOptions;
  readonly #log: Logger;
  #redis: Redis | null = null;
  #worker: Worker | null = null;
  #sweepWorker: Worker | null = null;
  #health: Server | null = null;
  #beat: NodeJS.Timeout | null = null;
  #stopping = false;
  #quarantined = false;
  #faults = 0;
  #state: WorkerState = 'starting';
  #current: { jobId: string; runId: string; epoch: number | null } | null = null;
  readonly #startedMs = Date.now();
  healthPort: number | null = null;

  constructor(opts: FleetWorkerOptions) {
    this.#o = opts;
    this.workerId = `${hostname()}:${opts.gpu !== null ? `gpu${opts.gpu.index}` : 'cpu'}:${process.pid}`;
    this.#log = opts.log.child({ worker: this.workerId });
  }

  get quarantined(): boolean {
    return this.#quarantined;
  }

  async start(): Promise<void> {
    const o = this.#o;
    const redis = serviceRedis(o.url);
    this.#redis = redis;
    redis.on('error', (err: Error) => this.#log.warn({ err: err.message }, 'redis connection error'));
    await redis.ping();
    const warning = await checkEvictionPolicy(redis);
    if (warning !== null) this.#log.warn(warning);
    this.#log.info({ redis: redactUrl(o.url), queue: o.epochsQueue, backend: o.backend, gpu: o.gpu }, 'worker starting');

    if (o.healthPort !== null) {
      try {
        const h = await startHealthServer(o.healthPort, o.healthHost, { ready: () => this.#ready() });
        this.#health = h.server;
        this.healthPort = h.port;
        this.#log.info({ port: h.port }, 'health server listening (/healthz, /readyz)');
      } catch (err) {
        this.#log.warn({ err: (err as Error).message, port: o.healthPort }, 'health server could not start; continuing without it');
      }
    }

    if (this.#stopping) return; // SIGTERM during startup
    const ctx: JobContext = {
      redis, keys: o.keys, workerId: this.workerId, queueName: o.epochsQueue,
      gpuIndex: o.gpu?.index ?? null, backend: o.backend, keepLast: o.keepLast, log: this.#log,
      stopping: () => this.#stopping,
      setCurrent: (cur) => {
        this.#current = cur;
        this.#state = cur === null ? (this.#quarantined ? 'quarantined' : 'idle') : 'busy';
        void this.#heartbeat();
      },
    };
    this.#worker = new Worker(o.epochsQueue, async (job, token) => this.#process(job, token ?? '', ctx), {
      connection: bullConnection(o.url),
      concurrency: 1,
      lockDuration: o.lockMs,
      stalledInterval: o.stalledMs,
      maxStalledCount: 3,
      autorun: true,
    });
    this.#worker.on('error', (err) => this.#log.warn({ err: err.message }, 'queue worker error'));
    this.#worker.on('failed', (job, err) => {
      this.#log.warn({ jobId: job?.id, err: err.message, attemptsMade: job?.attemptsMade }, 'job failed');
      if (job !== undefined) void this.#markFailedForGood(job, err);
    });
    this.#worker.on('completed', (job) => this.#log.info({ jobId: job.id, result: job.returnvalue as unknown }, 'job completed'));

    await this.#startSweeps();
    this.#state = 'idle';
    await this.#heartbeat();
    this.#beat = setInterval(() => void this.#heartbeat(), HEARTBEAT_EVERY_MS);
    this.#log.info('worker ready');
  }

  async #startSweeps(): Promise<void> {
    let processSweepJob: SweepProcessor | undefined;
    try {
      const spec = '../src/sweep/processor.js';
      const mod = (await import(spec)) as { processSweepJob?: SweepProcessor };
      processSweepJob = mod.processSweepJob;
    } catch {
      processSweepJob = undefined;
    }
    if (typeof processSweepJob !== 'function') {
      this.#log.info('src/sweep/processor.ts not available: not consuming the sweeps queue');
      return;
    }
    const fn = processSweepJob;
    const redis = this.#redis;
    this.#sweepWorker = new Worker(this.#o.sweepsQueue, async (job) => fn(job, redis !== null ? { redis, keys: this.#o.keys } : { keys: this.#o.keys }), {
      connection: bullConnection(this.#o.url), concurrency: 1, lockDuration: this.#o.lockMs, stalledInterval: this.#o.stalledMs,
    });
    this.#sweepWorker.on('error', (err) => this.#log.warn({ err: err.message }, 'sweeps worker error'));
  }

  async #process(job: Job, token: string, ctx: JobContext): Promise<unknown> {
    if (this.#quarantined) throw new Error('this worker is quarantined');
    try {
      let result: unknown;
      if (job.name === JOB_EPOCHS) result = await processEpochsJob(job, token, ctx);
      else if (job.name === JOB_PRECOMPUTE) result = await processPrecomputeJob(job, ctx);
      else throw new UnrecoverableError(`[JOB_INVALID] unknown job name ${JSON.stringify(job.name)} (expected ${JOB_EPOCHS} or ${JOB_PRECOMPUTE})`);
      this.#faults = 0;
      return result;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (/^\[(TRAINER_CRASHED|DEVICE_FAULT)\]/.test(message)) await this.#fault(message);
      throw err;
    }
  }

  /**
   * A job that failed for good without passing through the processor's error path (e.g. stalled
   * too often after its worker died) must not leave its run 'running' forever.
   */
  async #markFailedForGood(job: Job, err: Error): Promise<void> {
    const redis = this.#redis;
    if (redis === null || job.name !== JOB_EPOCHS) return;
    const attempts = job.opts.attempts ?? 1;
    if (err.name !== 'UnrecoverableError' && job.attemptsMade < attempts) return;
    const runId = (job.data as { runId?: unknown }).runId;
    if (typeof runId !== 'string') return;
    try {
      const runs = new RunStore(redis, this.#o.keys);
      const run = await runs.get(runId);
      if (run !== null && run.jobId === job.id && (run.status === 'running' || run.status === 'queued')) {
        await runs.setStatus(runId, 'failed', { error: err.message });
      }
    } catch (e) {
      this.#log.warn({ err: (e as Error).message, runId }, 'could not mark the run failed');
    }
  }

  async #fault(message: string): Promise<void> {
    this.#faults += 1;
    this.#log.warn({ faults: this.#faults, limit: this.#o.quarantineAfter, err: message }, 'trainer fault');
    if (this.#faults >= this.#o.quarantineAfter && !this.#quarantined) {
      this.#quarantined = true;
      this.#state = 'quarantined';
      this.#log.error({ gpu: this.#o.gpu, faults: this.#faults },
        `QUARANTINED: ${this.#faults} consecutive trainer faults on ${this.#o.gpu !== null ? `GPU ${this.#o.gpu.index} ${this.#o.gpu.uuid}` : 'the CPU backend'}; this worker takes no more jobs (restart it after checking the device)`);
      void this.#worker?.pause(true);
      await this.#heartbeat();
    }
  }

  async #ready(): Promise<{ ok: boolean; reason: string }> {
    if (this.#quarantined) return { ok: false, reason: 'quarantined' };
    const redis = this.#redis;
    if (redis === null || redis.status !== 'ready') return { ok: false, reason: 'redis not connected' };
    const pong = await Promise.race([redis.ping(), new Promise<string>((r) => setTimeout(() => r('timeout'), 1000))]);
    return pong === 'PONG' ? { ok: true, reason: 'ready' } : { ok: false, reason: 'redis did not answer' };
  }

  async #heartbeat(): Promise<void> {
    const redis = this.#redis;
    if (redis === null || redis.status !== 'ready') return;
    const gpu = this.#o.gpu;
    const cur = this.#current;
    try {
      await writeHeartbeat(redis, this.#o.keys, {
        workerId: this.workerId, host: hostname(), pid: process.pid,
        gpuIndex: gpu?.index ?? null, gpuUuid: gpu?.uuid ?? '', gpuModel: gpu?.model ?? 'cpu', gpuMemMb: gpu?.memMb ?? null,
        driver: gpu?.driver ?? '', backend: this.#o.backend,
        state: this.#stopping ? 'stopping' : this.#state,
        jobId: cur?.jobId ?? '', runId: cur?.runId ?? '', epoch: cur?.epoch ?? null,
        quarantined: this.#quarantined, faults: this.#faults, startedMs: this.#startedMs, updatedMs: Date.now(),
      });
    } catch (err) {
      this.#log.debug({ err: (err as Error).message }, 'heartbeat failed');
    }
  }

  /**
   * Graceful stop (SIGTERM): the job in flight finishes its epoch, commits it and is released
   * back to wait; then everything closes in order, each step even if an earlier one failed.
   */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    this.#log.info('stopping at the next epoch boundary');
    void this.#heartbeat();
    const steps: [string, () => Promise<unknown>][] = [
      ['epochs worker', async () => this.#worker?.close()],
      ['sweeps worker', async () => this.#sweepWorker?.close()],
      ['sweep hooks', async () => closeSweepHooks()],
      ['heartbeat', async () => {
        if (this.#beat !== null) clearInterval(this.#beat);
        if (this.#redis !== null) await removeHeartbeat(this.#redis, this.#o.keys, this.workerId);
      }],
      ['health server', async () => new Promise<void>((r) => (this.#health ? this.#health.close(() => r()) : r()))],
      ['redis', async () => this.#redis?.quit()],
    ];
    for (const [name, step] of steps) {
      try {
        await step();
      } catch (err) {
        this.#log.warn({ step: name, err: (err as Error).message }, 'error while stopping');
      }
    }
    this.#log.info('worker stopped');
  }
}
