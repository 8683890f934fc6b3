/**
 * ASHA over Redis: one typed method per Lua script (lua/rung.lua, lua/release.lua, lua/cancel.lua). Every trial
 * decides its own fate at its rungs with one atomic script, so there is no coordinator to fail.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import type { SweepKeys } from './keys.js';

const here = dirname(fileURLToPath(import.meta.url));
const COMMON_LUA = readFileSync(join(here, 'lua', 'common.lua'), 'utf8');
/** A script of lua/, behind the helpers of lua/common.lua. */
function script(name: string): string {
  return `${COMMON_LUA}\n${readFileSync(join(here, 'lua', `${name}.lua`), 'utf8')}`;
}
const RUNG_LUA = script('rung');
const RELEASE_LUA = script('release');
const CANCEL_LUA = script('cancel');

export type Goal = 'max' | 'min';

export interface RungDecision {
  decision: 'continue' | 'prune' | 'ended';
  rank: number;
  n: number;
  keep: number;
  /** Pending trials that took the slot a pruned trial freed: the caller enqueues them. */
  enqueue: string[];
  sweepDone: boolean;
}

export interface ReleaseResult {
  enqueue: string[];
  sweepDone: boolean;
  ended: boolean;
}

/** Goal-normalised score as Redis reads it: higher is better, null/NaN is the worst. */
export function scoreOf(metric: number | null | undefined, goal: Goal): string {
  if (metric === null || metric === undefined || !Number.isFinite(metric)) return '-inf';
  const s = goal === 'max' ? metric : -metric;
  return Object.is(s, -0) ? '0' : String(s);
}

export function metricText(metric: number | null | undefined): string {
  return metric === null || metric === undefined || !Number.isFinite(metric) ? 'null' : String(metric);
}

export async function decideAtRung(redis: Redis, keys: SweepKeys, args: {
  runId: string; rung: number; metric: number | null; goal: Goal; eta: number; concurrency: number; now?: number;
}): Promise<RungDecision> {
  const reply = await redis.eval(RUNG_LUA, 9,
    keys.record, keys.rung(args.rung), keys.decisions, keys.status, keys.active, keys.pending, keys.log,
    keys.epochs, keys.metric,
    args.runId, String(args.rung), scoreOf(args.metric, args.goal), String(args.eta), metricText(args.metric),
    String(args.concurrency), String(args.now ?? Date.now())) as [string, number, number, number, string[], number];
  const [decision, rank, n, keep, enqueue, done] = reply;
  return { decision: decision as RungDecision['decision'], rank, n, keep, enqueue, sweepDone: done === 1 };
}

export async function releaseTrial(redis: Redis, keys: SweepKeys, args: {
  runId: string | null; status: 'completed' | 'failed' | null; concurrency: number; now?: number;
}): Promise<ReleaseResult> {
  const reply = await redis.eval(RELEASE_LUA, 4, keys.record, keys.status, keys.active, keys.pending,
    args.runId ?? '', args.status ?? '', String(args.concurrency), String(args.now ?? Date.now())) as [string[], number, number];
  return { enqueue: reply[0], sweepDone: reply[1] === 1, ended: reply[2] === 1 };
}

export interface CancelResult {
  /** The sweep's status before the call: only a running sweep is cancelled. */
  before: string;
  /** The trials that held a slot (queued or training): the caller cancels their runs. */
  held: string[];
  /** Pending trials cancelled before they started. */
  pending: number;
}

/** Cancels a running sweep's state at once (lua/cancel.lua): no slot is filled again afterwards. */
export async function cancelSweepState(redis: Redis, keys: SweepKeys, now = Date.now()): Promise<CancelResult> {
  const reply = await redis.eval(CANCEL_LUA, 4, keys.record, keys.status, keys.active, keys.pending, String(now)) as
    [string, string[], number];
  return { before: reply[0], held: reply[1], pending: reply[2] };
}

export interface LoggedDecision {
  run: string;
  rung: number;
  metric: number | null;
  score: string;
  decision: 'continue' | 'prune';
  rank: number;
  n: number;
  keep: number;
  at: number;
}

/** The decisions in the order they were taken. */
export async function decisionLog(redis: Redis, keys: SweepKeys): Promise<LoggedDecision[]> {
  const rows = await redis.lrange(keys.log, 0, -1);
  return rows.map((r) => {
    const d = JSON.parse(r) as Omit<LoggedDecision, 'metric'> & { metric: string };
    return { ...d, metric: d.metric === 'null' ? null : Number(d.metric) };
  });
}
