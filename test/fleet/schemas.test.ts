/** Job schemas and connection options: readable reasons naming the field, confinement, URLs. */
import { describe, expect, it } from 'vitest';
import { FoxhuntError } from '../../src/errors.js';
import { connectionOptions, redactUrl } from '../../src/queue/connection.js';
import { toJobError } from '../../src/queue/retry.js';
import { parseEpochsJob, parsePrecomputeJob } from '../../src/queue/schemas.js';
import { UnrecoverableError } from 'bullmq';
import { tinyConfig } from './helpers.js';

function reason(fn: () => unknown): FoxhuntError {
  try {
    fn();
  } catch (err) {
    if (err instanceof FoxhuntError) return err;
    throw err;
  }
  throw new Error('expected an error');
}

describe('epochs job schema', () => {
  it('accepts a new-run job and a continue job', () => {
    const cfg = tinyConfig();
    expect(parseEpochsJob({ runId: 'r-1', epochs: 3, config: cfg }).config?.seed).toBe(1);
    expect(parseEpochsJob({ runId: 'r-1', epochs: 3 })).toEqual({ runId: 'r-1', epochs: 3 });
  });

  it('names the missing field, the wrong type and the unknown key', () => {
    const missing = reason(() => parseEpochsJob({ runId: 'r' }));
    expect(missing.code).toBe('JOB_INVALID');
    expect(missing.where).toBe('data.epochs');
    expect(missing.message).toMatch(/data\.epochs: .*required/);

    const wrong = reason(() => parseEpochsJob({ runId: 'r', epochs: 2, config: { agent: { lr: 'fast' } } }));
    expect(wrong.where).toBe('data.config.agent.lr');
    expect(wrong.message).toMatch(/data\.config\.agent\.lr: expected number/);

    const unknown = reason(() => parseEpochsJob({ runId: 'r', epochs: 2, password: 'x' }));
    expect(unknown.message).toMatch(/data\.password: unknown key/);

    const badId = reason(() => parseEpochsJob({ runId: '../etc', epochs: 2 }));
    expect(badId.where).toBe('data.runId');
  });

  it('confines data paths to the data root', () => {
    const cfg = tinyConfig(['data.source="csv"', 'data.path="../../etc/passwd"']);
    const e = reason(() => parseEpochsJob({ runId: 'r', epochs: 1, config: cfg }, '/tmp/fh-root'));
    expect(e.code).toBe('PATH_OUTSIDE_DATA_ROOT');
    expect(e.where).toBe('data.config.data.path');
    const abs = tinyConfig(['data.source="csv"', 'data.path="/etc/passwd"']);
    expect(reason(() => parsePrecomputeJob({ config: abs }, '/tmp/fh-root')).code).toBe('PATH_OUTSIDE_DATA_ROOT');
    const ok = tinyConfig(['data.source="csv"', 'data.path="es/2024.csv"']);
    expect(parsePrecomputeJob({ config: ok }, '/tmp/fh-root').config.data.path).toBe('es/2024.csv');
  });

  it('maps the catalogue onto the retry policy', () => {
    expect(toJobError(new FoxhuntError('JOB_INVALID', 'bad'))).toBeInstanceOf(UnrecoverableError);
    expect(toJobError(new FoxhuntError('DIVERGED', 'nan'))).toBeInstanceOf(UnrecoverableError);
    const crash = toJobError(new FoxhuntError('TRAINER_CRASHED', 'died'));
    expect(crash).not.toBeInstanceOf(UnrecoverableError);
    expect(crash.message).toMatch(/^\[TRAINER_CRASHED\]/);
  });
});

describe('REDIS_URL', () => {
  it('carries user, password, db and TLS', () => {
    const o = connectionOptions('rediss://fleet:s%40cret@redis.example:6380/2');
    expect(o).toMatchObject({ host: 'redis.example', port: 6380, username: 'fleet', password: 's@cret', db: 2 });
    expect(o.tls).toEqual({ servername: 'redis.example' });
    expect(connectionOptions('redis://:pw@10.0.0.1').tls).toBeUndefined();
    expect(connectionOptions('redis://:pw@10.0.0.1').password).toBe('pw');
    expect(redactUrl('redis://:pw@10.0.0.1:6379')).not.toContain('pw');
    expect(() => connectionOptions('http://x')).toThrow(/REDIS_URL: unsupported scheme/);
  });
});
