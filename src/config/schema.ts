/**
 * The run configuration: one zod schema per section of DESIGN.md §2, snake_case as in TOML.
 * Every field has a type, a default (the reference workload of SPEC §7) and a one-line
 * description. Objects are strict: an unknown key fails with its path.
 */
import { z } from 'zod';

const int = () => z.number().int();
const posInt = () => z.number().int().positive();
const nonNegInt = () => z.number().int().nonnegative();
const finite = () => z.number().finite();

export const SyntheticSchema = z.strictObject({
  market: z.enum(['null', 'edge', 'intraday']).default('null')
    .describe('synthetic market: null (random walk), edge (planted regime edge), intraday (realistic sessions)'),
  days: posInt().default(504).describe('trading days to synthesise (504 = 2 years)'),
  bars_per_day: posInt().default(1380).describe('one-minute bars per session'),
  seed: nonNegInt().default(1).describe('seed of the synthetic price path'),
  start_price: finite().positive().default(4500).describe('price of the first bar'),
}).describe('synthetic market parameters (data.source = synthetic)');

export const DataSchema = z.strictObject({
  source: z.enum(['synthetic', 'csv', 'databento', 'ninjatrader']).default('synthetic')
    .describe('where bars come from'),
  path: z.string().min(1).optional().describe('data file, relative to the data root (file sources)'),
  paths: z.array(z.string().min(1)).min(1).optional()
    .describe('per-contract files in roll order, stitched back-adjusted into one series'),
  session_gap_minutes: finite().positive().default(30)
    .describe('a gap longer than this between bars starts a new session'),
  synthetic: SyntheticSchema.prefault({}),
}).describe('market data source');

export const InstrumentSchema = z.strictObject({
  symbol: z.string().min(1).default('ES').describe('instrument symbol'),
  point_value: finite().positive().default(50).describe('$ per point of price'),
  tick_size: finite().positive().default(0.25).describe('price units per tick'),
  commission: finite().nonnegative().default(2.25).describe('$ per contract per side'),
  slippage_ticks: finite().nonnegative().default(1).describe('ticks per side against the trader'),
  max_contracts: posInt().default(1).describe('|position| limit in contracts'),
}).describe('the traded futures contract');

export const FeaturesSchema = z.strictObject({
  set: z.enum(['v1']).default('v1').describe('feature set (v1: F = 16 causal features)'),
  norm_window: nonNegInt().default(0).describe('normaliser fit window in bars at the end of train (0 = whole train range)'),
  leak_canary: z.boolean().default(false).describe('TEST ONLY: replace a feature by the next bar return (look-ahead)'),
}).describe('per-bar features');

export const SplitSchema = z.strictObject({
  val_fraction: finite().gt(0).lt(1).default(0.2).describe('fraction of bars in the validation range'),
  test_fraction: finite().gte(0).lt(1).default(0).describe('fraction of bars in the test range (after validation)'),
  embargo_bars: nonNegInt().default(1380).describe('bars dropped between train and validation (and validation and test)'),
}).describe('walk-forward split by time');

export const EnvSchema = z.strictObject({
  n_envs: posInt().default(4096).describe('envs collected in parallel (N)'),
  episode_len: posInt().default(100).describe('steps per episode and per collection (T)'),
  window: posInt().default(64).describe('bars of features in an observation (W)'),
  branch_sizes: z.tuple([posInt(), posInt(), posInt()]).default([3, 4, 3])
    .refine((b) => b[0] % 2 === 1 && b[0] >= 3, { message: 'direction branch size must be odd and >= 3' })
    .describe('action branch sizes: direction (odd), size, stop'),
  flatten_at_session_break: z.boolean().default(true).describe('flatten at the last close before a session gap'),
  stop_atr_mult: finite().nonnegative().default(1).describe('stop choice k sits k * stop_atr_mult * ATR from the fill'),
  risk_penalty: finite().nonnegative().default(0).describe('reward -= risk_penalty * |pos| / max_contracts per step'),
  reward_scale: finite().nonnegative().default(0).describe('reward = $ change / reward_scale (0 = mean train ATR * point value)'),
  initial_capital: finite().positive().default(100000).describe('$ base of the drawdown percentage'),
}).describe('vectorised trading environment');

export const AgentSchema = z.strictObject({
  hidden1: posInt().default(512).describe('trunk layer 1 width'),
  hidden2: posInt().default(256).describe('trunk layer 2 width'),
  head_hidden: posInt().default(128).describe('value/advantage head hidden width'),
  atoms: posInt().default(51).describe('C51 atoms (1 = plain Q with Huber loss)'),
  v_min: finite().default(-10).describe('C51 support minimum'),
  v_max: finite().default(10).describe('C51 support maximum'),
  gamma: finite().gt(0).lte(1).default(0.99).describe('discount factor'),
  n_step: posInt().default(3).describe('n-step return length'),
  lr: finite().positive().default(1e-4).describe('Adam learning rate'),
  adam_beta1: finite().gte(0).lt(1).default(0.9).describe('Adam beta1'),
  adam_beta2: finite().gte(0).lt(1).default(0.999).describe('Adam beta2'),
  adam_eps: finite().positive().default(1.5e-4).describe('Adam epsilon'),
  grad_clip: finite().nonnegative().default(10).describe('global gradient-norm clip (0 = off)'),
  target_update_every: posInt().default(2000).describe('hard target copy every K train steps (when tau = 0)'),
  tau: finite().gte(0).lte(1).default(0).describe('Polyak factor per train step (0 = hard updates)'),
  huber_delta: finite().positive().default(1).describe('Huber threshold (atoms = 1)'),
}).refine((a) => a.v_max > a.v_min, { message: 'v_max must be greater than v_min', path: ['v_max'] })
  .describe('branching dueling Q network and its learning');

export const ReplaySchema = z.strictObject({
  capacity: posInt().default(2097152).describe('transitions stored (rounded down to a multiple of n_envs)'),
  alpha: finite().gte(0).default(0.6).describe('priority exponent'),
  beta_start: finite().gte(0).lte(1).default(0.4).describe('importance-weight exponent at step 0'),
  beta_end: finite().gte(0).lte(1).default(1).describe('importance-weight exponent after beta_steps'),
  beta_steps: posInt().default(100000).describe('train steps over which beta anneals linearly'),
  eps: finite().positive().default(1e-6).describe('added to the priority signal before ^alpha'),
}).describe('prioritised replay');

export const TrainSchema = z.strictObject({
  steps_per_epoch: posInt().default(341).describe('train steps per epoch (S)'),
  batch_size: nonNegInt().default(0).describe('train batch (0 = auto from free memory, capped)'),
  batch_cap: posInt().default(16384).describe('upper bound of the auto batch size'),
  learning_starts: nonNegInt().default(0).describe('no training until this many transitions are sampleable'),
  eps_start: finite().gte(0).lte(1).default(1).describe('epsilon-greedy start'),
  eps_end: finite().gte(0).lte(1).default(0.05).describe('epsilon-greedy floor'),
  eps_decay_steps: finite().positive().default(2000000).describe('epsilon decay constant in env transitions'),
  qstats_every: posInt().default(50).describe('Q statistics every K train steps'),
}).describe('training loop');

export const EvalSchema = z.strictObject({
  segments: posInt().default(64).describe('validation range cut into this many contiguous parallel segments'),
}).describe('greedy evaluation');

export const GpuSchema = z.strictObject({
  profile: z.enum(['auto', 'cpu', 'h100', 'h200']).default('auto').describe('GPU profile from config/gpu/<profile>.toml'),
  backend: z.enum(['auto', 'cpu', 'cuda']).default('auto').describe('native backend'),
  device: nonNegInt().default(0).describe('CUDA device ordinal'),
  graphs: z.boolean().default(true).describe('capture collection/train/eval as CUDA graphs'),
  deterministic: z.boolean().default(false).describe('fp32 GEMMs on CUDA (to compare with CPU)'),
  threads: nonNegInt().default(0).describe('CPU backend threads (0 = hardware concurrency)'),
}).describe('device and backend');

export const RunConfigSchema = z.strictObject({
  seed: nonNegInt().default(1).describe('seed of every Philox stream of the run'),
  data: DataSchema.prefault({}),
  instrument: InstrumentSchema.prefault({}),
  features: FeaturesSchema.prefault({}),
  split: SplitSchema.prefault({}),
  env: EnvSchema.prefault({}),
  agent: AgentSchema.prefault({}),
  replay: ReplaySchema.prefault({}),
  train: TrainSchema.prefault({}),
  eval: EvalSchema.prefault({}),
  gpu: GpuSchema.prefault({}),
}).refine((c) => c.split.val_fraction + c.split.test_fraction < 1,
  { message: 'val_fraction + test_fraction must be < 1', path: ['split', 'val_fraction'] })
  .refine((c) => c.data.source === 'synthetic' || c.data.path !== undefined || c.data.paths !== undefined,
    { message: 'a file data source needs data.path or data.paths', path: ['data', 'path'] })
  .describe('one training run');

export type RunConfig = z.infer<typeof RunConfigSchema>;
export type RunConfigInput = z.input<typeof RunConfigSchema>;
export type DataConfig = RunConfig['data'];
export type SyntheticConfig = DataConfig['synthetic'];
export type InstrumentConfig = RunConfig['instrument'];
export type FeaturesConfig = RunConfig['features'];
export type SplitConfig = RunConfig['split'];
export type EnvConfig = RunConfig['env'];
export type AgentConfig = RunConfig['agent'];
export type ReplayConfig = RunConfig['replay'];
export type TrainConfig = RunConfig['train'];
export type EvalConfig = RunConfig['eval'];
export type GpuConfig = RunConfig['gpu'];

/** The reference workload: every default. */
export function defaultRunConfig(): RunConfig {
  return RunConfigSchema.parse({});
}
