/**
 * prepareMarket: config → PreparedMarket (DESIGN.md §3). Loads or synthesises the bars, computes
 * the ATR, the split, and the normalised features through the fxcache (normaliser fit on the train
 * range only).
 */
import type { RunConfig } from '../config/schema.js';
import { loadMarketBars } from '../data/source.js';
import { makeSplit } from '../data/split.js';
import type { PreparedMarket } from '../data/types.js';
import { wilderAtr } from './atr.js';
import { barsContentHash, fxcacheKey, getOrBuildFx } from './fxcache.js';
import type { FxEntry, FxLogger } from './fxcache.js';
import { applyNormaliser, computeRawV1, FEATURE_SET_VERSION, featureNamesV1, fitNormaliser, N_FEATURES_V1 } from './v1.js';

export interface PrepareOptions {
  /** Root that data paths are confined to (needed for file sources). */
  dataRoot?: string | undefined;
  /** fxcache directory; undefined = no cache. */
  cacheDir?: string | undefined;
  log?: FxLogger | undefined;
}

export interface PreparedWithTruth extends PreparedMarket {
  /** Hidden regime per bar (synthetic edge market), for the oracle. */
  regime?: Int8Array;
}

export function prepareMarket(cfg: RunConfig, opts: PrepareOptions = {}): PreparedWithTruth {
  const loaded = loadMarketBars(cfg, opts.dataRoot);
  const { bars } = loaded;
  const n = bars.close.length;
  const atr = wilderAtr(bars, cfg.instrument.tick_size);
  const split = makeSplit(n, cfg.split, bars.sessionStart, cfg.env.window + 2);
  const F = N_FEATURES_V1;
  const featureSet = `${cfg.features.set}/${FEATURE_SET_VERSION}`;
  const key = fxcacheKey({
    barsHash: barsContentHash(bars),
    featureSet,
    normWindow: cfg.features.norm_window,
    leakCanary: cfg.features.leak_canary,
    trainBegin: split.trainBegin,
    trainEnd: split.trainEnd,
  });
  const build = (): FxEntry => {
    const raw = computeRawV1(bars, atr, cfg.features.leak_canary);
    const norm = fitNormaliser(raw, F, split.trainBegin, split.trainEnd, cfg.features.norm_window);
    return {
      key, nBars: n, nFeatures: F, featureNames: featureNamesV1(cfg.features.leak_canary), featureSet,
      features: applyNormaliser(raw, F, norm),
    };
  };
  const { entry, hit } = getOrBuildFx(opts.cacheDir, key, build, opts.log);
  const out: PreparedWithTruth = {
    bars, atr, features: entry.features, nFeatures: entry.nFeatures, featureNames: entry.featureNames,
    split, cacheKey: key, cacheHit: hit,
  };
  if (loaded.regime !== undefined) out.regime = loaded.regime;
  return out;
}
