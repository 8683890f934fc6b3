/**
 * Wilder ATR(14) in price units, causal (DESIGN.md §3): TR_t = max(high − low, |high − close_{t−1}|,
 * |low − close_{t−1}|) (TR_0 = high − low); for the first 14 bars the mean of the true ranges so far,
 * then ATR_t = (13·ATR_{t−1} + TR_t) / 14. Never below one tick.
 */
import type { Bars } from '../data/types.js';

export const ATR_PERIOD = 14;

export function trueRange(b: Bars, t: number): number {
  const h = b.high[t] as number;
  const l = b.low[t] as number;
  if (t === 0) return h - l;
  const pc = b.close[t - 1] as number;
  return Math.max(h - l, Math.abs(h - pc), Math.abs(l - pc));
}

export function wilderAtr(b: Bars, tickSize: number, period = ATR_PERIOD): Float64Array {
  const n = b.close.length;
  const raw = new Float64Array(n);
  const out = new Float64Array(n);
  let sum = 0;
  for (let t = 0; t < n; t++) {
    const tr = trueRange(b, t);
    if (t < period) {
      sum += tr;
      raw[t] = sum / (t + 1);
    } else {
      raw[t] = ((period - 1) * (raw[t - 1] as number) + tr) / period;
    }
    out[t] = Math.max(raw[t] as number, tickSize);
  }
  return out;
}
