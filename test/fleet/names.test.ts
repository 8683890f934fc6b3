import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

const names = fileURLToPath(new URL('../../src/queue/names.ts', import.meta.url));

/** The queue names a fresh process resolves under the given environment. */
function queueNames(env: Record<string, string>): { epochs: string; sweeps: string } {
  const code = `const m = await import(${JSON.stringify(names)}); console.log(JSON.stringify({ epochs: m.epochsQueueName(), sweeps: m.sweepsQueueName() }));`;
  const base = { ...process.env };
  delete base['FOXHUNT_PREFIX'];
  delete base['FOXHUNT_EPOCHS_QUEUE'];
  delete base['FOXHUNT_SWEEPS_QUEUE'];
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    encoding: 'utf8', env: { ...base, ...env },
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { epochs: string; sweeps: string };
}

describe('queue names', () => {
  test('the default fleet uses the documented queues', () => {
    expect(queueNames({})).toEqual({ epochs: 'foxhunt-epochs', sweeps: 'foxhunt-sweeps' });
  });

  test('a fleet with its own key prefix gets its own queues, so its workers never take another fleet\'s jobs', () => {
    expect(queueNames({ FOXHUNT_PREFIX: 'staging' })).toEqual({ epochs: 'foxhunt-epochs-staging', sweeps: 'foxhunt-sweeps-staging' });
  });

  test('explicit queue names win', () => {
    expect(queueNames({ FOXHUNT_PREFIX: 'staging', FOXHUNT_EPOCHS_QUEUE: 'e', FOXHUNT_SWEEPS_QUEUE: 's' })).toEqual({ epochs: 'e', sweeps: 's' });
  });
});
