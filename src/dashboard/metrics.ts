/**
 * Prometheus /metrics, the autoscaling signal: queue depth per queue and state (exactly BullMQ's
 * getJobCounts), epochs committed, the epoch-time histogram (from committed epochs'
 * time/total_ms) and workers by state. Everything is read from Redis at scrape time; committed
 * epochs are tailed from each run's stream with a per-run cursor, so each is counted once.
 */
import type { Queue } from 'bullmq';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { DashboardData } from './data.js';

export const WORKER_STATES = ['starting', 'idle', 'busy', 'stopping', 'quarantined', 'stale'] as const;
export const EPOCH_SECONDS_BUCKETS = [0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class FleetMetrics {
  readonly registry = new Registry();
  private readonly cursors = new Map<string, number>();
  private readonly committed: Counter;
  private readonly epochSeconds: Histogram;
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly data: DashboardData, private readonly queues: readonly Queue[]) {
    const self = this;
    new Gauge({
      name: 'foxhunt_queue_jobs',
      help: 'jobs per queue and state (BullMQ getJobCounts)',
      labelNames: ['queue', 'state'],
      registers: [this.registry],
      async collect() {
        this.reset();
        const counts = await Promise.all(self.queues.map(async (q) => [q.name, await q.getJobCounts()] as const));
        for (const [queue, c] of counts) {
          for (const [state, n] of Object.entries(c)) this.set({ queue, state }, n);
        }
      },
    });
    this.committed = new Counter({
      name: 'foxhunt_epochs_committed_total',
      help: 'epochs committed to Redis by the fleet',
      registers: [this.registry],
      async collect() { await self.tailEpochs(); },
    });
    this.epochSeconds = new Histogram({
      name: 'foxhunt_epoch_seconds',
      help: 'wall time of committed epochs (time/total_ms)',
      buckets: EPOCH_SECONDS_BUCKETS,
      registers: [this.registry],
      async collect() { await self.tailEpochs(); },
    });
    new Gauge({
      name: 'foxhunt_workers',
      help: 'workers by state (starting, idle, busy, stopping, quarantined; stale = no heartbeat for 30 s)',
      labelNames: ['state'],
      registers: [this.registry],
      async collect() {
        this.reset();
        const counts = new Map<string, number>(WORKER_STATES.map((s) => [s, 0]));
        for (const w of await self.data.workers()) counts.set(w.state, (counts.get(w.state) ?? 0) + 1);
        for (const [state, n] of counts) this.set({ state }, n);
      },
    });
  }

  /** Reads the epochs committed since the last scrape (serialised, so none is counted twice). */
  tailEpochs(): Promise<void> {
    this.tail = this.tail.then(() => this.readNewEpochs()).catch(() => undefined);
    return this.tail;
  }

  private async readNewEpochs(): Promise<void> {
    const runs = await this.data.runs.list(100_000);
    for (const run of runs) {
      const seen = this.cursors.get(run.runId) ?? 0;
      if (run.committedEpoch <= seen) continue;
      const entries = await this.data.runs.epochs(run.runId, seen);
      for (const e of entries) {
        this.committed.inc();
        const ms = e.scalars['time/total_ms'];
        if (typeof ms === 'number' && Number.isFinite(ms)) this.epochSeconds.observe(ms / 1000);
        this.cursors.set(run.runId, Math.max(this.cursors.get(run.runId) ?? 0, e.epoch));
      }
    }
  }

  async text(): Promise<string> {
    return this.registry.metrics();
  }
}
