/** The koffi binding against the real CPU library (npm run build:native). */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { defaultRunConfig } from '../../src/config/schema.js';
import { FoxhuntError } from '../../src/errors.js';
import { cString, FH_ABI_VERSION, FhStatus, loadNative, structMembers } from '../../src/native/binding.js';
import type { FhConfig, FhInfo } from '../../src/native/binding.js';
import { libraryPath } from '../../src/native/paths.js';
import { resolveBackend, toNativeConfig } from '../../src/native/trainer.js';

describe('native binding (CPU library)', () => {
  it('loads once per library, with ABI version, version string and the file sha256', () => {
    const lib = loadNative('cpu');
    expect(loadNative('cpu')).toBe(lib);
    expect(lib.fh_abi_version()).toBe(FH_ABI_VERSION);
    expect(lib.missing, 'the CPU library exports every entry point of foxhunt.h').toEqual([]);
    expect(lib.version).toMatch(/cpu/);
    expect(lib.path).toBe(libraryPath('cpu'));
    expect(lib.sha256).toBe(createHash('sha256').update(readFileSync(libraryPath('cpu'))).digest('hex'));
    expect(lib.fh_status_string(FhStatus.ERR_INVALID_CONFIG)).not.toBe(lib.fh_status_string(FhStatus.OK));
  });

  it('fh_default_config round-trips: the C defaults are the RunConfig defaults and validate', () => {
    const lib = loadNative('cpu');
    const out: Partial<FhConfig> = {};
    expect(lib.fh_default_config(out)).toBe(FhStatus.OK);
    expect(Object.keys(out).sort()).toEqual([...structMembers('fh_config')].sort());
    const fromTs = toNativeConfig(defaultRunConfig()) as unknown as Record<string, unknown>;
    const fromC = out as Record<string, unknown>;
    const mismatches: string[] = [];
    for (const k of Object.keys(fromTs)) {
      const a = fromTs[k];
      const b = fromC[k];
      const same = JSON.stringify(a) === JSON.stringify(b)
        || (typeof a === 'number' && typeof b === 'number' && Math.fround(a) === b)
        || (typeof b === 'bigint' && BigInt(a as number) === b);
      if (!same) mismatches.push(`${k}: ts ${String(a)} c ${String(b)}`);
    }
    expect(mismatches).toEqual([]);
    const err = Buffer.alloc(512);
    expect(lib.fh_validate_config(out as FhConfig, err, err.length), cString(err)).toBe(FhStatus.OK);
  });

  it('fh_validate_config names the bad field', () => {
    const lib = loadNative('cpu');
    const cfg: Partial<FhConfig> = {};
    lib.fh_default_config(cfg);
    cfg.n_envs = 0;
    const err = Buffer.alloc(512);
    expect(lib.fh_validate_config(cfg as FhConfig, err, err.length)).toBe(FhStatus.ERR_INVALID_CONFIG);
    expect(cString(err)).toMatch(/n_envs/);
  });

  it('describes the host and reports no CUDA device', () => {
    const lib = loadNative('cpu');
    const n: [number] = [-1];
    expect(lib.fh_device_count(n)).toBe(FhStatus.OK);
    expect(n[0]).toBe(0);
    const info: Partial<FhInfo> = {};
    expect(lib.fh_device_info(-1, info)).toBe(FhStatus.OK);
    expect(typeof info.device_name).toBe('string');
    expect(info.device_name?.length).toBeGreaterThan(0);
    expect(['cpu', 'cuda']).toContain(resolveBackend('auto'));
  });

  it('fails clearly when the library is not built', () => {
    let caught: unknown;
    try {
      loadNative('cpu', '/nonexistent/foxhunt-native');
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(FoxhuntError);
    expect((caught as Error).message).toMatch(/native library not built.*npm run build:native/);
  });
});
