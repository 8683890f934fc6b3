/**
 * Queue and job names (DESIGN §8). The queue names can be overridden per process through
 * FOXHUNT_EPOCHS_QUEUE / FOXHUNT_SWEEPS_QUEUE (tests use random ones). A fleet with its own key
 * prefix (FOXHUNT_PREFIX other than `fh`) gets its own queues too (`foxhunt-epochs-<prefix>`), so a
 * worker of one fleet never takes a job whose run record lives under another fleet's prefix.
 */
import { DEFAULT_PREFIX } from '../redis/keys.js';

export const EPOCHS_QUEUE = 'foxhunt-epochs';
export const SWEEPS_QUEUE = 'foxhunt-sweeps';

export const JOB_EPOCHS = 'epochs';
export const JOB_PRECOMPUTE = 'precompute';
export type EpochsQueueJobName = typeof JOB_EPOCHS | typeof JOB_PRECOMPUTE;

function forPrefix(base: string): string {
  return DEFAULT_PREFIX === 'fh' ? base : `${base}-${DEFAULT_PREFIX}`;
}

export function epochsQueueName(): string {
  return process.env['FOXHUNT_EPOCHS_QUEUE'] || forPrefix(EPOCHS_QUEUE);
}

export function sweepsQueueName(): string {
  return process.env['FOXHUNT_SWEEPS_QUEUE'] || forPrefix(SWEEPS_QUEUE);
}
