/**
 * Job data schemas (zod, strict), validated by the producer before enqueueing and by the worker
 * before doing anything. An invalid job fails at once, never retried, with a reason naming the
 * field, e.g. `data.config.agent.lr: expected number, received string`.
 *
 *   epochs      { runId, epochs (target total epochs), config? (new runs only), sweepId? }
 *   precompute  { config }
 *
 * No secrets travel in job data: the schemas admit only run ids, epoch counts and run configs.
 * Data paths inside configs must stay under the data root (FOXHUNT_DATA_ROOT).
 */
import { resolve } from 'node:path';
import { z } from 'zod';
import { RunConfigSchema } from '../config/schema.js';
import type { RunConfig } from '../config/schema.js';
import { resolvePathInDataRoot } from '../data/paths.js';
import { FoxhuntError } from '../errors.js';
import { RUN_ID_PATTERN } from '../redis/keys.js';
import { JOB_EPOCHS, JOB_PRECOMPUTE } from './names.js';

export const RunIdSchema = z.string().regex(RUN_ID_PATTERN, 'run id: letters, digits, ".", "_", "-" (max 128)');

export const EpochsJobSchema = z.strictObject({
  runId: RunIdSchema.describe('the run to train'),
  epochs: z.number().int().positive().max(1_000_000).describe('target total epochs of the run'),
  config: RunConfigSchema.optional().describe('the run config (a new run only)'),
  sweepId: z.string().regex(RUN_ID_PATTERN).optional().describe('the sweep this run is a trial of'),
});

export const PrecomputeJobSchema = z.strictObject({
  config: RunConfigSchema.describe('the run config whose features to precompute'),
});

export type EpochsJobData = z.infer<typeof EpochsJobSchema>;
export type EpochsJobInput = z.input<typeof EpochsJobSchema>;
export type PrecomputeJobData = z.infer<typeof PrecomputeJobSchema>;
export type PrecomputeJobInput = z.input<typeof PrecomputeJobSchema>;

function describeIssue(issue: z.core.$ZodIssue): string[] {
  const path = ['data', ...issue.path.map(String)].join('.');
  if (issue.code === 'unrecognized_keys') return issue.keys.map((k) => `${path}.${k}: unknown key`);
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) return [`${path}: required (${issue.expected})`];
  return [`${path}: ${issue.message.replace(/^Invalid input: /, '')}`];
}

/** A zod error as one JOB_INVALID error: every issue on its own line, the first as `where`. */
export function jobErrorFrom(err: z.ZodError, jobName: string): FoxhuntError {
  const lines = err.issues.flatMap(describeIssue);
  const first = lines[0] ?? 'data';
  const where = first.slice(0, first.indexOf(':'));
  const rest = [first.slice(where.length + 2), ...lines.slice(1)].join('; ');
  return new FoxhuntError('JOB_INVALID', `${rest} (invalid ${jobName} job)`, { where });
}

/**
 * The data root (FOXHUNT_DATA_ROOT, default ./data). Config paths are relative to it and may not
 * leave it (`..`, absolute paths elsewhere, symlinks out).
 */
export function dataRoot(): string {
  return resolve(process.env['FOXHUNT_DATA_ROOT'] || 'data');
}

/** Throws PATH_OUTSIDE_DATA_ROOT naming the field when a data path escapes the root. */
export function checkDataPaths(cfg: RunConfig, root: string = dataRoot(), fieldPrefix = 'data.config'): void {
  const paths: [string, string][] = [];
  if (cfg.data.path !== undefined) paths.push([`${fieldPrefix}.data.path`, cfg.data.path]);
  (cfg.data.paths ?? []).forEach((p, i) => paths.push([`${fieldPrefix}.data.paths.${i}`, p]));
  for (const [field, p] of paths) {
    try {
      resolvePathInDataRoot(root, p);
    } catch (err) {
      const message = err instanceof FoxhuntError ? err.message.replace(/^data\.path: /, '') : String(err);
      throw new FoxhuntError('PATH_OUTSIDE_DATA_ROOT', message, { where: field, cause: err });
    }
  }
}

export function parseEpochsJob(data: unknown, root?: string): EpochsJobData {
  const r = EpochsJobSchema.safeParse(data);
  if (!r.success) throw jobErrorFrom(r.error, JOB_EPOCHS);
  if (r.data.config !== undefined) checkDataPaths(r.data.config, root);
  return r.data;
}

export function parsePrecomputeJob(data: unknown, root?: string): PrecomputeJobData {
  const r = PrecomputeJobSchema.safeParse(data);
  if (!r.success) throw jobErrorFrom(r.error, JOB_PRECOMPUTE);
  checkDataPaths(r.data.config, root);
  return r.data;
}
