/**
 * The error catalogue: every error the product raises on purpose has a stable code here, and the
 * retry policy of each code lives in this one table (bad input and divergence never retry;
 * infrastructure faults retry with backoff).
 */

export const ERROR_CODES = {
  CONFIG_INVALID: { retryable: false, summary: 'a config field is missing, unknown or out of range' },
  DATA_INVALID: { retryable: false, summary: 'a market data file or array is malformed' },
  JOB_INVALID: { retryable: false, summary: 'job data failed validation' },
  PATH_OUTSIDE_DATA_ROOT: { retryable: false, summary: 'a data path escapes the configured data root' },
  CHECKPOINT_INVALID: { retryable: false, summary: 'a checkpoint is truncated, corrupt or does not match the run' },
  DIVERGED: { retryable: false, summary: 'the loss or gradient became NaN or Inf' },
  UNSUPPORTED: { retryable: false, summary: 'the requested backend or feature is not available here' },
  NOT_FOUND: { retryable: false, summary: 'a run, sweep or checkpoint does not exist' },
  DEVICE_FAULT: { retryable: true, summary: 'a CUDA or device error' },
  OUT_OF_MEMORY: { retryable: true, summary: 'a host or device allocation failed' },
  TRAINER_CRASHED: { retryable: true, summary: 'the trainer process died' },
  REDIS_UNAVAILABLE: { retryable: true, summary: 'Redis did not answer' },
  LOST_LOCK: { retryable: true, summary: 'this worker no longer holds the job' },
  INTERNAL: { retryable: true, summary: 'an invariant did not hold (a bug)' },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class FoxhuntError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  /** Where the error points: a config key path, "file:line", a job field, ... */
  readonly where: string | undefined;

  constructor(code: ErrorCode, message: string, options: { where?: string; cause?: unknown } = {}) {
    super(options.where !== undefined ? `${options.where}: ${message}` : message,
      options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'FoxhuntError';
    this.code = code;
    this.retryable = ERROR_CODES[code].retryable;
    this.where = options.where;
  }
}

export function isRetryable(err: unknown): boolean {
  return err instanceof FoxhuntError ? err.retryable : true;
}

export function errorCodeOf(err: unknown): ErrorCode {
  return err instanceof FoxhuntError ? err.code : 'INTERNAL';
}
