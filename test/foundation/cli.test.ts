import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Command } from 'commander';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { register } from '../../producer/commands/data.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const cache = mkdtempSync(join(tmpdir(), 'fh-cli-'));
afterAll(() => rmSync(cache, { recursive: true, force: true }));

/** Run a data command in-process; returns its stdout or throws its error. */
async function foxhunt(...args: string[]): Promise<string> {
  const program = new Command('foxhunt').exitOverride();
  register(program);
  let out = '';
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += String(chunk);
    return true;
  });
  try {
    await program.parseAsync(['node', 'foxhunt', ...args]);
  } finally {
    spy.mockRestore();
  }
  return out;
}

describe('foxhunt data commands', () => {
  it('inspect summarises a file and names the line of a bad row', async () => {
    const out = await foxhunt('inspect', join(ROOT, 'test/fixtures/data/databento_ok.csv'));
    expect(out).toMatch(/format\s+databento/);
    expect(out).toMatch(/bars\s+4\n/);
    expect(out).toMatch(/sessions\s+2\n/);
    expect(out).toMatch(/gaps inside sessions\s+1 \(1 missing minutes/);
    await expect(foxhunt('inspect', join(ROOT, 'test/fixtures/data/generic_bad_high.csv')))
      .rejects.toThrow(/generic_bad_high\.csv:4: high 5101 is below max/);
  });

  it('features reports a miss, then a hit', async () => {
    const args = ['features', '--config', 'tiny', '--set', 'data.synthetic.days=12', '--cache-dir', cache];
    expect((await foxhunt(...args)).split('\n')[0]).toBe('fxcache miss');
    expect((await foxhunt(...args)).split('\n')[0]).toBe('fxcache hit');
  });

  it('oracle prints a positive after-cost Sharpe beside the baselines', async () => {
    const out = await foxhunt('oracle', '--config', 'tiny');
    const row = /^sharpe\s+(\S+)\s+(\S+)\s+(\S+)$/m.exec(out);
    expect(row).not.toBeNull();
    expect(Number(row![1])).toBeGreaterThan(3);
    expect(row![2]).toBe('null');
    await expect(foxhunt('oracle', '--config', 'tiny', '--set', 'data.synthetic.market=null')).rejects.toThrow(/edge market only/);
  });

  it('the real binary runs a data command end to end', async () => {
    const r = await promisify(execFile)(process.execPath, [join(ROOT, 'bin', 'foxhunt.js'), 'inspect', 'test/fixtures/data/ninjatrader_ok.txt'], { cwd: ROOT });
    expect(r.stdout).toMatch(/format\s+ninjatrader/);
    expect(r.stdout).toMatch(/first\s+2024-03-04T14:30:00.000Z/);
  });
});
