/**
 * The error catalogue → BullMQ retry policy, in one place: non-retryable codes (bad input,
 * divergence, bad checkpoints) become UnrecoverableError (failed at once, never retried); the
 * rest are thrown as they are and retried with exponential backoff.
 */
import { UnrecoverableError } from 'bullmq';
import type { JobsOptions } from 'bullmq';
import { FoxhuntError, errorCodeOf, isRetryable } from '../errors.js';

export const DEFAULT_ATTEMPTS = 5;
export const DEFAULT_BACKOFF_MS = 2000;

/** Job options every producer uses for epochs and precompute jobs. */
export function defaultJobOptions(overrides: { attempts?: number; backoffMs?: number } = {}): JobsOptions {
  return {
    attempts: overrides.attempts ?? DEFAULT_ATTEMPTS,
    backoff: { type: 'exponential', delay: overrides.backoffMs ?? DEFAULT_BACKOFF_MS },
    removeOnComplete: { age: 7 * 24 * 3600, count: 10_000 },
    removeOnFail: { age: 30 * 24 * 3600 },
  };
}

/** The error to throw from a processor for `err`: UnrecoverableError when the code never retries. */
export function toJobError(err: unknown): Error {
  if (err instanceof UnrecoverableError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (!isRetryable(err)) {
    const e = new UnrecoverableError(`[${errorCodeOf(err)}] ${message}`);
    if (err instanceof Error && err.stack !== undefined) e.stack = err.stack;
    return e;
  }
  if (err instanceof FoxhuntError) {
    const e = new Error(`[${err.code}] ${message}`);
    e.name = 'FoxhuntError';
    return e;
  }
  return err instanceof Error ? err : new Error(message);
}
