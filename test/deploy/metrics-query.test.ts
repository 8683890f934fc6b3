/**
 * The KEDA trigger's PromQL query, evaluated against what the dashboard really exports: a queue on
 * the local Redis holds jobs in every state, the dashboard's FleetMetrics renders /metrics, and the
 * query (with its queue matcher pointed at the test's queue) must count exactly the jobs that need
 * a worker: active, waiting, prioritized and delayed ones, and not completed or failed ones.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Queue, Worker } from 'bullmq';
import type { DashboardData } from '../../src/dashboard/data.js';
import { FleetMetrics } from '../../src/dashboard/metrics.js';
import { EPOCHS_QUEUE } from '../../src/queue/names.js';
import { at, loadK8s } from './load.js';

const connection = { host: '127.0.0.1', port: 6379, maxRetriesPerRequest: null };

interface Matcher { label: string; op: '=' | '=~' | '!=' | '!~'; value: string }

/** Parses `sum(metric{l="v",l=~"re",...})`, the one PromQL shape our scaler uses. */
function parseQuery(q: string): { metric: string; matchers: Matcher[] } {
  const m = /^sum\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{(.*)\}\s*\)$/.exec(q.trim());
  if (!m) throw new Error(`query is not sum(metric{...}): ${q}`);
  const matchers: Matcher[] = [];
  for (const part of (m[2] ?? '').matchAll(/\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?/g)) {
    matchers.push({ label: part[1] ?? '', op: part[2] as Matcher['op'], value: (part[3] ?? '').replace(/\\(.)/g, '$1') });
  }
  return { metric: m[1] ?? '', matchers };
}

/** Sums the samples of the Prometheus text exposition that the matchers select (regexes anchored, as in PromQL). */
function evaluate(text: string, metric: string, matchers: Matcher[]): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== metric) continue;
    const labels = new Map<string, string>();
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels.set(l[1] ?? '', l[2] ?? '');
    const ok = matchers.every(({ label, op, value }) => {
      const v = labels.get(label) ?? '';
      if (op === '=') return v === value;
      if (op === '!=') return v !== value;
      const re = new RegExp(`^(?:${value})$`);
      return op === '=~' ? re.test(v) : !re.test(v);
    });
    if (ok) sum += Number(m[3]);
  }
  return sum;
}

const scaled = loadK8s().find((d) => d.obj['kind'] === 'ScaledObject');
const query = String(at(scaled?.obj, 'spec', 'triggers', 0, 'metadata', 'query'));

describe('the KEDA query on the dashboard\'s real /metrics', () => {
  const name = `fh-deploy-${randomUUID().slice(0, 8)}`;
  let queue: Queue;
  let worker: Worker;
  let text = '';
  let expected = 0;

  beforeAll(async () => {
    queue = new Queue(name, { connection });
    await queue.add('epochs', { n: 1 });
    await queue.add('epochs', { n: 2 });
    await queue.add('epochs', { n: 3 });
    await queue.add('epochs', { n: 4 }, { priority: 5 });
    await queue.add('epochs', { n: 5 }, { priority: 7 });
    await queue.add('epochs', { n: 6 }, { delay: 600_000 });
    worker = new Worker(name, undefined, { connection, autorun: false });
    const token = randomUUID();
    const failed = await worker.getNextJob(token);
    if (!failed) throw new Error('no job to fail');
    await failed.moveToFailed(new Error('deploy test'), token, false);
    const done = await worker.getNextJob(token);
    if (!done) throw new Error('no job to complete');
    await done.moveToCompleted('ok', token, false);
    const active = await worker.getNextJob(token);
    if (!active) throw new Error('no job to hold active');
    const counts = await queue.getJobCounts();
    expected = (counts['active'] ?? 0) + (counts['waiting'] ?? 0) + (counts['prioritized'] ?? 0) + (counts['delayed'] ?? 0);
    const stub = { workers: async () => [], runs: { list: async () => [], epochs: async () => [] } };
    const metrics = new FleetMetrics(stub as unknown as DashboardData, [queue]);
    text = await metrics.text();
  });

  afterAll(async () => {
    await worker?.close(true);
    await queue?.obliterate({ force: true });
    await queue?.close();
  });

  test('the query is on the epochs queue and its states are labels the dashboard exports', () => {
    const { metric, matchers } = parseQuery(query);
    expect(metric).toBe('foxhunt_queue_jobs');
    expect(matchers.find((m) => m.label === 'queue')).toEqual({ label: 'queue', op: '=', value: EPOCHS_QUEUE });
    const state = matchers.find((m) => m.label === 'state');
    expect(state?.op).toBe('=~');
    const exported = new Set([...text.matchAll(/^foxhunt_queue_jobs\{[^}]*state="([^"]+)"/gm)].map((m) => m[1]));
    for (const s of (state?.value ?? '').split('|')) expect(exported.has(s), `state "${s}" is not exported (have ${[...exported].join(', ')})`).toBe(true);
  });

  test('it counts every job that needs a worker and none that is finished', () => {
    // 6 jobs added, 1 failed, 1 completed: 4 need a worker (1 active, waiting/prioritized, 1 delayed).
    expect(expected).toBe(4);
    const { metric, matchers } = parseQuery(query);
    const ours = matchers.map((m) => (m.label === 'queue' ? { ...m, value: name } : m));
    expect(evaluate(text, metric, ours)).toBe(expected);
    // and not a single list: waiting alone undercounts
    expect(evaluate(text, metric, [{ label: 'queue', op: '=', value: name }, { label: 'state', op: '=', value: 'waiting' }])).toBeLessThan(expected);
  });
});
