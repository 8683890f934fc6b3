/**
 * The fleet's Lua scripts (src/redis/lua/*.lua), one typed function per script. Scripts run through
 * EVALSHA with a fallback to EVAL (ioredis defineCommand), so a restarted Redis just reloads them.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';

const LUA_DIR = join(dirname(fileURLToPath(import.meta.url)), 'lua');

function lua(name: string): string {
  return readFileSync(join(LUA_DIR, `${name}.lua`), 'utf8');
}

const COMMIT_EPOCH = lua('commit_epoch');

export type CommitReason = 'ok' | 'lost_lock' | 'no_run' | 'ended' | 'duplicate' | 'gap';

export interface CommitResult {
  ok: boolean;
  reason: CommitReason;
  committedEpoch: number;
}

export interface CommitArgs {
  keys: { record: string; epochs: string; ckpts: string; jobLock: string };
  token: string;
  epoch: number;
  scalarsJson: string;
  workerId: string;
  nowMs: number;
  /** '' when the epoch has no checkpoint */
  checkpointMetaJson: string;
  nonce: string;
  chunks: number;
  chunkBase: string;
  keepLast: number;
  valSharpe: number | null;
  statusAfter: 'running' | 'completed';
}

interface ScriptedRedis {
  fhCommitEpoch(...args: (string | number)[]): Promise<[number, string, number]>;
}

function ensureDefined(redis: Redis): ScriptedRedis {
  const r = redis as Redis & Partial<ScriptedRedis>;
  if (typeof r.fhCommitEpoch !== 'function') {
    redis.defineCommand('fhCommitEpoch', { numberOfKeys: 4, lua: COMMIT_EPOCH });
  }
  return redis as unknown as ScriptedRedis;
}

/** Run commit_epoch.lua (see its header for the contract). */
export async function commitEpochScript(redis: Redis, a: CommitArgs): Promise<CommitResult> {
  const r = ensureDefined(redis);
  const [ok, reason, committed] = await r.fhCommitEpoch(
    a.keys.record, a.keys.epochs, a.keys.ckpts, a.keys.jobLock,
    a.token, a.epoch, a.scalarsJson, a.workerId, a.nowMs, a.checkpointMetaJson, a.nonce, a.chunks,
    a.chunkBase, a.keepLast, a.valSharpe === null ? '' : String(a.valSharpe), a.statusAfter,
  );
  return { ok: ok === 1, reason: reason as CommitReason, committedEpoch: Number(committed) };
}
