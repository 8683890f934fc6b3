/**
 * Messages between the worker (parent) and its trainer child process (worker/child.ts), over the
 * fork IPC channel. The child does one thing at a time and answers every request exactly once.
 * Checkpoints travel as files in a private temp directory (IPC stays small for any size).
 */
import type { Scalars } from '../src/trainer/scalars.js';

export type ParentMessage =
  | { type: 'init'; config: unknown; checkpointPath: string | null; backend: 'cpu' | 'cuda'; tmpDir: string }
  | { type: 'epoch' }
  | { type: 'precompute'; config: unknown }
  | { type: 'close' };

export interface ChildTrainerInfo {
  backend: string;
  deviceName: string;
  libSha256: string;
  /** What the native trainer runs (fh_info.engine), e.g. "cuda bf16, graphs, kernel backward". */
  engine: string;
  batchSize: number;
  configHash: string;
}

export type ChildMessage =
  | { type: 'ready'; info: ChildTrainerInfo }
  | { type: 'epoch'; epoch: number; scalars: Scalars; checkpointPath: string; checkpointBytes: number }
  | { type: 'precomputed'; cacheKey: string; cacheHit: boolean; bars: number }
  | { type: 'error'; code: string; message: string; where: string | null };
