/**
 * Fleet scaling on one host (issue 8, simulated): `foxhunt bench-fleet`.
 *
 * For each worker count N it starts a fleet on a fresh random Redis prefix and queue names:
 * `foxhunt-worker --gpus all` with FOXHUNT_TEST_GPUS=N (the supervisor starts one worker per faked
 * "GPU"; without the CUDA library each trains on the CPU backend), or N `foxhunt-worker --cpu`
 * processes (`launch: 'processes'`). It waits until every worker is idle, warms the feature cache
 * with a precompute job, then starts a real sweep (`SWEEP_JOB` on the sweeps queue, as `foxhunt
 * sweep` does) of `trials` trials × `epochs` epochs with ASHA off, so nothing is pruned and every
 * trial trains every epoch. Each trial sets `gpu.threads=1`: one core stands in for one GPU.
 *
 * Measured per N: trial-epochs per minute from the sweep's enqueue to the last epoch commit, the
 * speedup and scaling efficiency against the smallest N, the median native epoch time, and which
 * worker trained which run (from the `worker` field of each epoch stream entry).
 *
 * The kill test (N = 2): SIGKILL the worker of "GPU 1" while it trains a trial mid-way, then check
 * that the sweep completes with every trial at `epochs` epochs, each epoch exactly once in its
 * stream, and that the supervisor started a new worker for that GPU.
 *
 * Everything it creates (processes, the prefix's keys, both queues, the feature cache directory)
 * is removed at the end, on error, and on SIGINT/SIGTERM.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { cpus, hostname, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { loadRunConfig } from '../src/config/load.js';
import { FoxhuntError } from '../src/errors.js';
import { bullConnection } from '../src/queue/connection.js';
import { enqueuePrecompute, epochsQueue } from '../src/queue/queues.js';
import { defaultJobOptions } from '../src/queue/retry.js';
import { Keys } from '../src/redis/keys.js';
import { RunStore } from '../src/redis/runs.js';
import { listWorkers } from '../src/redis/workers.js';
import type { WorkerHeartbeat } from '../src/redis/workers.js';
import { SWEEP_JOB, sweepJobId } from '../src/sweep/processor.js';
import { sweepRecordOf } from '../src/sweep/runner.js';
import { parseSweepSpec, planTrials } from '../src/sweep/spec.js';
import type { ResolvedSweepSpec } from '../src/sweep/spec.js';
import { SweepStore } from '../src/sweep/store.js';
import { median } from './bench.js';
import { deleteKeys, scanKeys } from '../src/redis/scan.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WORKER_BIN = join(ROOT, 'bin', 'foxhunt-worker.js');

export type Launch = 'supervisor' | 'processes';

export interface FleetBenchOptions {
  /** Worker counts to measure, e.g. [1, 2, 3]. */
  workers: number[];
  trials: number;
  epochs: number;
  /** Absolute path of the base run config (TOML). */
  configPath: string;
  /** Overrides applied to every trial after `gpu.threads=1`. */
  sets: string[];
  launch: Launch;
  killTest: boolean;
  redis: Redis;
  url: string;
  /** Progress lines (stderr in the CLI). */
  progress(line: string): void;
  /** Upper bound on one batch (ms); default from the workload size. */
  batchTimeoutMs?: number;
}

export interface WorkerShare {
  workerId: string;
  gpu: number | null;
  pid: number;
  runs: number;
  epochs: number;
}

export interface ScalingRow {
  workers: number;
  /** Worker processes that announced themselves (heartbeats) before the batch, one per GPU index. */
  bound: { gpu: number | null; pid: number }[];
  trialEpochs: number;
  wallS: number;
  epochsPerMin: number;
  speedup: number;
  efficiency: number;
  medianEpochMs: number;
  /** Sum of the native epoch times over N × wall: the share of worker time spent training. */
  busy: number;
  perWorker: WorkerShare[];
  /**
   * Mean CPU cores in use during the batch (Linux /proc): by this bench and its fleet (supervisor,
   * workers, trainer children), and by everything else on the host (other work, Redis). null
   * where /proc is not readable.
   */
  cpu: CpuShare | null;
  /** Exit status of the supervisor (or the worst worker) after SIGTERM; null if it had to be killed. */
  stopExit: number | null;
  leftoverKeys: number;
}

export interface KillResult {
  workers: number;
  victim: { gpu: number | null; pid: number; runId: string; epochAtKill: number };
  /** Workers that committed the victim run's epochs after the kill. */
  finishedBy: string[];
  /** The new worker the supervisor started for the victim's GPU (supervisor launch only). */
  restartedPid: number | null;
  trials: number;
  completed: number;
  /** Trials not completed with every epoch exactly once. */
  lost: string[];
  killToNextCommitS: number;
  killToDoneS: number;
  perWorker: WorkerShare[];
  ok: boolean;
  leftoverKeys: number;
}

export interface FleetBenchResult {
  date: string;
  commit: string | null;
  host: { hostname: string; cpus: number; cpuModel: string; gpus: string };
  config: string;
  sets: string[];
  trials: number;
  epochs: number;
  launch: Launch;
  batch: string;
  baseline: number;
  rows: ScalingRow[];
  kill: KillResult | null;
}

function gitCommit(): string | null {
  const r = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status === 0) return r.stdout.trim();
  const fromEnv = process.env['FOXHUNT_COMMIT'];
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : null;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | null>, everyMs = 250): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== null) return v;
    if (Date.now() > end) throw new FoxhuntError('INTERNAL', `timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** `host:gpu1:1234` → gpu 1, pid 1234; `host:cpu:1234` → gpu null. */
export function parseWorkerId(id: string): { gpu: number | null; pid: number } {
  const m = /:(?:gpu(\d+)|cpu):(\d+)$/.exec(id);
  return { gpu: m?.[1] !== undefined ? Number(m[1]) : null, pid: Number(m?.[2] ?? 0) };
}

function exited(p: ChildProcess): Promise<number | null> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(p.exitCode);
  return new Promise((r) => p.once('exit', (code) => r(code)));
}

/**
 * One fleet on its own prefix and queues: its worker processes (each launched in its own process
 * group, so killing the group takes the workers and their trainer children), its queues and keys.
 */
class Fleet {
  readonly tag = randomBytes(4).toString('hex');
  readonly keys = new Keys(`fhbench-${this.tag}`);
  readonly epochsName = `fhbench-epochs-${this.tag}`;
  readonly sweepsName = `fhbench-sweeps-${this.tag}`;
  readonly epochs: Queue;
  readonly sweeps: Queue;
  readonly procs: ChildProcess[] = [];
  readonly logTail: string[] = [];
  #closed: Promise<{ stopExit: number | null; leftoverKeys: number }> | null = null;

  get closing(): boolean {
    return this.#closed !== null;
  }

  constructor(readonly o: FleetBenchOptions, readonly n: number, readonly cacheDir: string, readonly extraEnv: Record<string, string>) {
    this.epochs = epochsQueue(o.url, this.epochsName);
    this.sweeps = new Queue(this.sweepsName, { connection: bullConnection(o.url) });
    this.epochs.on('error', () => undefined);
    this.sweeps.on('error', () => undefined);
  }

  #spawn(args: string[], env: NodeJS.ProcessEnv): ChildProcess {
    const p = spawn(process.execPath, [WORKER_BIN, ...args], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let buf = '';
    p.stderr?.on('data', (d: Buffer) => {
      buf += d.toString();
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        this.logTail.push(buf.slice(0, i));
        buf = buf.slice(i + 1);
        if (this.logTail.length > 60) this.logTail.shift();
      }
    });
    p.on('error', () => undefined);
    this.procs.push(p);
    return p;
  }

  start(): void {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      REDIS_URL: this.o.url,
      FOXHUNT_PREFIX: this.keys.prefix,
      FOXHUNT_EPOCHS_QUEUE: this.epochsName,
      FOXHUNT_SWEEPS_QUEUE: this.sweepsName,
      FOXHUNT_CACHE_DIR: this.cacheDir,
      FOXHUNT_LOG_LEVEL: 'info',
      ...this.extraEnv,
    };
    if (this.o.launch === 'supervisor') {
      this.#spawn(['--gpus', 'all', '--health-port', '0'], { ...env, FOXHUNT_TEST_GPUS: String(this.n) });
    } else {
      delete env['FOXHUNT_TEST_GPUS'];
      for (let i = 0; i < this.n; i++) this.#spawn(['--cpu', '--health-port', '0'], env);
    }
  }

  /** Throws with the log tail when every launched process has exited. */
  checkAlive(): void {
    if (this.procs.every((p) => p.exitCode !== null || p.signalCode !== null)) {
      throw new FoxhuntError('INTERNAL', `the worker processes exited; last log lines:\n${this.logTail.slice(-15).join('\n')}`);
    }
  }

  /** N idle workers with distinct GPU indices (supervisor) or N idle CPU workers. */
  async waitReady(timeoutMs: number): Promise<WorkerHeartbeat[]> {
    return until(`${this.n} idle workers`, timeoutMs, async () => {
      this.checkAlive();
      const hb = (await listWorkers(this.o.redis, this.keys)).filter((h) => h.state === 'idle');
      if (this.o.launch === 'supervisor') {
        const gpus = new Set(hb.map((h) => h.gpuIndex));
        return gpus.size === this.n && hb.length === this.n ? hb.sort((a, b) => (a.gpuIndex ?? 0) - (b.gpuIndex ?? 0)) : null;
      }
      return hb.length === this.n ? hb.sort((a, b) => a.pid - b.pid) : null;
    }, 250);
  }

  async runJob(jobId: string, timeoutMs: number): Promise<void> {
    await until(`job ${jobId}`, timeoutMs, async () => {
      this.checkAlive();
      const job = await this.epochs.getJob(jobId);
      const state = job !== undefined ? await job.getState() : 'missing';
      if (state === 'failed') throw new FoxhuntError('INTERNAL', `job ${jobId} failed: ${job?.failedReason ?? '?'}`);
      return state === 'completed' ? true : null;
    });
  }

  /** Writes the sweep record and adds its job, as `foxhunt sweep` does; returns the enqueue time. */
  async startSweep(id: string, spec: ResolvedSweepSpec): Promise<number> {
    const store = new SweepStore(this.o.redis, this.keys.prefix);
    if (!(await store.create(sweepRecordOf(id, spec)))) throw new FoxhuntError('INTERNAL', `sweep ${id} already exists`);
    const t0 = Date.now();
    await this.sweeps.add(SWEEP_JOB, { sweepId: id }, { ...defaultJobOptions(), jobId: sweepJobId(id) });
    return t0;
  }

  async waitSweep(id: string, timeoutMs: number): Promise<void> {
    const store = new SweepStore(this.o.redis, this.keys.prefix);
    const runs = new RunStore(this.o.redis, this.keys);
    let lastShown = -1;
    await until(`sweep ${id} to complete`, timeoutMs, async () => {
      if (this.closing) throw new FoxhuntError('INTERNAL', 'the fleet was closed');
      this.checkAlive();
      const rec = await store.get(id);
      const done = Object.values(await this.o.redis.hgetall(store.keys(id).epochs)).reduce((s, v) => s + Number(v), 0);
      const total = this.o.trials * this.o.epochs;
      if (done !== lastShown && (lastShown < 0 || done === total || done - lastShown >= Math.max(1, Math.round(total / 8)))) {
        this.o.progress(`  N=${this.n}: ${done}/${total} trial-epochs committed`);
        lastShown = done;
      }
      const failed = (await runs.list(1000)).filter((r) => r.sweepId === id && r.status === 'failed');
      if (failed.length > 0) throw new FoxhuntError('INTERNAL', `trial ${failed[0]?.runId} failed: ${failed[0]?.error ?? '?'}`);
      return rec?.status === 'completed' ? true : null;
    }, 300);
  }

  /** SIGTERM (graceful, through the supervisor), then SIGKILL of every process group; then the keys. */
  close(graceful: boolean): Promise<{ stopExit: number | null; leftoverKeys: number }> {
    this.#closed ??= this.#close(graceful);
    return this.#closed;
  }

  async #close(graceful: boolean): Promise<{ stopExit: number | null; leftoverKeys: number }> {
    let stopExit: number | null = null;
    if (graceful) {
      for (const p of this.procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
      const codes = await Promise.race([Promise.all(this.procs.map(exited)), sleep(20_000).then(() => null)]);
      if (codes !== null) stopExit = codes.reduce<number>((worst, c) => Math.max(worst, c ?? 1), 0);
    }
    for (const p of this.procs) {
      // the whole group: a worker left by a dead supervisor, a trainer child left by a dead worker
      if (p.pid !== undefined) {
        try { process.kill(-p.pid, 'SIGKILL'); } catch { /* group already gone */ }
      }
    }
    await Promise.race([Promise.all(this.procs.map(exited)), sleep(5000)]);
    // and wait (a little) until no process of those groups is left
    const end = Date.now() + 5000;
    while (Date.now() < end && this.procs.some((p) => p.pid !== undefined && groupExists(p.pid))) await sleep(50);
    for (const q of [this.epochs, this.sweeps]) {
      await q.obliterate({ force: true }).catch(() => undefined);
      await q.close().catch(() => undefined);
    }
    const patterns = [`${this.keys.prefix}:*`, `bull:${this.epochsName}:*`, `bull:${this.sweepsName}:*`];
    for (const pattern of patterns) await deleteKeys(this.o.redis, pattern);
    let leftoverKeys = 0;
    for (const pattern of patterns) leftoverKeys += (await scanKeys(this.o.redis, pattern)).length;
    return { stopExit, leftoverKeys };
  }
}

export interface CpuShare {
  fleet: number;
  other: number;
}

interface CpuSample {
  ms: number;
  /** host busy jiffies (all cores) */
  host: number;
  /** jiffies of this process and of every process in the fleet's process groups (with reaped children) */
  ours: number;
}

const CLK_TCK = 100;

function cpuSample(procs: readonly ChildProcess[]): CpuSample | null {
  try {
    const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    const host = total - (f[3] ?? 0) - (f[4] ?? 0);
    const groups = new Set(procs.map((p) => p.pid).filter((x): x is number => x !== undefined));
    const self = process.cpuUsage();
    let ours = (self.user + self.system) / 1e6 * CLK_TCK;
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      let stat: string;
      try { stat = readFileSync(`/proc/${d}/stat`, 'utf8'); } catch { continue; }
      // fields after "(comm)": state ppid pgrp ... utime(11) stime(12) cutime(13) cstime(14)
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (!groups.has(Number(rest[2]))) continue;
      ours += [11, 12, 13, 14].reduce((a, i) => a + Number(rest[i] ?? 0), 0);
    }
    return { ms: Date.now(), host, ours };
  } catch {
    return null;
  }
}

function cpuShare(a: CpuSample | null, b: CpuSample | null): CpuShare | null {
  if (a === null || b === null || b.ms <= a.ms) return null;
  const s = (b.ms - a.ms) / 1000 * CLK_TCK;
  const fleet = (b.ours - a.ours) / s;
  return { fleet, other: Math.max(0, (b.host - a.host) / s - fleet) };
}

function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The sweep every batch runs: the base config, one core per worker, lr varied, ASHA off. */
export function benchSweepSpec(o: Pick<FleetBenchOptions, 'configPath' | 'sets' | 'trials' | 'epochs'>): ResolvedSweepSpec {
  const spec = parseSweepSpec({
    name: 'bench-fleet',
    base: o.configPath,
    set: ['gpu.threads=1', ...o.sets],
    metric: 'val/sharpe',
    goal: 'max',
    trials: o.trials,
    max_epochs: o.epochs,
    concurrency: o.trials,
    sampler: { kind: 'halton', seed: 7 },
    asha: { enabled: false },
    space: { 'agent.lr': { kind: 'log_uniform', low: 1e-4, high: 3e-3 } },
  }, 'bench-fleet', dirname(o.configPath));
  const planned = planTrials(spec).length;
  if (planned !== o.trials) throw new FoxhuntError('CONFIG_INVALID', `only ${planned} distinct trials could be planned`, { where: '--trials' });
  return spec;
}

interface BatchRecord {
  runs: { runId: string; status: string; committedEpoch: number; epochs: { epoch: number; worker: string; ts: number; ms: number | null }[] }[];
  perWorker: WorkerShare[];
}

async function readBatch(fleet: Fleet, sweepId: string, known: readonly WorkerHeartbeat[]): Promise<BatchRecord> {
  const store = new SweepStore(fleet.o.redis, fleet.keys.prefix);
  const runStore = new RunStore(fleet.o.redis, fleet.keys);
  const shares = new Map<string, { runs: Set<string>; epochs: number }>();
  for (const h of known) shares.set(h.workerId, { runs: new Set(), epochs: 0 });
  const runs: BatchRecord['runs'] = [];
  for (const t of await store.trials(sweepId)) {
    const rec = await runStore.require(t.runId);
    const entries = await runStore.epochs(t.runId);
    for (const e of entries) {
      const s = shares.get(e.worker) ?? { runs: new Set<string>(), epochs: 0 };
      s.runs.add(t.runId);
      s.epochs += 1;
      shares.set(e.worker, s);
    }
    runs.push({
      runId: t.runId, status: rec.status, committedEpoch: rec.committedEpoch,
      epochs: entries.map((e) => ({ epoch: e.epoch, worker: e.worker, ts: e.ts, ms: e.scalars['time/total_ms'] ?? null })),
    });
  }
  const perWorker = [...shares].map(([workerId, s]) => ({ workerId, ...parseWorkerId(workerId), runs: s.runs.size, epochs: s.epochs }))
    .sort((a, b) => (a.gpu ?? 0) - (b.gpu ?? 0) || a.pid - b.pid);
  return { runs, perWorker };
}

/** Every trial completed with epochs 1..E, each exactly once; returns the ids that are not. */
export function incompleteRuns(batch: BatchRecord, epochs: number): string[] {
  const want = Array.from({ length: epochs }, (_, i) => i + 1).join(',');
  return batch.runs.filter((r) => r.status !== 'completed' || r.committedEpoch !== epochs || r.epochs.map((e) => e.epoch).join(',') !== want)
    .map((r) => r.runId);
}

const LOCK_ENV = { FOXHUNT_LOCK_MS: '3000', FOXHUNT_STALLED_MS: '1500' };

export async function runFleetBench(o: FleetBenchOptions): Promise<FleetBenchResult> {
  if (o.workers.length === 0) throw new FoxhuntError('CONFIG_INVALID', 'give at least one worker count', { where: '--workers' });
  loadRunConfig(o.configPath, ['gpu.threads=1', ...o.sets]); // bad --set fails here, naming the key
  const spec = benchSweepSpec(o);
  const warmCfg = loadRunConfig(o.configPath, ['gpu.threads=1', ...o.sets]);
  const cacheDir = mkdtempSync(join(tmpdir(), 'foxhunt-bench-fleet-'));
  const batchTimeoutMs = o.batchTimeoutMs ?? Math.max(180_000, o.trials * o.epochs * 20_000);
  const fleets = new Set<Fleet>();
  let interrupted = false;
  const onSignal = (sig: NodeJS.Signals): void => {
    if (interrupted) return;
    interrupted = true;
    o.progress(`${sig}: stopping the workers and removing the bench's keys`);
    void Promise.allSettled([...fleets].map((f) => f.close(false))).finally(() => {
      rmSync(cacheDir, { recursive: true, force: true });
      process.exit(130);
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const runBatch = async (n: number, extraEnv: Record<string, string>,
    during?: (fleet: Fleet, sweepId: string, t0: number) => Promise<void>): Promise<{ fleet: Fleet; t0: number; sweepId: string; ready: WorkerHeartbeat[]; cpu: CpuShare | null }> => {
    const fleet = new Fleet(o, n, cacheDir, extraEnv);
    fleets.add(fleet);
    fleet.start();
    o.progress(`N=${n}: ${o.launch === 'supervisor' ? `foxhunt-worker --gpus all (FOXHUNT_TEST_GPUS=${n})` : `${n} x foxhunt-worker --cpu`}, prefix ${fleet.keys.prefix}, pids ${fleet.procs.map((p) => p.pid).join(',')}`);
    const ready = await fleet.waitReady(120_000);
    o.progress(`N=${n}: workers ready: ${ready.map((h) => `${h.gpuIndex === null ? 'cpu' : `gpu${h.gpuIndex}`}=pid ${h.pid}`).join(', ')}`);
    const warm = await enqueuePrecompute(fleet.epochs, { config: warmCfg });
    await fleet.runJob(warm, 120_000);
    const sweepId = `bench-fleet-n${n}-${fleet.tag}`;
    const before = cpuSample(fleet.procs);
    const t0 = await fleet.startSweep(sweepId, spec);
    await Promise.all([fleet.waitSweep(sweepId, batchTimeoutMs), during?.(fleet, sweepId, t0)]);
    return { fleet, t0, sweepId, ready, cpu: cpuShare(before, cpuSample(fleet.procs)) };
  };

  try {
    const rows: ScalingRow[] = [];
    for (const n of o.workers) {
      const { fleet, t0, sweepId, ready, cpu } = await runBatch(n, {});
      const batch = await readBatch(fleet, sweepId, ready);
      const bad = incompleteRuns(batch, o.epochs);
      if (bad.length > 0) throw new FoxhuntError('INTERNAL', `N=${n}: trials not completed exactly once: ${bad.join(', ')}`);
      const all = batch.runs.flatMap((r) => r.epochs);
      const end = Math.max(...all.map((e) => e.ts));
      const wallS = (end - t0) / 1000;
      const closed = await fleet.close(true);
      fleets.delete(fleet);
      rows.push({
        workers: n,
        bound: ready.map((h) => ({ gpu: h.gpuIndex, pid: h.pid })),
        trialEpochs: all.length,
        wallS,
        epochsPerMin: all.length / wallS * 60,
        speedup: 0,
        efficiency: 0,
        medianEpochMs: median(all.map((e) => e.ms).filter((x): x is number => x !== null)),
        busy: all.reduce((s, e) => s + (e.ms ?? 0), 0) / (n * (end - t0)),
        perWorker: batch.perWorker,
        cpu,
        stopExit: closed.stopExit,
        leftoverKeys: closed.leftoverKeys,
      });
      o.progress(`N=${n}: ${all.length} trial-epochs in ${wallS.toFixed(1)} s = ${(all.length / wallS * 60).toFixed(1)}/min`);
    }
    const base = rows.reduce((a, b) => (b.workers < a.workers ? b : a), rows[0] as ScalingRow);
    for (const r of rows) {
      r.speedup = r.epochsPerMin / base.epochsPerMin;
      r.efficiency = r.speedup / (r.workers / base.workers);
    }

    let kill: KillResult | null = null;
    if (o.killTest) kill = await killTest(o, runBatch, fleets);

    const cpu = cpus();
    return {
      date: new Date().toISOString(), commit: gitCommit(),
      host: { hostname: hostname(), cpus: cpu.length, cpuModel: cpu[0]?.model ?? '?', gpus: 'none (simulated)' },
      config: o.configPath, sets: ['gpu.threads=1', ...o.sets], trials: o.trials, epochs: o.epochs, launch: o.launch,
      batch: `sweep, ASHA off, halton agent.lr, concurrency ${o.trials}`,
      baseline: base.workers, rows, kill,
    };
  } finally {
    await Promise.allSettled([...fleets].map((f) => f.close(false)));
    rmSync(cacheDir, { recursive: true, force: true });
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

type RunBatch = (n: number, extraEnv: Record<string, string>,
  during?: (fleet: Fleet, sweepId: string, t0: number) => Promise<void>) => Promise<{ fleet: Fleet; t0: number; sweepId: string; ready: WorkerHeartbeat[]; cpu: CpuShare | null }>;

async function killTest(o: FleetBenchOptions, runBatch: RunBatch, fleets: Set<Fleet>): Promise<KillResult> {
  const n = 2;
  let victim: KillResult['victim'] | null = null;
  let killedAt = 0;
  let restartedPid: number | null = null;
  // Short locks so the killed worker's job is seen stalled and retried within seconds.
  const { fleet, sweepId, ready } = await runBatch(n, LOCK_ENV, async (f, id) => {
    const store = new SweepStore(o.redis, f.keys.prefix);
    const target = await until('the GPU 1 worker mid-trial', 120_000, async () => {
      if (f.closing || (await store.get(id))?.status === 'completed') throw new FoxhuntError('INTERNAL', 'kill test: the sweep ended before a worker could be killed mid-trial (give more --trials or --epochs)');
      const hb = await listWorkers(o.redis, f.keys);
      const pick = o.launch === 'supervisor' ? hb.find((h) => h.gpuIndex === 1) : hb.sort((a, b) => b.pid - a.pid)[0];
      return pick !== undefined && pick.state === 'busy' && pick.epoch !== null && pick.epoch >= 1 && pick.epoch < o.epochs ? pick : null;
    }, 50);
    process.kill(target.pid, 'SIGKILL');
    killedAt = Date.now();
    victim = { gpu: target.gpuIndex, pid: target.pid, runId: target.runId, epochAtKill: target.epoch ?? 0 };
    o.progress(`kill test: SIGKILL worker ${target.workerId} training ${target.runId} at epoch ${target.epoch}/${o.epochs}`);
    if (o.launch === 'supervisor') {
      const again = await until('the supervisor to restart the GPU 1 worker', 60_000, async () =>
        (await listWorkers(o.redis, f.keys)).find((h) => h.gpuIndex === target.gpuIndex && h.pid !== target.pid) ?? null);
      restartedPid = again.pid;
      o.progress(`kill test: the supervisor restarted GPU ${target.gpuIndex}'s worker as pid ${again.pid}`);
    }
  });
  const doneAt = Date.now();
  const v = victim as KillResult['victim'] | null;
  if (v === null) throw new FoxhuntError('INTERNAL', 'kill test: no worker was killed');
  const batch = await readBatch(fleet, sweepId, ready);
  const lost = incompleteRuns(batch, o.epochs);
  const vr = batch.runs.find((r) => r.runId === v.runId);
  const after = (vr?.epochs ?? []).filter((e) => e.epoch > v.epochAtKill);
  const closed = await fleet.close(true);
  fleets.delete(fleet);
  const nextCommit = Math.min(...after.map((e) => e.ts));
  return {
    workers: n, victim: v,
    finishedBy: [...new Set(after.map((e) => e.worker))],
    restartedPid,
    trials: batch.runs.length,
    completed: batch.runs.length - lost.length,
    lost,
    killToNextCommitS: Number.isFinite(nextCommit) ? (nextCommit - killedAt) / 1000 : Number.NaN,
    killToDoneS: (doneAt - killedAt) / 1000,
    perWorker: batch.perWorker,
    ok: lost.length === 0 && batch.runs.length === o.trials && after.length === o.epochs - v.epochAtKill,
    leftoverKeys: closed.leftoverKeys,
  };
}

function pad(s: string, n: number, right = false): string {
  return right ? s.padStart(n) : s.padEnd(n);
}

function workerLabel(w: WorkerShare): string {
  return `${w.gpu === null ? 'cpu' : `gpu${w.gpu}`}/${w.pid}`;
}

export function formatFleetBench(r: FleetBenchResult): string {
  const lines: string[] = [];
  lines.push(`fleet scaling, CPU simulation: N CPU workers stand in for N GPUs (${r.launch === 'supervisor' ? 'foxhunt-worker --gpus all, FOXHUNT_TEST_GPUS=N' : 'N x foxhunt-worker --cpu'})`);
  lines.push(`host ${r.host.hostname}: ${r.host.cpus} CPU cores (${r.host.cpuModel}), GPUs ${r.host.gpus}; commit ${r.commit ?? 'n/a'}; ${r.date}`);
  lines.push(`batch: ${r.trials} trials x ${r.epochs} epochs (${r.batch}); config ${r.config} --set ${r.sets.join(' --set ')}`);
  if (r.rows.some((x) => x.workers > r.host.cpus)) lines.push(`note: this host has ${r.host.cpus} cores, so N > ${r.host.cpus} cannot scale (one core per simulated GPU)`);
  const head = ['workers', 'bound (gpu=pid)', 'trial-epochs', 'wall s', 'trial-epochs/min', 'speedup', 'efficiency', 'epoch ms (median)', 'busy', 'cores ours/other', 'runs/epochs per worker'];
  const rows = r.rows.map((x) => [
    String(x.workers),
    x.bound.map((b) => `${b.gpu ?? 'cpu'}=${b.pid}`).join(' '),
    String(x.trialEpochs),
    x.wallS.toFixed(1),
    x.epochsPerMin.toFixed(1),
    `${x.speedup.toFixed(2)}x`,
    `${(x.efficiency * 100).toFixed(0)}%`,
    x.medianEpochMs.toFixed(0),
    `${(x.busy * 100).toFixed(0)}%`,
    x.cpu === null ? 'n/a' : `${x.cpu.fleet.toFixed(2)} / ${x.cpu.other.toFixed(2)}`,
    x.perWorker.map((w) => `${workerLabel(w)}:${w.runs}/${w.epochs}`).join(' '),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  lines.push(head.map((h, i) => pad(h, widths[i] ?? 0)).join('  '));
  for (const row of rows) lines.push(row.map((c, i) => pad(c, widths[i] ?? 0, i > 1 && i < 10)).join('  '));
  lines.push(`efficiency = speedup / (N / ${r.baseline}), against N=${r.baseline}; busy = native epoch time / (N x wall); stop exit codes ${r.rows.map((x) => x.stopExit ?? 'killed').join(', ')}; keys left ${r.rows.reduce((s, x) => s + x.leftoverKeys, 0)}`);
  const busyHost = r.rows.filter((x) => x.cpu !== null && x.cpu.other > 0.25);
  if (busyHost.length > 0) {
    lines.push(`warning: other work used > 0.25 of a core during N=${busyHost.map((x) => x.workers).join(', N=')} (cores column): those rows understate the scaling`);
  }
  const k = r.kill;
  if (k !== null) {
    lines.push(`kill test (N=${k.workers}): SIGKILL of ${k.victim.gpu === null ? 'cpu' : `gpu${k.victim.gpu}`} worker pid ${k.victim.pid} while it trained ${k.victim.runId} at epoch ${k.victim.epochAtKill}/${r.epochs}`);
    lines.push(`  ${k.completed}/${k.trials} trials completed with every epoch exactly once${k.lost.length > 0 ? `; NOT: ${k.lost.join(', ')}` : ''}; ` +
      `${k.victim.runId} resumed ${k.killToNextCommitS.toFixed(1)} s after the kill on ${k.finishedBy.map((w) => workerLabel({ workerId: w, ...parseWorkerId(w), runs: 0, epochs: 0 })).join(', ')}; ` +
      `sweep completed ${k.killToDoneS.toFixed(1)} s after the kill`);
    lines.push(`  ${k.restartedPid !== null ? `supervisor restarted that GPU's worker as pid ${k.restartedPid}; ` : ''}runs/epochs per worker: ${k.perWorker.map((w) => `${workerLabel(w)}:${w.runs}/${w.epochs}`).join(' ')}; keys left ${k.leftoverKeys}`);
    lines.push(`  ${k.ok ? 'PASS: no trial lost' : 'FAIL'}`);
  }
  return lines.join('\n');
}
