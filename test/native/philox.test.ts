/**
 * Philox-4x32-10 of the native library (kernels/philox.cuh through fh_philox4x32_10): the Random123
 * known-answer vectors, and agreement with the TypeScript Philox on random counters and keys.
 */
import { describe, expect, test } from 'vitest';
import { philox4x32_10 } from '../../src/env/philox.js';
import { lib, rng } from './helpers.js';

const KAT: Array<{ ctr: number[]; key: number[]; out: number[] }> = [
  { ctr: [0, 0, 0, 0], key: [0, 0], out: [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8] },
  {
    ctr: [0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff],
    key: [0xffffffff, 0xffffffff],
    out: [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
  },
  {
    ctr: [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
    key: [0xa4093822, 0x299f31d0],
    out: [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
  },
];

describe('native philox4x32_10', () => {
  test.each(KAT)('known answer %#', ({ ctr, key, out }) => {
    const got = new Uint32Array(4);
    lib().fh_philox4x32_10(Uint32Array.from(ctr), Uint32Array.from(key), got);
    expect(Array.from(got)).toEqual(out);
  });

  test('matches the TypeScript Philox on 2000 random counters and keys', () => {
    const r = rng(7);
    const word = (): number => Math.floor(r() * 2 ** 32) >>> 0;
    const got = new Uint32Array(4);
    for (let i = 0; i < 2000; i++) {
      const ctr = Uint32Array.of(word(), word(), word(), word());
      const key = Uint32Array.of(word(), word());
      lib().fh_philox4x32_10(ctr, key, got);
      expect(Array.from(got)).toEqual(Array.from(philox4x32_10(ctr, key)));
    }
  });
});
