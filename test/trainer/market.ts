/**
 * A PreparedMarket for trainer tests, built from the data and feature modules directly (no cache,
 * no files): synthetic bars, Wilder ATR, v1 features normalised on the train range, the split.
 */
import { loadRunConfig } from '../../src/config/load.js';
import type { RunConfig } from '../../src/config/schema.js';
import { makeSplit } from '../../src/data/split.js';
import { generateSynthetic } from '../../src/data/synthetic.js';
import type { PreparedMarket } from '../../src/data/types.js';
import { wilderAtr } from '../../src/features/atr.js';
import { applyNormaliser, computeRawV1, featureNamesV1, fitNormaliser, N_FEATURES_V1 } from '../../src/features/v1.js';

export const TINY = 'config/runs/tiny.toml';

/** config/runs/tiny.toml with overrides. */
export function tinyConfig(sets: string[] = []): RunConfig {
  return loadRunConfig(TINY, sets);
}

export function testMarket(cfg: RunConfig): PreparedMarket {
  const { bars } = generateSynthetic(cfg.data.synthetic, cfg.instrument);
  const n = bars.close.length;
  const atr = wilderAtr(bars, cfg.instrument.tick_size);
  const split = makeSplit(n, cfg.split, bars.sessionStart, cfg.env.window + 2);
  const raw = computeRawV1(bars, atr, false);
  const features = applyNormaliser(raw, N_FEATURES_V1, fitNormaliser(raw, N_FEATURES_V1, split.trainBegin, split.trainEnd));
  return { bars, atr, features, nFeatures: N_FEATURES_V1, featureNames: featureNamesV1(false), split, cacheKey: 'test', cacheHit: false };
}
