/**
 * Walk-forward splits by time, never shuffled: [train][embargo][validation]([embargo][test]).
 * The validation (and test) range starts on a session boundary when one is near, so evaluation
 * segments begin at a session open. An embargo of whole bars separates the ranges so no feature
 * window or n-step return of the train range reaches into validation.
 */
import { FoxhuntError } from '../errors.js';
import type { SplitConfig } from '../config/schema.js';
import type { Split } from './types.js';

/** First session start in [from, limit), or `from` when there is none. */
function snapToSession(sessionStart: Uint8Array | undefined, from: number, limit: number): number {
  if (sessionStart === undefined) return from;
  for (let i = from; i < limit; i++) if (sessionStart[i] === 1) return i;
  return from;
}

/**
 * The split of n bars. `minTrain` is the fewest train bars accepted (e.g. the window + 2).
 * Throws CONFIG_INVALID naming split.* when the ranges do not fit.
 */
export function makeSplit(nBars: number, cfg: SplitConfig, sessionStart?: Uint8Array, minTrain = 2): Split {
  const testBars = Math.floor(nBars * cfg.test_fraction);
  const valBars = Math.floor(nBars * cfg.val_fraction);
  const testBegin0 = nBars - testBars;
  const valEnd0 = testBars > 0 ? testBegin0 - cfg.embargo_bars : nBars;
  const valBegin0 = valEnd0 - valBars;
  // snap the validation start forward to a session open within one embargo (or 1% of the bars)
  const reach = Math.max(1, Math.min(valBars - 1, Math.max(cfg.embargo_bars, Math.floor(nBars / 100))));
  const valBegin = snapToSession(sessionStart, Math.max(0, valBegin0), Math.max(0, valBegin0) + reach);
  let valEnd = valEnd0;
  let testBegin = testBegin0;
  if (testBars > 0) {
    testBegin = snapToSession(sessionStart, testBegin0, testBegin0 + Math.max(1, Math.min(testBars - 1, reach)));
    valEnd = Math.min(valEnd0, testBegin - cfg.embargo_bars);
  }
  const trainEnd = valBegin - cfg.embargo_bars;
  if (valBars < 2 || valEnd - valBegin < 2) {
    throw new FoxhuntError('CONFIG_INVALID', `validation range of ${valEnd - valBegin} bars out of ${nBars} is too small`, { where: 'split.val_fraction' });
  }
  if (testBars > 0 && nBars - testBegin < 2) {
    throw new FoxhuntError('CONFIG_INVALID', `test range of ${nBars - testBegin} bars is too small`, { where: 'split.test_fraction' });
  }
  if (trainEnd < minTrain) {
    throw new FoxhuntError('CONFIG_INVALID',
      `train range of ${trainEnd} bars (of ${nBars}) is too small after validation ${valEnd - valBegin} and embargo ${cfg.embargo_bars} (need >= ${minTrain})`,
      { where: 'split.embargo_bars' });
  }
  const split: Split = { trainBegin: 0, trainEnd, valBegin, valEnd };
  if (testBars > 0) {
    split.testBegin = testBegin;
    split.testEnd = nBars;
  }
  return split;
}

/**
 * Walk-forward folds with an expanding train range: fold i validates on the i-th of `folds` equal
 * blocks of the last `valFraction·folds` of the data (capped to the data), training on everything
 * before it minus the embargo.
 */
export function walkForwardSplits(nBars: number, folds: number, valFraction: number, embargoBars: number, minTrain = 2): Split[] {
  if (!(folds >= 1)) throw new FoxhuntError('CONFIG_INVALID', `folds must be >= 1, got ${folds}`, { where: 'folds' });
  const valBars = Math.floor(nBars * valFraction);
  const first = nBars - folds * valBars;
  const out: Split[] = [];
  for (let i = 0; i < folds; i++) {
    const valBegin = first + i * valBars;
    const trainEnd = valBegin - embargoBars;
    if (trainEnd < minTrain || valBars < 2) {
      throw new FoxhuntError('CONFIG_INVALID', `fold ${i}: train range of ${trainEnd} bars is too small`, { where: 'split' });
    }
    out.push({ trainBegin: 0, trainEnd, valBegin, valEnd: valBegin + valBars });
  }
  return out;
}
