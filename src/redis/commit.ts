/**
 * Committing an epoch: stage the checkpoint chunks, then one fenced script moves scalars,
 * checkpoint pointer, status and best epoch together (src/redis/lua/commit_epoch.lua). A refused
 * commit deletes its staged chunks and changes nothing else.
 */
import type { Redis } from 'ioredis';
import { CheckpointStore } from './checkpoints.js';
import type { Keys } from './keys.js';
import { commitEpochScript } from './scripts.js';
import type { CommitResult } from './scripts.js';

export type { CommitReason, CommitResult } from './scripts.js';

export const DEFAULT_KEEP_LAST = 3;

export interface EpochCommit {
  runId: string;
  queueName: string;
  jobId: string;
  /** The BullMQ lock token this worker holds the job with. */
  token: string;
  epoch: number;
  scalars: Record<string, number | null>;
  checkpoint: Buffer | null;
  configHash: string;
  workerId: string;
  keepLast?: number;
  statusAfter: 'running' | 'completed';
}

export async function commitEpoch(redis: Redis, keys: Keys, c: EpochCommit): Promise<CommitResult> {
  const k = keys.run(c.runId);
  const store = new CheckpointStore(redis, keys);
  const now = Date.now();
  const staged = c.checkpoint !== null ? await store.stage(c.runId, c.epoch, c.checkpoint, c.configHash, now) : null;
  const sharpe = c.scalars['val/sharpe'];
  let res: CommitResult;
  try {
    res = await commitEpochScript(redis, {
      keys: { record: k.record, epochs: k.epochs, ckpts: k.ckpts, jobLock: keys.jobLock(c.queueName, c.jobId) },
      token: c.token,
      epoch: c.epoch,
      scalarsJson: JSON.stringify(c.scalars),
      workerId: c.workerId,
      nowMs: now,
      checkpointMetaJson: staged ? JSON.stringify(staged.meta) : '',
      nonce: staged?.meta.nonce ?? '',
      chunks: staged?.meta.chunks ?? 0,
      chunkBase: k.chunkBase,
      keepLast: Math.max(1, c.keepLast ?? DEFAULT_KEEP_LAST),
      valSharpe: typeof sharpe === 'number' && Number.isFinite(sharpe) ? sharpe : null,
      statusAfter: c.statusAfter,
    });
  } catch (err) {
    if (staged) await store.discard(c.runId, staged.meta).catch(() => undefined);
    throw err;
  }
  if (!res.ok && staged) await store.discard(c.runId, staged.meta);
  return res;
}
