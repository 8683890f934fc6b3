import { describe, expect, it } from 'vitest';
import { philox4x32_10, philoxDraw, PhiloxStream, scaleU32 } from '../../src/env/philox.js';

const hex = (a: Uint32Array): string[] => [...a].map((x) => x.toString(16).padStart(8, '0'));

describe('Philox-4x32-10', () => {
  it('matches the Random123 known-answer vectors', () => {
    expect(hex(philox4x32_10([0, 0, 0, 0], [0, 0]))).toEqual(['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']);
    expect(hex(philox4x32_10([0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff], [0xffffffff, 0xffffffff])))
      .toEqual(['408f276d', '41c83b0e', 'a20bc7c6', '6d5451fd']);
    expect(hex(philox4x32_10([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0])))
      .toEqual(['d16cfe09', '94fdcceb', '5001e420', '24126ea1']);
  });

  it('lays out (seed, a, b, purpose) as key (lo, hi), counter (a, b lo, b hi, purpose)', () => {
    const seed = 0x0000000700000005n;
    const b = 0x0000000300000002n;
    expect([...philoxDraw(seed, 1, b, 4)]).toEqual([...philox4x32_10([1, 2, 3, 4], [5, 7])]);
  });

  it('scales a uint32 onto 0..n-1 as (u * n) >> 32', () => {
    expect(scaleU32(0, 10)).toBe(0);
    expect(scaleU32(0xffffffff, 10)).toBe(9);
    expect(scaleU32(0x80000000, 10)).toBe(5);
    expect(scaleU32(0xffffffff, 2 ** 31 + 7)).toBe(2 ** 31 + 6);
  });

  it('streams are deterministic and roughly uniform/normal', () => {
    const a = new PhiloxStream(9, 1);
    const b = new PhiloxStream(9, 1);
    const c = new PhiloxStream(9, 2);
    let same = 0;
    let sum = 0;
    let sq = 0;
    const n = 20000;
    for (let i = 0; i < n; i++) {
      const x = a.normal();
      expect(b.normal()).toBe(x);
      if (c.normal() === x) same++;
      sum += x;
      sq += x * x;
    }
    expect(same).toBe(0);
    expect(Math.abs(sum / n)).toBeLessThan(0.05);
    expect(Math.abs(sq / n - 1)).toBeLessThan(0.05);
  });
});
