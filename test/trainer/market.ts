/** Config and market helpers for the trainer tests. */
import { loadRunConfig } from '../../src/config/load.js';
import type { RunConfig } from '../../src/config/schema.js';
import type { PreparedMarket } from '../../src/data/types.js';
import { prepareMarket } from '../../src/features/prepare.js';

export const TINY = 'config/runs/tiny.toml';

/** config/runs/tiny.toml on one CPU thread (the test machine is shared), with overrides. */
export function tinyConfig(sets: string[] = []): RunConfig {
  return loadRunConfig(TINY, ['gpu.threads=1', ...sets]);
}

/** The market of `cfg` through prepareMarket, without the feature cache. */
export function testMarket(cfg: RunConfig): PreparedMarket {
  return prepareMarket(cfg);
}
