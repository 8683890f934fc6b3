/**
 * The worker's handle on its trainer child process (worker/child.ts): start it for one job,
 * request epochs one at a time, read back each epoch's checkpoint, stop it. The parent's event
 * loop never waits on native work, so BullMQ lock renewal and heartbeats keep running.
 *
 * A child that dies (signal or exit) rejects the pending request with TRAINER_CRASHED (retryable);
 * an error the child reports keeps its catalogue code (so bad configs are not retried).
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, FoxhuntError } from '../src/errors.js';
import type { ErrorCode } from '../src/errors.js';
import type { Scalars } from '../src/trainer/scalars.js';
import type { ChildMessage, ChildTrainerInfo, ParentMessage } from './protocol.js';

const CHILD = join(dirname(fileURLToPath(import.meta.url)), 'child.ts');

export interface TrainerProcessOptions {
  /** GPU index for CUDA_VISIBLE_DEVICES; null on the CPU backend. */
  gpuIndex: number | null;
  backend: 'cpu' | 'cuda';
}

export interface ChildEpoch {
  epoch: number;
  scalars: Scalars;
  checkpoint: Buffer;
}

function codeOf(code: string): ErrorCode {
  return Object.hasOwn(ERROR_CODES, code) ? code as ErrorCode : 'INTERNAL';
}

export class TrainerProcess {
  readonly #child: ChildProcess;
  readonly #tmpDir: string;
  #pending: { resolve(m: ChildMessage): void; reject(e: Error): void } | null = null;
  #exited: FoxhuntError | null = null;
  #closed = false;

  constructor(readonly opts: TrainerProcessOptions) {
    this.#tmpDir = mkdtempSync(join(tmpdir(), 'foxhunt-trainer-'));
    const env: NodeJS.ProcessEnv = { ...process.env };
    if (opts.gpuIndex !== null) env['CUDA_VISIBLE_DEVICES'] = String(opts.gpuIndex);
    this.#child = fork(CHILD, [], {
      execArgv: ['--import', 'tsx'],
      env,
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.#child.on('message', (raw) => {
      const p = this.#pending;
      this.#pending = null;
      p?.resolve(raw as ChildMessage);
    });
    this.#child.on('exit', (code, signal) => {
      const how = signal !== null ? `signal ${signal}` : `exit code ${code ?? '?'}`;
      this.#exited = new FoxhuntError('TRAINER_CRASHED', `the trainer process (pid ${this.#child.pid ?? '?'}) died: ${how}`);
      const p = this.#pending;
      this.#pending = null;
      if (p !== null) p.reject(this.#closed ? new FoxhuntError('INTERNAL', 'trainer closed') : this.#exited);
      rmSync(this.#tmpDir, { recursive: true, force: true });
    });
    this.#child.on('error', () => undefined);
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  #request(msg: ParentMessage): Promise<ChildMessage> {
    if (this.#exited !== null) return Promise.reject(this.#exited);
    if (this.#pending !== null) return Promise.reject(new FoxhuntError('INTERNAL', 'trainer process is busy'));
    return new Promise<ChildMessage>((resolve, reject) => {
      this.#pending = { resolve, reject };
      this.#child.send(msg, (err) => {
        if (err && this.#pending !== null) {
          this.#pending = null;
          reject(this.#exited ?? new FoxhuntError('TRAINER_CRASHED', `cannot reach the trainer process: ${err.message}`));
        }
      });
    }).then((reply) => {
      if (reply.type === 'error') throw new FoxhuntError(codeOf(reply.code), reply.message);
      return reply;
    });
  }

  /** Creates the trainer in the child (and loads `checkpoint` if given). */
  async init(config: unknown, checkpoint: Buffer | null): Promise<ChildTrainerInfo> {
    let checkpointPath: string | null = null;
    if (checkpoint !== null) {
      checkpointPath = join(this.#tmpDir, 'resume.ckpt');
      await writeFile(checkpointPath, checkpoint);
    }
    const reply = await this.#request({ type: 'init', config, checkpointPath, backend: this.opts.backend, tmpDir: this.#tmpDir });
    if (checkpointPath !== null) await rm(checkpointPath, { force: true });
    if (reply.type !== 'ready') throw new FoxhuntError('INTERNAL', `unexpected reply ${reply.type} to init`);
    return reply.info;
  }

  /** Runs one epoch; returns its scalars and the checkpoint taken after it. */
  async runEpoch(): Promise<ChildEpoch> {
    const reply = await this.#request({ type: 'epoch' });
    if (reply.type !== 'epoch') throw new FoxhuntError('INTERNAL', `unexpected reply ${reply.type} to epoch`);
    const checkpoint = await readFile(reply.checkpointPath);
    await rm(reply.checkpointPath, { force: true });
    return { epoch: reply.epoch, scalars: reply.scalars, checkpoint };
  }

  async precompute(config: unknown): Promise<{ cacheKey: string; cacheHit: boolean; bars: number }> {
    const reply = await this.#request({ type: 'precompute', config });
    if (reply.type !== 'precomputed') throw new FoxhuntError('INTERNAL', `unexpected reply ${reply.type} to precompute`);
    return { cacheKey: reply.cacheKey, cacheHit: reply.cacheHit, bars: reply.bars };
  }

  /** Stops the child (politely, then by force after `graceMs`). Idempotent. */
  async close(graceMs = 5000): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#exited !== null) return;
    const exited = new Promise<void>((resolve) => this.#child.once('exit', () => resolve()));
    try {
      if (this.#child.connected) this.#child.disconnect();
    } catch {
      // already gone
    }
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /** Kills the child at once (the job is being abandoned). */
  kill(): void {
    this.#closed = true;
    if (this.#exited === null) this.#child.kill('SIGKILL');
  }
}
