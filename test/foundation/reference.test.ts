import { describe, expect, it } from 'vitest';
import {
  envAccount, envObserve, envReset, envStep, envTarget, newState, newStepResult, ReferenceEnv,
} from '../../src/env/reference.js';
import { philoxDraw, PURPOSE } from '../../src/env/philox.js';
import { esParams, FLAT, handMarket, LONG, SHORT } from './helpers.js';

describe('action decoding', () => {
  it('maps direction x size onto contracts with integer ceil division', () => {
    const p = esParams({ maxContracts: 4 });
    expect(envTarget(p, 1, 3)).toBe(0);
    expect([0, 1, 2, 3].map((a1) => envTarget(p, 2, a1))).toEqual([1, 2, 3, 4]);
    expect([0, 1, 2, 3].map((a1) => envTarget(p, 0, a1))).toEqual([-1, -2, -3, -4]);
    const p5 = esParams({ nDir: 5, maxContracts: 3 });
    // m = 2: j = 1, a1 = 0 -> ceil(1*1*3/8) = 1; j = 2, a1 = 3 -> ceil(2*4*3/8) = 3
    expect(envTarget(p5, 3, 0)).toBe(1);
    expect(envTarget(p5, 4, 3)).toBe(3);
    expect(envTarget(p5, 0, 1)).toBe(-2); // ceil(2*2*3/8) = 2
  });
});

describe('env step, hand-checked', () => {
  const m = handMarket({
    open: [100, 101, 104, 103, 106, 105],
    high: [100.5, 103.5, 104.5, 104, 107, 106],
    low: [99.5, 100.5, 102.5, 102, 105.5, 104],
    close: [100, 103, 103.5, 104, 106.5, 105.5],
    atr: [2, 2, 2, 2, 2, 2],
    sessionStart: [1, 0, 0, 0, 1, 0],
  });
  const p = esParams();

  it('a fill pays slippage and commission; marks to the close; closing realises the trade', () => {
    const s = newState();
    const r = newStepResult();
    s.t = 0;
    envStep(m, p, s, LONG[0], LONG[1], 0, r);
    // buy 1 at open[1] + 0.25 = 101.25; cost 2.25 + 0.25*50 = 14.75; mark (103 - 101)*50 = 100
    expect(r.cost).toBe(14.75);
    expect(r.pnl).toBe(85.25);
    expect(r.reward).toBe(Math.fround(0.8525));
    expect(r.traded).toBe(1);
    expect(s).toMatchObject({ t: 1, pos: 1, avgEntry: 101.25, equity: 85.25, k: 1, barsHeld: 1, hasStop: false });
    const acc = new Float32Array(8);
    envAccount(m, p, s, acc);
    // unrealised (103 - 101.25)*50 = 87.5 -> 0.875
    expect([...acc]).toEqual([1, 0.875, 0.01, 0, 0, 0.01, 1, 0].map(Math.fround));

    envStep(m, p, s, FLAT[0], FLAT[1], 0, r);
    // gap mark (104 - 103)*50 = 50; sell at 103.75, cost 14.75; realised (103.75 - 101.25)*50 = 125
    expect(r.pnl).toBe(35.25);
    expect(s.realised).toBe(125);
    expect(r.tradesClosed).toBe(1);
    expect(r.tradesWon).toBe(1);
    expect(r.grossProfit).toBe(120.5); // 85.25 + 35.25: the trade's PnL includes both fills' costs
    expect(s.equity).toBe(120.5);
    expect(s.pos).toBe(0);
  });

  it('a long stop is hit inside bar t+1 and exits at the level minus slippage', () => {
    const s = newState();
    const r = newStepResult();
    // at t = 1: buy at open[2] = 104 (fill 104.25), stop choice 1 -> dist = 1*1*atr[1] = 2, level 102;
    // low[2] = 102.5 > 102: no hit, mark (103.5 - 104)*50 = -25
    s.t = 1;
    envStep(m, p, s, LONG[0], LONG[1], 1, r);
    expect(r.pnl).toBe(-14.75 - 25);
    expect(s).toMatchObject({ pos: 1, hasStop: true, stop: 102, stopDist: 2 });
    const acc = new Float32Array(8);
    envAccount(m, p, s, acc);
    expect(acc[3]).toBe(1); // dist / atr
    expect(acc[4]).toBe(1);
    // a bar that reaches the level: buy at open[1] = 101 with a 2-point stop at 99
    const m2 = handMarket({ open: [100, 101, 99], high: [100, 101.5, 100], low: [100, 98.5, 98], close: [100, 100, 99], atr: [2, 2, 2] });
    const s2 = newState();
    envStep(m2, p, s2, LONG[0], LONG[1], 1, r);
    // level = 101 - 2 = 99; low 98.5 <= 99: exit at 98.75; bar = (99 - 101)*50 - 14.75; fill cost 14.75
    expect(r.pnl).toBe(-129.5);
    expect(r.cost).toBe(29.5);
    expect(r.traded).toBe(2);
    expect(s2.realised).toBe(-125);
    expect(s2).toMatchObject({ pos: 0, hasStop: false, barsHeld: 0 });
    expect(r.tradesClosed).toBe(1);
    expect(r.grossLoss).toBe(129.5);
  });

  it('a short stop triggers on the high', () => {
    const m3 = handMarket({ open: [100, 100, 100], high: [100, 102.25, 100], low: [100, 99, 100], close: [100, 99.5, 100], atr: [1, 1, 1] });
    const s = newState();
    const r = newStepResult();
    envStep(m3, p, s, SHORT[0], SHORT[1], 2, r); // dist 2: level 102 <= high 102.25
    // sell at 99.75 (cost 14.75), stop buys at 102.25: bar = -1*(102 - 100)*50 - 14.75
    expect(r.pnl).toBe(-14.75 - 100 - 14.75);
    expect(s.realised).toBe((99.75 - 102.25) * 50);
    expect(s.pos).toBe(0);
  });

  it('flattens at a session break, paying costs, then fills again at the open', () => {
    const s = newState();
    const r = newStepResult();
    s.t = 2;
    envStep(m, p, s, LONG[0], LONG[1], 0, r); // buy at open[3] = 103 -> 103.25; mark (104 - 103)*50
    expect(r.pnl).toBe(50 - 14.75);
    envStep(m, p, s, LONG[0], LONG[1], 0, r); // session_start[4]: sell at 104 - 0.25, rebuy at 106.25
    // flatten -14.75, no gap mark (flat across the gap), fill -14.75, mark (106.5 - 106)*50 = 25
    expect(r.pnl).toBe(-14.75 - 14.75 + 25);
    expect(r.cost).toBe(29.5);
    expect(r.tradesClosed).toBe(1);
    expect(s).toMatchObject({ pos: 1, avgEntry: 106.25, barsHeld: 1, t: 4 });
    expect(s.realised).toBe((103.75 - 103.25) * 50);

    // without flattening the position is held through the gap and marked at the open
    const held = newState();
    held.t = 2;
    const ph = esParams({ flattenAtSessionBreak: false });
    envStep(m, ph, held, LONG[0], LONG[1], 0, r);
    envStep(m, ph, held, LONG[0], LONG[1], 0, r);
    expect(r.pnl).toBe((106 - 104) * 50 + 25);
    expect(r.cost).toBe(0);
    expect(held.barsHeld).toBe(2);
  });

  it('flips close the old trade and open a new one at the same fill; adds average the entry', () => {
    const p2 = esParams({ maxContracts: 2, nSize: 2 });
    const mm = handMarket({ open: [100, 100, 102, 101], high: [100, 101, 103, 102], low: [100, 99, 101, 100], close: [100, 100, 102, 101] });
    const s = newState();
    const r = newStepResult();
    envStep(mm, p2, s, 2, 0, 0, r); // +1 at 100.25
    envStep(mm, p2, s, 2, 1, 0, r); // +2: add 1 at 102.25 -> avg 101.25
    expect(s.avgEntry).toBe(101.25);
    expect(s.pos).toBe(2);
    envStep(mm, p2, s, 0, 1, 0, r); // flip to -2 at 100.75: close 2 (realise (100.75-101.25)*2*50), open 2
    expect(s.realised).toBe(-50);
    expect(s.avgEntry).toBe(100.75);
    expect(s.pos).toBe(-2);
    expect(r.traded).toBe(4);
    expect(r.cost).toBe(4 * 14.75);
    expect(r.tradesClosed).toBe(1);
    expect(s.tradePnl).toBe(-2 * 14.75 + 0); // the new trade: its share of the fill's cost, bar mark 0
  });

  it('ends an episode after T steps or at the end of the train range', () => {
    const p2 = esParams({ episodeLen: 2 });
    const s = newState();
    const r = newStepResult();
    envStep(m, p2, s, FLAT[0], FLAT[1], 0, r);
    expect(r.done).toBe(false);
    envStep(m, p2, s, FLAT[0], FLAT[1], 0, r);
    expect(r.done).toBe(true);
    const short = handMarket({ open: [1, 1, 1, 1], high: [1, 1, 1, 1], low: [1, 1, 1, 1], close: [1, 1, 1, 1] }, 3);
    const s2 = newState();
    s2.t = 1;
    envStep(short, p, s2, FLAT[0], FLAT[1], 0, r);
    expect(r.done).toBe(true); // t = 2, t + 1 >= train_end
  });

  it('risk penalty and reward scale shape the float32 reward', () => {
    const s = newState();
    const r = newStepResult();
    envStep(m, esParams({ riskPenalty: 0.5, rewardScale: 1000 }), s, LONG[0], LONG[1], 0, r);
    expect(r.reward).toBe(Math.fround(85.25 / 1000 - 0.5));
  });
});

describe('vectorised reference env', () => {
  const n = 40;
  const bars = {
    open: Array.from({ length: n }, (_, i) => 100 + (i % 7) * 0.25),
    close: Array.from({ length: n }, (_, i) => 100 + ((i + 3) % 7) * 0.25),
    high: new Array<number>(n).fill(103),
    low: new Array<number>(n).fill(98),
  };
  const m = handMarket(bars, 30);
  m.features = Float32Array.from({ length: n }, (_, i) => i);
  const p = esParams({ window: 4, episodeLen: 5 });

  it('resets from Philox(seed, env, counter, RESET) into [lo, train_end - 2]', () => {
    const env = new ReferenceEnv(m, p, 77n, 8);
    for (let e = 0; e < 8; e++) {
      const u = philoxDraw(77n, e, 0n, PURPOSE.RESET)[0]!;
      const lo = 3;
      const span = 29 - lo;
      expect(env.states[e]!.t).toBe(lo + Math.floor((u * span) / 2 ** 32));
      expect(env.states[e]!.t).toBeGreaterThanOrEqual(lo);
      expect(env.states[e]!.t).toBeLessThanOrEqual(28);
    }
  });

  it('observes W feature rows oldest first then the account; resets after done with the step counter', () => {
    const env = new ReferenceEnv(m, p, 5n, 3);
    const obs = env.observe();
    expect(obs.length).toBe(3 * (4 + 8));
    const t0 = env.states[0]!.t;
    expect([...obs.subarray(0, 4)]).toEqual([t0 - 3, t0 - 2, t0 - 1, t0]);
    const actions = new Int32Array(9).fill(0);
    let doneSeen = false;
    for (let k = 0; k < 12; k++) {
      const counter = env.counter;
      const before = env.states.map((s) => s.t);
      const out = env.step(actions);
      for (let e = 0; e < 3; e++) {
        if (out.done[e] === 1) {
          doneSeen = true;
          const ref = newState();
          envReset(m, p, ref, 5n, e, counter + 1n); // DESIGN §4: a reset after a done on step c uses c + 1
          expect(env.states[e]!.t).toBe(ref.t);
          expect(env.states[e]!.k).toBe(0);
        } else {
          expect(env.states[e]!.t).toBe(before[e]! + 1);
        }
      }
    }
    expect(doneSeen).toBe(true);
    const o2 = new Float32Array(12);
    envObserve(m, p, env.states[1]!, o2);
    expect([...env.observe().subarray(12, 24)]).toEqual([...o2]);
  });
});
