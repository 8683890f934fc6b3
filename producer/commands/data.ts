/**
 * Data tools: `foxhunt inspect FILE` (what a market data file holds), `foxhunt features` (precompute
 * a run's features into the local fxcache) and `foxhunt oracle` (the synthetic edge market's
 * oracle policy and the flat/buy-and-hold baselines, after costs, on the validation range).
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import { resolve } from 'node:path';
import { pino } from 'pino';
import { loadRunConfig, resolveRunConfigPath } from '../../src/config/load.js';
import { loadBarsFile, sniffFormat } from '../../src/data/loaders.js';
import type { DataFormat } from '../../src/data/loaders.js';
import { oracleTargets } from '../../src/data/synthetic.js';
import type { Bars } from '../../src/data/types.js';
import { FoxhuntError } from '../../src/errors.js';
import { evaluateWithBaselines, targetPolicy } from '../../src/env/evaluate.js';
import { METRIC_NAMES } from '../../src/env/metrics.js';
import type { Metrics } from '../../src/env/metrics.js';
import { envParams, marketView, resolveRewardScale } from '../../src/env/reference.js';
import { fxcachePath } from '../../src/features/fxcache.js';
import { prepareMarket } from '../../src/features/prepare.js';

const collect = (v: string, prev: string[]): string[] => [...prev, v];

function dataRoot(): string {
  return resolve(process.env['FOXHUNT_DATA_ROOT'] ?? 'data');
}
function cacheDir(flag?: string): string {
  return resolve(flag ?? process.env['FOXHUNT_CACHE_DIR'] ?? '.fxcache');
}

const isoOf = (ts: bigint | undefined): string => (ts === undefined ? '-' : new Date(Number(ts / 1_000_000n)).toISOString());

/** Summary rows of a bar series: size, time range, sessions, gaps inside sessions, prices. */
export function describeBars(b: Bars): Array<[string, string]> {
  const n = b.close.length;
  let sessions = 0;
  let gaps = 0;
  let missing = 0;
  let longest = 0n;
  let lo = Infinity;
  let hi = -Infinity;
  let vol = 0;
  const minute = 60_000_000_000n;
  for (let i = 0; i < n; i++) {
    if (b.sessionStart[i] === 1) sessions++;
    else if (i > 0) {
      const d = (b.ts[i] as bigint) - (b.ts[i - 1] as bigint);
      if (d > minute) {
        gaps++;
        missing += Number(d / minute) - 1;
        if (d > longest) longest = d;
      }
    }
    lo = Math.min(lo, b.low[i] as number);
    hi = Math.max(hi, b.high[i] as number);
    vol += b.volume[i] as number;
  }
  return [
    ['bars', String(n)],
    ['first', isoOf(b.ts[0])],
    ['last', isoOf(b.ts[n - 1])],
    ['sessions', String(sessions)],
    ['bars/session', (n / Math.max(1, sessions)).toFixed(1)],
    ['gaps inside sessions', `${gaps} (${missing} missing minutes, longest ${Number(longest / minute)} min)`],
    ['price range', `${lo} .. ${hi}`],
    ['volume', String(vol)],
    ...(b.symbol !== undefined ? [['symbol', b.symbol] as [string, string]] : []),
  ];
}

function printRows(rows: Array<[string, string]>): void {
  const w = Math.max(...rows.map(([k]) => k.length));
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(w)}  ${v}\n`);
}

const fmt = (v: number | null): string => (v === null ? 'null' : Number.isInteger(v) ? String(v) : v.toFixed(3));

/** A metrics table: one row per metric, one column per policy. */
export function metricsTable(cols: Array<[string, Metrics]>): string {
  const header = ['metric', ...cols.map(([n]) => n)];
  const rows = METRIC_NAMES.map((m) => [m, ...cols.map(([, x]) => fmt(x[m]))]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]): string => r.map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0))).join('  ');
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

export function register(program: Command): void {
  program
    .command('inspect')
    .description('summarise a market data file: bars, time range, sessions, gaps (validates every row)')
    .argument('<file>', 'CSV, Databento ohlcv-1m CSV or NinjaTrader file')
    .addOption(new Option('--format <format>', 'file format (default: guessed from the first line)').choices(['csv', 'databento', 'ninjatrader']))
    .option('--tick <size>', 'tick size prices must lie on', '0.25')
    .option('--session-gap <minutes>', 'a longer gap starts a session', '30')
    .action((file: string, flags: { format?: DataFormat; tick: string; sessionGap: string }) => {
      const tickSize = Number(flags.tick);
      const gap = Number(flags.sessionGap);
      if (!(tickSize > 0)) throw new FoxhuntError('CONFIG_INVALID', `expected a positive number, got ${flags.tick}`, { where: '--tick' });
      if (!(gap > 0)) throw new FoxhuntError('CONFIG_INVALID', `expected a positive number, got ${flags.sessionGap}`, { where: '--session-gap' });
      const format = flags.format ?? sniffFormat(file);
      const bars = loadBarsFile(file, format, { tickSize, sessionGapMinutes: gap });
      printRows([['file', file], ['format', format], ...describeBars(bars)]);
    });

  program
    .command('features')
    .description('precompute a run\'s features into the local fxcache (prints fxcache hit or miss)')
    .option('--config <name|file>', 'config/runs/<name>.toml or a TOML path', 'tiny')
    .option('--set <key=value>', 'override a config field (repeatable)', collect, [])
    .option('--cache-dir <dir>', 'fxcache directory (default FOXHUNT_CACHE_DIR or ./.fxcache)')
    .action((flags: { config: string; set: string[]; cacheDir?: string }) => {
      const cfg = loadRunConfig(resolveRunConfigPath(flags.config), flags.set);
      const dir = cacheDir(flags.cacheDir);
      const log = pino({ name: 'foxhunt', level: process.env['FOXHUNT_LOG_LEVEL'] ?? 'warn' }, pino.destination(2));
      const t0 = performance.now();
      const pm = prepareMarket(cfg, { dataRoot: dataRoot(), cacheDir: dir, log });
      const ms = performance.now() - t0;
      process.stdout.write(`fxcache ${pm.cacheHit ? 'hit' : 'miss'}\n`);
      printRows([
        ['key', pm.cacheKey],
        ['file', fxcachePath(dir, pm.cacheKey)],
        ['bars', String(pm.bars.close.length)],
        ['features', `${pm.nFeatures} (${pm.featureNames.join(', ')})`],
        ['split', `train [${pm.split.trainBegin}, ${pm.split.trainEnd}) val [${pm.split.valBegin}, ${pm.split.valEnd})`
          + (pm.split.testBegin !== undefined ? ` test [${pm.split.testBegin}, ${pm.split.testEnd})` : '')],
        ['time', `${ms.toFixed(0)} ms`],
      ]);
    });

  program
    .command('oracle')
    .description('after-cost validation metrics of the synthetic edge market\'s oracle policy vs flat and buy-and-hold')
    .option('--config <name|file>', 'config/runs/<name>.toml or a TOML path', 'tiny')
    .option('--set <key=value>', 'override a config field (repeatable)', collect, [])
    .action((flags: { config: string; set: string[] }) => {
      const cfg = loadRunConfig(resolveRunConfigPath(flags.config), flags.set);
      if (cfg.data.source !== 'synthetic' || cfg.data.synthetic.market !== 'edge') {
        throw new FoxhuntError('CONFIG_INVALID', 'the oracle exists for the synthetic edge market only (data.source = "synthetic", data.synthetic.market = "edge")',
          { where: 'data.synthetic.market' });
      }
      const pm = prepareMarket(cfg, {});
      const regime = pm.regime as Int8Array;
      const m = marketView(pm);
      const p = envParams(cfg, resolveRewardScale(cfg, pm.atr, pm.split.trainBegin, pm.split.trainEnd));
      const targets = oracleTargets(regime, cfg.instrument.max_contracts);
      const r = evaluateWithBaselines(m, p, pm.split, targetPolicy(p, (t) => targets[t] as number),
        { segments: cfg.eval.segments, initialCapital: cfg.env.initial_capital });
      process.stdout.write(`edge market: ${pm.bars.close.length} bars, validation [${pm.split.valBegin}, ${pm.split.valEnd}), `
        + `${cfg.instrument.symbol} costs (commission ${cfg.instrument.commission}, slippage ${cfg.instrument.slippage_ticks} tick)\n`);
      process.stdout.write(metricsTable([['oracle', r.val], ['flat', r.flat], ['buy_hold', r.buy_hold]]));
    });
}
