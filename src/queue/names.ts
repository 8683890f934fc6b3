/**
 * Queue and job names (DESIGN §8). The queue names can be overridden per process through
 * FOXHUNT_EPOCHS_QUEUE / FOXHUNT_SWEEPS_QUEUE (tests use random ones).
 */
export const EPOCHS_QUEUE = 'foxhunt-epochs';
export const SWEEPS_QUEUE = 'foxhunt-sweeps';

export const JOB_EPOCHS = 'epochs';
export const JOB_PRECOMPUTE = 'precompute';
export type EpochsQueueJobName = typeof JOB_EPOCHS | typeof JOB_PRECOMPUTE;

export function epochsQueueName(): string {
  return process.env['FOXHUNT_EPOCHS_QUEUE'] || EPOCHS_QUEUE;
}

export function sweepsQueueName(): string {
  return process.env['FOXHUNT_SWEEPS_QUEUE'] || SWEEPS_QUEUE;
}
