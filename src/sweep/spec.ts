/**
 * The sweep spec: a TOML or JSON file validated by zod (strict; an invalid spec fails with the key
 * path), and its expansion into trials: base config + fixed `set` overrides + one sampled point of
 * the search space, validated as a RunConfig and deduplicated by config hash.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import { applySets, configHash, parseRunConfig, readToml } from '../config/load.js';
import { defaultRunConfig } from '../config/schema.js';
import type { RunConfig } from '../config/schema.js';
import { FoxhuntError } from '../errors.js';
import { gridSize, sampleSpace } from './sampler.js';
import type { ParamValue, Params } from './sampler.js';

const scalar = z.union([z.number().finite(), z.string(), z.boolean()]);
const finite = () => z.number().finite();

export const DimensionSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('choice').describe('one of the values, each equally likely'),
    values: z.array(scalar).min(1),
  }),
  z.strictObject({
    kind: z.literal('grid').describe('every value in turn (cycled by random/halton samplers)'),
    values: z.array(scalar).min(1),
  }),
  z.strictObject({
    kind: z.literal('uniform').describe('uniform on [low, high)'),
    low: finite(), high: finite(),
    points: z.number().int().positive().optional().describe('grid sampler: evenly spaced points'),
  }),
  z.strictObject({
    kind: z.literal('log_uniform').describe('log-uniform on [low, high), low > 0'),
    low: finite().positive(), high: finite().positive(),
    points: z.number().int().positive().optional().describe('grid sampler: log-spaced points'),
  }),
  z.strictObject({
    kind: z.literal('int').describe('integer uniform on [low, high] inclusive'),
    low: z.number().int(), high: z.number().int(),
    points: z.number().int().positive().optional().describe('grid sampler: evenly spaced integers'),
  }),
]).superRefine((d, ctx) => {
  if ((d.kind === 'uniform' || d.kind === 'log_uniform') && !(d.high > d.low)) {
    ctx.addIssue({ code: 'custom', message: 'high must be greater than low', path: ['high'] });
  }
  if (d.kind === 'int' && d.high < d.low) {
    ctx.addIssue({ code: 'custom', message: 'high must be >= low', path: ['high'] });
  }
});
export type Dimension = z.infer<typeof DimensionSchema>;

export const SamplerSchema = z.strictObject({
  kind: z.enum(['grid', 'random', 'halton']).default('halton')
    .describe('grid: cartesian product; random: seeded uniform; halton: seeded quasi-random'),
  seed: z.number().int().nonnegative().default(0).describe('seed of the random/halton sampler'),
});
export type SamplerSpec = z.infer<typeof SamplerSchema>;

export const AshaSchema = z.strictObject({
  enabled: z.boolean().default(true).describe('prune weak trials at rungs (off: every trial runs max_epochs)'),
  grace_epochs: z.number().int().positive().default(1).describe('epochs before the first rung'),
  eta: z.number().int().min(2).default(3).describe('reduction factor: the top 1/eta continue at each rung'),
});

const METRIC = /^(epoch|[a-z_]+\/[a-z0-9_]+)$/;

export const SweepSpecSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,48}$/, 'letters, digits, _ . - (at most 48)').optional()
    .describe('short name, part of the sweep id'),
  base: z.string().min(1).optional().describe('base run config (TOML), relative to the spec file; defaults when absent'),
  set: z.union([z.array(z.string()), z.record(z.string(), scalar)]).default([])
    .describe('fixed overrides: ["a.b=1", ...] like --set, or a table { "a.b" = 1 }'),
  metric: z.string().regex(METRIC, 'a scalar name such as val/sharpe').default('val/sharpe')
    .describe('the epoch scalar trials are ranked by'),
  goal: z.enum(['max', 'min']).default('max').describe('maximise or minimise the metric'),
  trials: z.number().int().positive().max(10000).optional().describe('number of trials (grid: defaults to the grid size)'),
  max_epochs: z.number().int().positive().max(100000).describe('epochs of a trial that is never pruned'),
  concurrency: z.number().int().positive().default(4).describe('most trials queued or training at once'),
  sampler: SamplerSchema.prefault({}),
  asha: AshaSchema.prefault({}),
  space: z.record(z.string(), DimensionSchema).describe('search space: config key path → dimension'),
});
export type SweepSpec = z.infer<typeof SweepSpecSchema>;

/** A spec with its file resolved: what a sweep record stores. */
export interface ResolvedSweepSpec extends SweepSpec {
  trials: number;
  rungs: number[];
  /** Base config table after `set` (before defaults), so a sweep never rereads files. */
  baseTable: Record<string, unknown>;
  source: string;
}

export interface PlannedTrial {
  index: number;
  params: Params;
  config: RunConfig;
  configHash: string;
}

function fail(source: string, path: readonly PropertyKey[], message: string): never {
  const where = formatPath(path);
  const reason = message.startsWith(':') ? message.slice(1).trim() : `${where} ${message}`;
  throw new FoxhuntError('CONFIG_INVALID', `invalid sweep spec (${source}): ${reason}`, { where });
}

/** `space["agent.lr"].low`: a key path readable even when keys hold dots. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) {
    const s = String(p);
    if (typeof p === 'number') out += `[${s}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(s)) out += out === '' ? s : `.${s}`;
    else out += `[${JSON.stringify(s)}]`;
  }
  return out === '' ? '(root)' : out;
}

/** Rungs of ASHA: grace·η^k for k = 0, 1, ... strictly below max_epochs. */
export function ashaRungs(grace: number, eta: number, maxEpochs: number): number[] {
  const rungs: number[] = [];
  for (let r = grace; r < maxEpochs; r *= eta) rungs.push(r);
  return rungs;
}

function leafPaths(v: unknown, prefix: string, out: Set<string>): Set<string> {
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) leafPaths(x, prefix === '' ? k : `${prefix}.${k}`, out);
  } else {
    out.add(prefix);
  }
  return out;
}

/** Config key paths a space may search: every leaf of the RunConfig (tables excluded). */
export const CONFIG_KEYS: ReadonlySet<string> = leafPaths(defaultRunConfig(), '', new Set<string>([
  'data.path',
]));

function setPath(table: Record<string, unknown>, path: string, value: ParamValue): void {
  const parts = path.split('.');
  let cur = table;
  for (const key of parts.slice(0, -1)) {
    const next = cur[key];
    if (typeof next === 'object' && next !== null && !Array.isArray(next)) {
      cur = next as Record<string, unknown>;
    } else {
      const t: Record<string, unknown> = {};
      cur[key] = t;
      cur = t;
    }
  }
  cur[parts[parts.length - 1] as string] = value;
}

/** Validate a parsed spec object; `source` names the file in errors. */
export function parseSweepSpec(input: unknown, source: string, baseDir: string): ResolvedSweepSpec {
  const r = SweepSpecSchema.safeParse(input);
  if (!r.success) {
    const issue = r.error.issues[0];
    if (issue === undefined) fail(source, [], 'is invalid');
    if (issue.code === 'unrecognized_keys') fail(source, [...issue.path, issue.keys[0] ?? ''], 'is not a known key');
    fail(source, issue.path, `: ${issue.message}`);
  }
  const spec = r.data;
  const keys = Object.keys(spec.space);
  if (keys.length === 0) fail(source, ['space'], 'must have at least one dimension');
  for (const key of keys) {
    if (!CONFIG_KEYS.has(key)) fail(source, ['space', key], 'is not a config key path (e.g. agent.lr)');
  }
  if (spec.asha.enabled && spec.asha.grace_epochs > spec.max_epochs) {
    fail(source, ['asha', 'grace_epochs'], `must be <= max_epochs (${spec.max_epochs})`);
  }
  let trials = spec.trials;
  if (spec.sampler.kind === 'grid') {
    for (const key of keys) {
      const d = spec.space[key] as Dimension;
      if ((d.kind === 'uniform' || d.kind === 'log_uniform') && d.points === undefined) {
        fail(source, ['space', key, 'points'], 'is required by the grid sampler for a continuous dimension');
      }
    }
    const size = gridSize(spec.space);
    if (trials !== undefined && trials > size) fail(source, ['trials'], `is ${trials} but the grid has only ${size} points`);
    trials ??= size;
  }
  if (trials === undefined) fail(source, ['trials'], 'is required for the random and halton samplers');

  let baseTable: Record<string, unknown> = {};
  if (spec.base !== undefined) baseTable = readToml(resolve(baseDir, spec.base));
  const sets = Array.isArray(spec.set)
    ? spec.set
    : Object.entries(spec.set).map(([k, v]) => `${k}=${typeof v === 'string' ? JSON.stringify(v) : String(v)}`);
  try {
    applySets(baseTable, sets);
  } catch (err) {
    fail(source, ['set'], `: ${(err as Error).message}`);
  }
  const rungs = spec.asha.enabled ? ashaRungs(spec.asha.grace_epochs, spec.asha.eta, spec.max_epochs) : [];
  return { ...spec, trials, rungs, baseTable, source };
}

/** Read a spec file (.toml or .json); syntax errors name file:line. */
export function loadSweepSpec(file: string): ResolvedSweepSpec {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new FoxhuntError('CONFIG_INVALID', `cannot read sweep spec: ${(err as Error).message}`, { where: file, cause: err });
  }
  let input: unknown;
  try {
    input = file.endsWith('.json') ? JSON.parse(text) : parseToml(text);
  } catch (err) {
    const e = err as { line?: number; message?: string };
    throw new FoxhuntError('CONFIG_INVALID', `sweep spec syntax error: ${e.message ?? String(err)}`,
      { where: e.line !== undefined ? `${file}:${e.line}` : file, cause: err });
  }
  return parseSweepSpec(input, file, dirname(resolve(file)));
}

/**
 * Expand a spec into its trials: sampled points (in sampler order) made into validated configs,
 * skipping any whose config hash was already taken, until `spec.trials` are found.
 */
export function planTrials(spec: ResolvedSweepSpec): PlannedTrial[] {
  const out: PlannedTrial[] = [];
  const seen = new Set<string>();
  const maxCandidates = Math.max(100, spec.trials * 50);
  let n = 0;
  for (const params of sampleSpace(spec.space, spec.sampler)) {
    if (out.length >= spec.trials || n++ >= maxCandidates) break;
    const table = structuredClone(spec.baseTable);
    for (const [k, v] of Object.entries(params)) setPath(table, k, v);
    let config: RunConfig;
    try {
      config = parseRunConfig(table, `${spec.source} trial with ${JSON.stringify(params)}`);
    } catch (err) {
      const where = err instanceof FoxhuntError && err.where !== undefined ? err.where : 'space';
      throw new FoxhuntError('CONFIG_INVALID', (err as Error).message, { where, cause: err });
    }
    const hash = configHash(config);
    if (seen.has(hash)) continue;
    seen.add(hash);
    out.push({ index: out.length, params, config, configHash: hash });
  }
  return out;
}
