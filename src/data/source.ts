/**
 * Bars for a run's `data` config: synthetic (the default) or loaded from files under the data root
 * (one file, or per-contract files stitched in roll order).
 */
import type { RunConfig } from '../config/schema.js';
import { FoxhuntError } from '../errors.js';
import { loadBarsFile } from './loaders.js';
import { resolvePathInDataRoot } from './paths.js';
import { stitchContracts } from './stitch.js';
import { generateSynthetic } from './synthetic.js';
import type { Bars } from './types.js';

export interface LoadedBars {
  bars: Bars;
  /** (nBars) hidden regime of a synthetic edge market; undefined for file data. */
  regime?: Int8Array;
}

export function loadMarketBars(cfg: RunConfig, dataRoot: string | undefined): LoadedBars {
  const d = cfg.data;
  if (d.source === 'synthetic') return generateSynthetic(d.synthetic, cfg.instrument);
  if (dataRoot === undefined) {
    throw new FoxhuntError('CONFIG_INVALID', `data.source = ${d.source} needs a data root (FOXHUNT_DATA_ROOT or --data-root)`, { where: 'data.source' });
  }
  const format = d.source;
  const opts = { tickSize: cfg.instrument.tick_size, sessionGapMinutes: d.session_gap_minutes, symbol: cfg.instrument.symbol };
  if (d.paths !== undefined) {
    const files = d.paths.map((p) => resolvePathInDataRoot(dataRoot, p));
    const contracts = files.map((f) => loadBarsFile(f, format, opts));
    return { bars: stitchContracts(contracts, cfg.instrument.tick_size, d.paths).bars };
  }
  const file = resolvePathInDataRoot(dataRoot, d.path as string);
  return { bars: loadBarsFile(file, format, opts) };
}
