/**
 * Greedy evaluation over the validation range (DESIGN.md §4 "Evaluation"), with the same env step
 * as training (src/env/reference.ts):
 * - the range [valBegin, valEnd) is cut into `segments` contiguous pieces on session boundaries
 *   (sessions are dealt out evenly: segment i gets sessions ⌊i·S/n⌋ .. ⌊(i+1)·S/n⌋ − 1);
 * - each segment starts flat with its cursor at its first bar (the observation window reaches back
 *   before valBegin, which is allowed: features are causal), steps until its last bar, then is
 *   flattened at its last close (paying costs);
 * - there are no episodes: when the step count k reaches T it restarts at 0 and `realised` and
 *   `equity` restart at 0 (the position is kept), so the account features stay in their training
 *   range;
 * - the PnL of the step t → t+1 is booked to the session of bar t+1; the final flatten to the session
 *   of the segment's last bar. Metrics follow (src/env/metrics.ts); turnover = contracts / val bars.
 * Baselines: flat (target 0) and buy-and-hold (target +max_contracts every step), same code.
 */
import type { Split } from '../data/types.js';
import { FoxhuntError } from '../errors.js';
import { computeMetrics } from './metrics.js';
import type { Metrics } from './metrics.js';
import {
  actionForTarget, envFlatten, envObserve, envStep, newState, newStepResult, obsDim,
} from './reference.js';
import type { EnvParams, EnvState, MarketView } from './reference.js';

/**
 * A policy acts for n envs at once. obs: (n, D) when `needsObs`, else undefined. cursors: bar t of
 * each env. Writes (n, 3) actions into `out`.
 */
export interface Policy {
  needsObs: boolean;
  act(obs: Float32Array | undefined, cursors: Int32Array, n: number, out: Int32Array): void;
}

/** A policy from a function of the bar cursor to a target position (no observation needed). */
export function targetPolicy(p: EnvParams, target: (t: number) => number, stop = 0): Policy {
  const cache = new Map<number, [number, number]>();
  return {
    needsObs: false,
    act(_obs, cursors, n, out) {
      for (let e = 0; e < n; e++) {
        const tgt = target(cursors[e] as number);
        let a = cache.get(tgt);
        if (a === undefined) {
          a = actionForTarget(p, tgt);
          cache.set(tgt, a);
        }
        out[3 * e] = a[0];
        out[3 * e + 1] = a[1];
        out[3 * e + 2] = stop;
      }
    },
  };
}

export const flatPolicy = (p: EnvParams): Policy => targetPolicy(p, () => 0);
export const buyHoldPolicy = (p: EnvParams): Policy => targetPolicy(p, () => p.maxContracts);

/** Segments [begin, end) of the validation range on session boundaries. */
export function evalSegments(sessionStart: Uint8Array, valBegin: number, valEnd: number, segments: number): Array<[number, number]> {
  const starts: number[] = [valBegin];
  for (let i = valBegin + 1; i < valEnd; i++) if (sessionStart[i] === 1) starts.push(i);
  const S = starts.length;
  const n = Math.max(1, Math.min(segments, S));
  const out: Array<[number, number]> = [];
  for (let i = 0; i < n; i++) {
    const a = Math.floor((i * S) / n);
    const b = Math.floor(((i + 1) * S) / n);
    const begin = starts[a] as number;
    const end = b < S ? (starts[b] as number) : valEnd;
    if (end - begin >= 1) out.push([begin, end]);
  }
  return out;
}

export interface EvalResult {
  metrics: Metrics;
  sessionPnl: Float64Array;
  stepPnl: Float64Array;
}

/** Simulate a policy over the validation split (all segments in parallel) and compute the metrics. */
export function evaluatePolicy(
  m: MarketView,
  p: EnvParams,
  split: Pick<Split, 'valBegin' | 'valEnd'>,
  policy: Policy,
  opts: { segments: number; initialCapital: number },
): EvalResult {
  const { valBegin, valEnd } = split;
  if (valBegin < p.window - 1) {
    throw new FoxhuntError('CONFIG_INVALID', `validation starts at bar ${valBegin}, before a full window of ${p.window} bars`, { where: 'env.window' });
  }
  const segs = evalSegments(m.sessionStart, valBegin, valEnd, opts.segments);
  const n = segs.length;
  const dim = obsDim(p, m.nFeatures);

  // session index of every validation bar
  const sessionOf = new Int32Array(valEnd - valBegin);
  let sess = 0;
  for (let i = valBegin; i < valEnd; i++) {
    if (i > valBegin && m.sessionStart[i] === 1) sess++;
    sessionOf[i - valBegin] = sess;
  }
  const sessionPnl = new Float64Array(sess + 1);
  // step PnL by the bar it is booked to (t+1; the final flatten adds to the last bar's slot, after it)
  const barPnl = new Float64Array(valEnd - valBegin);
  const flattenPnl = new Float64Array(valEnd - valBegin);

  const states: EnvState[] = segs.map(([b]) => {
    const s = newState();
    s.t = b;
    return s;
  });
  const live = segs.map(([b, e]) => e - b > 1);
  const r = newStepResult();
  const cursors = new Int32Array(n);
  const actions = new Int32Array(3 * n);
  const obs = policy.needsObs ? new Float32Array(n * dim) : undefined;
  let trades = 0;
  let won = 0;
  let grossProfit = 0;
  let grossLoss = 0;
  let contracts = 0;
  const book = (bar: number, into: Float64Array): void => {
    into[bar - valBegin] = (into[bar - valBegin] as number) + r.pnl;
    const si = sessionOf[bar - valBegin] as number;
    sessionPnl[si] = (sessionPnl[si] as number) + r.pnl;
    trades += r.tradesClosed;
    won += r.tradesWon;
    grossProfit += r.grossProfit;
    grossLoss += r.grossLoss;
    contracts += r.traded;
  };

  for (;;) {
    let any = false;
    for (let e = 0; e < n; e++) {
      const s = states[e] as EnvState;
      cursors[e] = s.t;
      if (live[e]) any = true;
      if (obs && live[e]) envObserve(m, p, s, obs, e * dim);
    }
    if (!any) break;
    policy.act(obs, cursors, n, actions);
    for (let e = 0; e < n; e++) {
      if (!live[e]) continue;
      const s = states[e] as EnvState;
      const end = (segs[e] as [number, number])[1];
      envStep(m, p, s, actions[3 * e] as number, actions[3 * e + 1] as number, actions[3 * e + 2] as number, r);
      book(s.t, barPnl);
      if (s.k === p.episodeLen) {
        s.k = 0;
        s.realised = 0;
        s.equity = 0;
      }
      if (s.t === end - 1) live[e] = false;
    }
  }
  // flatten every segment at its last close
  for (let e = 0; e < n; e++) {
    const s = states[e] as EnvState;
    Object.assign(r, newStepResult());
    envFlatten(m, p, s, r);
    book(s.t, flattenPnl);
  }
  const stepPnl = new Float64Array(2 * (valEnd - valBegin));
  for (let i = 0; i < valEnd - valBegin; i++) {
    stepPnl[2 * i] = barPnl[i] as number;
    stepPnl[2 * i + 1] = flattenPnl[i] as number;
  }
  const metrics = computeMetrics({
    sessionPnl,
    stepPnl,
    tradesClosed: trades,
    tradesWon: won,
    grossProfit,
    grossLoss,
    contractsTraded: contracts,
    bars: valEnd - valBegin,
    initialCapital: opts.initialCapital,
  });
  return { metrics, sessionPnl, stepPnl };
}

export interface EvalReport {
  val: Metrics;
  flat: Metrics;
  buy_hold: Metrics;
}

/** A policy and both baselines. */
export function evaluateWithBaselines(
  m: MarketView,
  p: EnvParams,
  split: Pick<Split, 'valBegin' | 'valEnd'>,
  policy: Policy,
  opts: { segments: number; initialCapital: number },
): EvalReport {
  return {
    val: evaluatePolicy(m, p, split, policy, opts).metrics,
    flat: evaluatePolicy(m, p, split, flatPolicy(p), opts).metrics,
    buy_hold: evaluatePolicy(m, p, split, buyHoldPolicy(p), opts).metrics,
  };
}
