/**
 * Checkpoints in Redis: a checkpoint is split into chunks (CHUNK_BYTES each) written as staged keys
 * with a TTL, then made persistent by the fenced commit (commit_epoch.lua), which also records its
 * meta and trims old ones (the last K and the best are kept). A staged checkpoint whose commit was
 * refused is deleted by the writer, or expires on its own if the writer died.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { FoxhuntError } from '../errors.js';
import { Keys } from './keys.js';

export const CHUNK_BYTES = 8 * 1024 * 1024;
export const STAGED_TTL_S = 6 * 3600;

export interface CheckpointMeta {
  epoch: number;
  size: number;
  chunks: number;
  sha256: string;
  configHash: string;
  nonce: string;
  createdMs: number;
}

export interface StagedCheckpoint {
  meta: CheckpointMeta;
  chunkBase: string;
}

export function sha256Hex(buf: Buffer): string {
  return createHash('sha256').update(buf).digest('hex');
}

export class CheckpointStore {
  constructor(readonly redis: Redis, readonly keys: Keys = new Keys(), readonly chunkBytes = CHUNK_BYTES) {}

  /** Write a checkpoint's chunks as staged (expiring) keys; the commit makes them permanent. */
  async stage(runId: string, epoch: number, buf: Buffer, configHash: string, nowMs = Date.now()): Promise<StagedCheckpoint> {
    const k = this.keys.run(runId);
    const nonce = randomBytes(6).toString('hex');
    const chunks = Math.max(1, Math.ceil(buf.length / this.chunkBytes));
    const p = this.redis.pipeline();
    for (let i = 0; i < chunks; i++) {
      p.set(k.chunk(epoch, nonce, i), buf.subarray(i * this.chunkBytes, (i + 1) * this.chunkBytes), 'EX', STAGED_TTL_S);
    }
    await p.exec();
    return {
      meta: { epoch, size: buf.length, chunks, sha256: sha256Hex(buf), configHash, nonce, createdMs: nowMs },
      chunkBase: k.chunkBase,
    };
  }

  /** Delete a staged checkpoint whose commit was refused. */
  async discard(runId: string, meta: CheckpointMeta): Promise<void> {
    const k = this.keys.run(runId);
    const keys = Array.from({ length: meta.chunks }, (_, i) => k.chunk(meta.epoch, meta.nonce, i));
    if (keys.length > 0) await this.redis.del(...keys);
  }

  /** Meta of every retained checkpoint, oldest first. */
  async list(runId: string): Promise<CheckpointMeta[]> {
    const h = await this.redis.hgetall(this.keys.run(runId).ckpts);
    return Object.values(h).map((v) => JSON.parse(v) as CheckpointMeta).sort((a, b) => a.epoch - b.epoch);
  }

  /** Meta of epoch `epoch`'s checkpoint, or the latest when omitted; null when none. */
  async meta(runId: string, epoch?: number): Promise<CheckpointMeta | null> {
    if (epoch !== undefined) {
      const v = await this.redis.hget(this.keys.run(runId).ckpts, String(epoch));
      return v === null ? null : JSON.parse(v) as CheckpointMeta;
    }
    const all = await this.list(runId);
    return all[all.length - 1] ?? null;
  }

  /** Read and verify (size, sha256) a checkpoint. */
  async read(runId: string, meta: CheckpointMeta): Promise<Buffer> {
    const k = this.keys.run(runId);
    const p = this.redis.pipeline();
    for (let i = 0; i < meta.chunks; i++) p.getBuffer(k.chunk(meta.epoch, meta.nonce, i));
    const res = (await p.exec()) ?? [];
    const parts: Buffer[] = [];
    for (let i = 0; i < meta.chunks; i++) {
      const [err, v] = res[i] ?? [null, null];
      if (err || !(v instanceof Buffer)) {
        throw new FoxhuntError('CHECKPOINT_INVALID', `checkpoint of epoch ${meta.epoch}: chunk ${i} of ${meta.chunks} is missing`, { where: `run ${runId}` });
      }
      parts.push(v);
    }
    const buf = Buffer.concat(parts);
    if (buf.length !== meta.size || sha256Hex(buf) !== meta.sha256) {
      throw new FoxhuntError('CHECKPOINT_INVALID', `checkpoint of epoch ${meta.epoch}: size or sha256 does not match its meta`, { where: `run ${runId}` });
    }
    return buf;
  }
}
