/**
 * The TypeScript reference of the trading environment (DESIGN.md §4): small, readable and the
 * oracle the native backends are tested against bit for bit. It mirrors kernels/env.cuh line by
 * line: same state, same order of floating-point operations (float64 money math, the reward and the
 * account features rounded to float32 last).
 *
 * Money conventions: s = slippage_ticks × tick_size; every exit or fill of q contracts costs
 * `commission·q + s·q·pv` ("cost"). A step's PnL = marks at unslipped prices minus costs:
 *   session flatten (pos ≠ 0 and session_start[t+1]): −cost, position → 0 (a closed trade);
 *   gap mark `pos·(open[t+1] − close[t])·pv`, then the fill of `target − pos` at open[t+1] (−cost);
 *   stop hit: `pos·(level − open[t+1])·pv − cost`; else the bar mark `pos·(close[t+1] − open[t+1])·pv`.
 * `realised` books `(fill − avg_entry)·qty·sign·pv` at slipped fill prices (no commission).
 * A trade's PnL (for the metrics) is every mark and cost booked while it is open.
 */
import type { RunConfig } from '../config/schema.js';
import type { PreparedMarket } from '../data/types.js';
import { philoxDraw, PURPOSE, scaleU32 } from './philox.js';

export const ACCOUNT_FEATURES = 8;

/** Read-only market arrays as an env sees them. */
export interface MarketView {
  features: Float32Array; // (nBars, F)
  nFeatures: number;
  open: Float64Array;
  high: Float64Array;
  low: Float64Array;
  close: Float64Array;
  atr: Float64Array;
  sessionStart: Uint8Array;
  nBars: number;
  trainBegin: number;
  trainEnd: number;
}

/** Env constants, with reward_scale resolved (> 0). */
export interface EnvParams {
  nDir: number;
  nSize: number;
  nStop: number;
  maxContracts: number;
  flattenAtSessionBreak: boolean;
  episodeLen: number;
  window: number;
  pointValue: number;
  tickSize: number;
  commission: number;
  slippageTicks: number;
  stopAtrMult: number;
  riskPenalty: number;
  rewardScale: number;
}

export interface EnvState {
  t: number; // last closed bar observed
  avgEntry: number;
  stop: number;
  stopDist: number;
  equity: number;
  realised: number;
  tradePnl: number;
  pos: number;
  hasStop: boolean;
  k: number;
  barsHeld: number;
}

export interface StepResult {
  pnl: number;
  cost: number;
  reward: number; // float32 value
  done: boolean;
  traded: number;
  tradesClosed: number;
  tradesWon: number;
  grossProfit: number;
  grossLoss: number; // >= 0
}

export function marketView(m: PreparedMarket): MarketView {
  return {
    features: m.features,
    nFeatures: m.nFeatures,
    open: m.bars.open,
    high: m.bars.high,
    low: m.bars.low,
    close: m.bars.close,
    atr: m.atr,
    sessionStart: m.bars.sessionStart,
    nBars: m.bars.close.length,
    trainBegin: m.split.trainBegin,
    trainEnd: m.split.trainEnd,
  };
}

/** reward_scale: the configured value, or mean(atr[train]) × point_value (sequential float64 sum). */
export function resolveRewardScale(cfg: RunConfig, atr: Float64Array, trainBegin: number, trainEnd: number): number {
  if (cfg.env.reward_scale > 0) return cfg.env.reward_scale;
  let sum = 0;
  for (let i = trainBegin; i < trainEnd; i++) sum += atr[i] as number;
  return (sum / (trainEnd - trainBegin)) * cfg.instrument.point_value;
}

export function envParams(cfg: RunConfig, rewardScale: number): EnvParams {
  const [nDir, nSize, nStop] = cfg.env.branch_sizes;
  return {
    nDir,
    nSize,
    nStop,
    maxContracts: cfg.instrument.max_contracts,
    flattenAtSessionBreak: cfg.env.flatten_at_session_break,
    episodeLen: cfg.env.episode_len,
    window: cfg.env.window,
    pointValue: cfg.instrument.point_value,
    tickSize: cfg.instrument.tick_size,
    commission: cfg.instrument.commission,
    slippageTicks: cfg.instrument.slippage_ticks,
    stopAtrMult: cfg.env.stop_atr_mult,
    riskPenalty: cfg.env.risk_penalty,
    rewardScale,
  };
}

export function newState(): EnvState {
  return { t: 0, avgEntry: 0, stop: 0, stopDist: 0, equity: 0, realised: 0, tradePnl: 0, pos: 0, hasStop: false, k: 0, barsHeld: 0 };
}

export function newStepResult(): StepResult {
  return { pnl: 0, cost: 0, reward: 0, done: false, traded: 0, tradesClosed: 0, tradesWon: 0, grossProfit: 0, grossLoss: 0 };
}

const sign = (x: number): number => (x > 0 ? 1 : x < 0 ? -1 : 0);
const clamp = (x: number, lo: number, hi: number): number => (x < lo ? lo : x > hi ? hi : x);

/** A new episode: flat, no stop, cursor `lo + (u·span >> 32)` with u = philox(seed, {env, counter, RESET})[0]. */
export function envReset(m: MarketView, p: EnvParams, s: EnvState, seed: bigint, env: number, counter: bigint): void {
  const u = philoxDraw(seed, env, counter, PURPOSE.RESET)[0] as number;
  const lo = m.trainBegin + p.window - 1;
  const span = (m.trainEnd - 1) - lo;
  s.t = lo + scaleU32(u, span);
  s.avgEntry = 0;
  s.stop = 0;
  s.stopDist = 0;
  s.equity = 0;
  s.realised = 0;
  s.tradePnl = 0;
  s.pos = 0;
  s.hasStop = false;
  s.k = 0;
  s.barsHeld = 0;
}

/** Action decode: j = a0 − m, target = sign(j)·ceil(|j|·(a1+1)·max / (m·n_size)). */
export function envTarget(p: EnvParams, a0: number, a1: number): number {
  const mid = (p.nDir - 1) / 2;
  const j = a0 - mid;
  if (j === 0 || mid === 0) return 0;
  const num = Math.abs(j) * (a1 + 1) * p.maxContracts;
  const den = mid * p.nSize;
  return sign(j) * Math.floor((num + den - 1) / den);
}

/** The (a0, a1) with the smallest size that decodes to `target` (or the nearest reachable). */
export function actionForTarget(p: EnvParams, target: number): [number, number] {
  let best: [number, number] = [(p.nDir - 1) / 2, 0];
  let bestErr = Math.abs(target);
  for (let a0 = 0; a0 < p.nDir; a0++) {
    for (let a1 = 0; a1 < p.nSize; a1++) {
      const err = Math.abs(envTarget(p, a0, a1) - target);
      if (err < bestErr) {
        bestErr = err;
        best = [a0, a1];
      }
    }
  }
  return best;
}

function closeTrade(s: EnvState, r: StepResult): void {
  r.tradesClosed += 1;
  if (s.tradePnl > 0) {
    r.tradesWon += 1;
    r.grossProfit += s.tradePnl;
  } else {
    r.grossLoss -= s.tradePnl;
  }
  s.tradePnl = 0;
}

/** Exit the whole position at close[t] ∓ slippage (session break, end of an evaluation segment). */
export function envFlatten(m: MarketView, p: EnvParams, s: EnvState, r: StepResult): void {
  if (s.pos === 0) return;
  const slip = p.slippageTicks * p.tickSize;
  const pv = p.pointValue;
  const q = Math.abs(s.pos);
  const c = m.close[s.t] as number;
  const exitPx = s.pos > 0 ? c - slip : c + slip;
  const cost = p.commission * q + slip * q * pv;
  s.realised += (exitPx - s.avgEntry) * q * sign(s.pos) * pv;
  r.cost += cost;
  r.pnl -= cost;
  r.traded += q;
  s.tradePnl -= cost;
  closeTrade(s, r);
  s.pos = 0;
  s.avgEntry = 0;
  s.hasStop = false;
  s.barsHeld = 0;
}

/** One step from t to t+1 with action (a0, a1, a2); requires t+1 < nBars. Does not reset. */
export function envStep(m: MarketView, p: EnvParams, s: EnvState, a0: number, a1: number, a2: number, r: StepResult): void {
  Object.assign(r, newStepResult());
  const slip = p.slippageTicks * p.tickSize;
  const pv = p.pointValue;
  const t = s.t;
  const c = m.close[t] as number;
  const o = m.open[t + 1] as number;
  const target = envTarget(p, a0, a1);
  const dist = a2 > 0 ? a2 * p.stopAtrMult * (m.atr[t] as number) : 0;
  let opened = false;

  // 1. session break: flatten at close[t] before the gap
  if (m.sessionStart[t + 1] === 1 && p.flattenAtSessionBreak && s.pos !== 0) envFlatten(m, p, s, r);

  // 2. gap mark of what is still held, then the fill at open[t+1]
  const gap = s.pos * (o - c) * pv;
  r.pnl += gap;
  s.tradePnl += gap;
  const traded = target - s.pos;
  if (traded !== 0) {
    const q = Math.abs(traded);
    const fill = traded > 0 ? o + slip : o - slip;
    const cost = p.commission * q + slip * q * pv;
    r.cost += cost;
    r.pnl -= cost;
    r.traded += q;
    if (s.pos === 0) {
      // open
      s.avgEntry = fill;
      s.tradePnl = -cost;
      opened = true;
    } else if (sign(target) === sign(s.pos) && Math.abs(target) > Math.abs(s.pos)) {
      // add: quantity-weighted mean entry
      s.avgEntry = (s.avgEntry * Math.abs(s.pos) + fill * q) / Math.abs(target);
      s.tradePnl -= cost;
    } else if (sign(target) === sign(s.pos) || target === 0) {
      // reduce or close
      s.realised += (fill - s.avgEntry) * q * sign(s.pos) * pv;
      s.tradePnl -= cost;
      if (target === 0) {
        closeTrade(s, r);
        s.avgEntry = 0;
      }
    } else {
      // flip: close |pos| then open |target| at the same fill; the cost is split by quantity
      const qClose = Math.abs(s.pos);
      const qOpen = Math.abs(target);
      const costClose = p.commission * qClose + slip * qClose * pv;
      const costOpen = p.commission * qOpen + slip * qOpen * pv;
      s.realised += (fill - s.avgEntry) * qClose * sign(s.pos) * pv;
      s.tradePnl -= costClose;
      closeTrade(s, r);
      s.avgEntry = fill;
      s.tradePnl = -costOpen;
      opened = true;
    }
    s.pos = target;
  }

  // 3. bar t+1: the stop is checked after the fill, else mark to close[t+1]
  s.hasStop = false;
  if (s.pos !== 0 && a2 > 0 && dist > 0) {
    const level = s.pos > 0 ? o - dist : o + dist;
    const hit = s.pos > 0 ? (m.low[t + 1] as number) <= level : (m.high[t + 1] as number) >= level;
    if (hit) {
      const q = Math.abs(s.pos);
      const exitPx = s.pos > 0 ? level - slip : level + slip;
      const cost = p.commission * q + slip * q * pv;
      const bar = s.pos * (level - o) * pv - cost;
      s.realised += (exitPx - s.avgEntry) * q * sign(s.pos) * pv;
      r.pnl += bar;
      r.cost += cost;
      r.traded += q;
      s.tradePnl += bar;
      closeTrade(s, r);
      s.pos = 0;
      s.avgEntry = 0;
    } else {
      const bar = s.pos * ((m.close[t + 1] as number) - o) * pv;
      r.pnl += bar;
      s.tradePnl += bar;
      s.hasStop = true;
      s.stop = level;
      s.stopDist = dist;
    }
  } else {
    const bar = s.pos * ((m.close[t + 1] as number) - o) * pv;
    r.pnl += bar;
    s.tradePnl += bar;
  }
  if (!s.hasStop) {
    s.stop = 0;
    s.stopDist = 0;
  }
  s.barsHeld = s.pos === 0 ? 0 : opened ? 1 : s.barsHeld + 1;

  // 4. reward and advance
  r.reward = Math.fround(r.pnl / p.rewardScale - (p.riskPenalty * Math.abs(s.pos)) / p.maxContracts);
  s.t = t + 1;
  s.k += 1;
  s.equity += r.pnl;
  r.done = s.k === p.episodeLen || s.t + 1 >= m.trainEnd;
}

/** The 8 account features of s (float32 values), written at out[offset..offset+8). */
export function envAccount(m: MarketView, p: EnvParams, s: EnvState, out: Float32Array, offset = 0): void {
  const unreal = s.pos * ((m.close[s.t] as number) - s.avgEntry) * p.pointValue;
  out[offset + 0] = s.pos / p.maxContracts;
  out[offset + 1] = clamp(unreal / p.rewardScale, -10, 10);
  out[offset + 2] = s.barsHeld / p.episodeLen;
  out[offset + 3] = s.hasStop ? s.stopDist / (m.atr[s.t] as number) : 0;
  out[offset + 4] = s.hasStop ? 1 : 0;
  out[offset + 5] = s.k / p.episodeLen;
  out[offset + 6] = sign(s.pos);
  out[offset + 7] = clamp(s.realised / p.rewardScale, -10, 10);
}

/** Observation (D = W·F + 8): feature rows t−W+1..t (oldest first), then the account features. */
export function envObserve(m: MarketView, p: EnvParams, s: EnvState, out: Float32Array, offset = 0): void {
  const n = p.window * m.nFeatures;
  const first = (s.t - p.window + 1) * m.nFeatures;
  out.set(m.features.subarray(first, first + n), offset);
  envAccount(m, p, s, out, offset + n);
}

export function obsDim(p: EnvParams, nFeatures: number): number {
  return p.window * nFeatures + ACCOUNT_FEATURES;
}

/** What one vectorised step returns, each (N). */
export interface VecStepOutputs {
  reward: Float32Array;
  done: Uint8Array;
  position: Int32Array;
  cursor: BigInt64Array;
  equity: Float64Array;
  cost: Float64Array;
  pnl: Float64Array;
}

/**
 * N envs stepped together, as collection does: every env resets at creation with the counter's
 * value; a step on counter c resets the envs that finished with c + 1 (the step their new
 * episode starts on, DESIGN §4), then the counter advances by one (one per N envs). Mirrors `fh_trainer_env_step`.
 */
export class ReferenceEnv {
  readonly n: number;
  readonly states: EnvState[];
  readonly dim: number;
  counter: bigint;
  private readonly result = newStepResult();

  constructor(readonly m: MarketView, readonly p: EnvParams, readonly seed: bigint, n: number, counter = 0n) {
    this.n = n;
    this.counter = counter;
    this.dim = obsDim(p, m.nFeatures);
    this.states = Array.from({ length: n }, () => newState());
    for (let e = 0; e < n; e++) envReset(m, p, this.states[e] as EnvState, seed, e, counter);
  }

  /** actions: (N, 3) int32. */
  step(actions: ArrayLike<number>): VecStepOutputs {
    const out: VecStepOutputs = {
      reward: new Float32Array(this.n),
      done: new Uint8Array(this.n),
      position: new Int32Array(this.n),
      cursor: new BigInt64Array(this.n),
      equity: new Float64Array(this.n),
      cost: new Float64Array(this.n),
      pnl: new Float64Array(this.n),
    };
    const r = this.result;
    for (let e = 0; e < this.n; e++) {
      const s = this.states[e] as EnvState;
      envStep(this.m, this.p, s, actions[3 * e] ?? 0, actions[3 * e + 1] ?? 0, actions[3 * e + 2] ?? 0, r);
      out.reward[e] = r.reward;
      out.done[e] = r.done ? 1 : 0;
      out.position[e] = s.pos;
      out.cursor[e] = BigInt(s.t);
      out.equity[e] = s.equity;
      out.cost[e] = r.cost;
      out.pnl[e] = r.pnl;
      if (r.done) envReset(this.m, this.p, s, this.seed, e, this.counter + 1n);
    }
    this.counter += 1n;
    return out;
  }

  /** Observations (N, D). */
  observe(): Float32Array {
    const out = new Float32Array(this.n * this.dim);
    for (let e = 0; e < this.n; e++) envObserve(this.m, this.p, this.states[e] as EnvState, out, e * this.dim);
    return out;
  }
}
