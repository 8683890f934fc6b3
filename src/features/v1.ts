/**
 * Feature set v1: F = 16 strictly causal features per bar (bar t uses bars 0..t only; a lookback
 * that reaches before bar 0 uses the bars that exist). Raw values are float64; `fitNormaliser`
 * fits a z-score per feature on the train range only and `applyNormaliser` clips to ±5 and
 * rounds to float32. Nothing is forward-filled: returns across a session gap are real gaps.
 *
 *  0 ret_1      log(c_t / c_{t-1})                 8 rsi_14     (Wilder RSI(14) − 50) / 50
 *  1 ret_5      log(c_t / c_{t-5})                 9 dist_sma20 (c − SMA20(c)) / ATR
 *  2 ret_15     log(c_t / c_{t-15})               10 dist_sma100 (c − SMA100(c)) / ATR
 *  3 ret_60     log(c_t / c_{t-60})               11 dist_ema390 (c − EMA390(c)) / ATR
 *  4 rvol_15    sqrt(mean ret_1² over 15 bars)    12 vol_z60    z-score of log(1+volume) over 60 bars
 *  5 rvol_60    sqrt(mean ret_1² over 60 bars)    13 tod_sin    sin(2π · minutes since session open / 1440)
 *  6 range_atr  (h − l) / ATR                     14 tod_cos    cos(same)
 *  7 body_atr   (c − o) / ATR                     15 clv        (c − l) / (h − l) − 0.5 (0 when h = l)
 *
 * Leak canary (tests only, `features.leak_canary`): ret_1 is replaced by the NEXT bar's log
 * return (0 on the last bar), named `LEAK_next_ret_1`. It breaks causality on purpose.
 */
import type { Bars } from '../data/types.js';

export const FEATURE_SET_VERSION = 'v1.1';
export const N_FEATURES_V1 = 16;
export const FEATURE_NAMES_V1 = [
  'ret_1', 'ret_5', 'ret_15', 'ret_60', 'rvol_15', 'rvol_60', 'range_atr', 'body_atr',
  'rsi_14', 'dist_sma20', 'dist_sma100', 'dist_ema390', 'vol_z60', 'tod_sin', 'tod_cos', 'clv',
] as const;
export const LEAK_FEATURE_NAME = 'LEAK_next_ret_1';
export const CLIP = 5;

const NS_PER_MIN = 60_000_000_000n;

/** A running window sum over the last `len` values pushed. */
class Window {
  private readonly buf: Float64Array;
  private i = 0;
  count = 0;
  sum = 0;
  constructor(readonly len: number) {
    this.buf = new Float64Array(len);
  }
  push(v: number): void {
    if (this.count === this.len) this.sum -= this.buf[this.i] as number;
    else this.count++;
    this.buf[this.i] = v;
    this.sum += v;
    this.i = (this.i + 1) % this.len;
  }
  mean(): number {
    return this.count > 0 ? this.sum / this.count : 0;
  }
}

/** Raw v1 features, (n, 16) float64 row-major. */
export function computeRawV1(b: Bars, atr: Float64Array, leakCanary = false): Float64Array {
  const n = b.close.length;
  const F = N_FEATURES_V1;
  const out = new Float64Array(n * F);
  const logc = new Float64Array(n);
  for (let t = 0; t < n; t++) logc[t] = Math.log(b.close[t] as number);
  const r2_15 = new Window(15);
  const r2_60 = new Window(60);
  const sma20 = new Window(20);
  const sma100 = new Window(100);
  const lv = new Window(60);
  const lv2 = new Window(60);
  let ema = 0;
  const emaK = 2 / (390 + 1);
  let avgGain = 0;
  let avgLoss = 0;
  let sessionTs = 0n;
  for (let t = 0; t < n; t++) {
    const c = b.close[t] as number;
    const h = b.high[t] as number;
    const l = b.low[t] as number;
    const o = b.open[t] as number;
    const a = atr[t] as number;
    const ret1 = t > 0 ? (logc[t] as number) - (logc[t - 1] as number) : 0;
    const back = (k: number): number => (logc[t] as number) - (logc[Math.max(0, t - k)] as number);
    r2_15.push(ret1 * ret1);
    r2_60.push(ret1 * ret1);
    sma20.push(c);
    sma100.push(c);
    ema = t === 0 ? c : ema + emaK * (c - ema);
    // Wilder RSI(14)
    const diff = t > 0 ? c - (b.close[t - 1] as number) : 0;
    const gain = diff > 0 ? diff : 0;
    const loss = diff < 0 ? -diff : 0;
    if (t <= 14) {
      avgGain = t === 0 ? 0 : (avgGain * (t - 1) + gain) / t;
      avgLoss = t === 0 ? 0 : (avgLoss * (t - 1) + loss) / t;
    } else {
      avgGain = (avgGain * 13 + gain) / 14;
      avgLoss = (avgLoss * 13 + loss) / 14;
    }
    const rsi = avgGain + avgLoss > 0 ? (100 * avgGain) / (avgGain + avgLoss) : 50;
    const v = Math.log1p(Math.max(0, b.volume[t] as number));
    lv.push(v);
    lv2.push(v * v);
    const vm = lv.mean();
    const vvar = lv2.mean() - vm * vm;
    const vz = vvar > 1e-12 ? (v - vm) / Math.sqrt(vvar) : 0;
    if (t === 0 || b.sessionStart[t] === 1) sessionTs = b.ts[t] as bigint;
    const minutes = Number((b.ts[t] as bigint) - sessionTs) / Number(NS_PER_MIN);
    const phase = (2 * Math.PI * minutes) / 1440;

    const row = t * F;
    out[row + 0] = ret1;
    out[row + 1] = back(5);
    out[row + 2] = back(15);
    out[row + 3] = back(60);
    out[row + 4] = Math.sqrt(r2_15.mean());
    out[row + 5] = Math.sqrt(r2_60.mean());
    out[row + 6] = (h - l) / a;
    out[row + 7] = (c - o) / a;
    out[row + 8] = (rsi - 50) / 50;
    out[row + 9] = (c - sma20.mean()) / a;
    out[row + 10] = (c - sma100.mean()) / a;
    out[row + 11] = (c - ema) / a;
    out[row + 12] = vz;
    out[row + 13] = Math.sin(phase);
    out[row + 14] = Math.cos(phase);
    out[row + 15] = h > l ? (c - l) / (h - l) - 0.5 : 0;
  }
  if (leakCanary) {
    for (let t = 0; t < n; t++) out[t * F] = t + 1 < n ? (logc[t + 1] as number) - (logc[t] as number) : 0;
  }
  return out;
}

export interface Normaliser {
  mean: Float64Array; // (F)
  std: Float64Array; // (F), > 0
  fitBegin: number;
  fitEnd: number;
}

/**
 * Fit a z-score per feature on bars [fitBegin, fitEnd) only (the train range, or its last
 * `normWindow` bars). A constant feature gets std 1.
 */
export function fitNormaliser(raw: Float64Array, F: number, trainBegin: number, trainEnd: number, normWindow = 0): Normaliser {
  const fitBegin = normWindow > 0 ? Math.max(trainBegin, trainEnd - normWindow) : trainBegin;
  const fitEnd = trainEnd;
  const mean = new Float64Array(F);
  const std = new Float64Array(F);
  const n = fitEnd - fitBegin;
  for (let t = fitBegin; t < fitEnd; t++) for (let f = 0; f < F; f++) mean[f] = (mean[f] as number) + (raw[t * F + f] as number);
  for (let f = 0; f < F; f++) mean[f] = n > 0 ? (mean[f] as number) / n : 0;
  for (let t = fitBegin; t < fitEnd; t++) {
    for (let f = 0; f < F; f++) {
      const d = (raw[t * F + f] as number) - (mean[f] as number);
      std[f] = (std[f] as number) + d * d;
    }
  }
  for (let f = 0; f < F; f++) {
    const s = n > 1 ? Math.sqrt((std[f] as number) / (n - 1)) : 0;
    std[f] = s > 1e-12 ? s : 1;
  }
  return { mean, std, fitBegin, fitEnd };
}

/** (x − mean) / std, clipped to ±CLIP, as float32 (n, F). */
export function applyNormaliser(raw: Float64Array, F: number, norm: Normaliser): Float32Array {
  const out = new Float32Array(raw.length);
  const n = raw.length / F;
  for (let t = 0; t < n; t++) {
    for (let f = 0; f < F; f++) {
      const z = ((raw[t * F + f] as number) - (norm.mean[f] as number)) / (norm.std[f] as number);
      out[t * F + f] = z > CLIP ? CLIP : z < -CLIP ? -CLIP : z;
    }
  }
  return out;
}

export function featureNamesV1(leakCanary: boolean): string[] {
  const names: string[] = [...FEATURE_NAMES_V1];
  if (leakCanary) names[0] = LEAK_FEATURE_NAME;
  return names;
}
