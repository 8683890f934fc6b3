/**
 * REDIS_URL with a password over TLS (rediss://) against a private TLS redis-server with a
 * throwaway CA: the CLI and a worker connect and a run completes; a missing CA or a wrong
 * password gives a clear error.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueueEpochs } from '../../src/queue/queues.js';
import { RunStore } from '../../src/redis/runs.js';
import { ROOT, fleetEnv, freePort, hasRedisServer, startWorker, tinyConfig, waitUntil } from './helpers.js';
import type { FleetEnv } from './helpers.js';

function canMakeCerts(): boolean {
  return spawnSync('openssl', ['version']).status === 0 && hasRedisServer();
}

const dir = mkdtempSync(join(tmpdir(), 'fh-tls-'));
let server: ChildProcess | null = null;
let port = 0;
let env: FleetEnv | null = null;
const savedCa = process.env['FOXHUNT_REDIS_CA'];

function sh(args: string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed`);
}

function cli(args: string[], extra: Record<string, string>): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'foxhunt.js'), ...args], {
    cwd: ROOT, encoding: 'utf8', env: { ...process.env, FOXHUNT_PREFIX: env?.prefix ?? 'fhtls', ...extra },
  });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

describe.skipIf(!canMakeCerts())('rediss:// with a password', () => {
  beforeAll(async () => {
    sh(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=fh-test-ca']);
    sh(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost']);
    writeFileSync(join(dir, 'ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1');
    sh(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '1', '-extfile', 'ext']);
    port = await freePort();
    server = spawn('redis-server', ['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
      '--tls-cert-file', 'server.crt', '--tls-key-file', 'server.key', '--tls-ca-cert-file', 'ca.crt', '--tls-auth-clients', 'no',
      '--requirepass', 's3cret'], { cwd: dir, stdio: 'ignore' });
    process.env['FOXHUNT_REDIS_CA'] = join(dir, 'ca.crt');
    await waitUntil('TLS redis-server', async () => cli(['runs'], { REDIS_URL: `rediss://:s3cret@localhost:${port}` }).code === 0, 15_000, 200);
  });
  afterAll(async () => {
    await env?.cleanup();
    if (savedCa === undefined) delete process.env['FOXHUNT_REDIS_CA'];
    else process.env['FOXHUNT_REDIS_CA'] = savedCa;
    const s = server;
    if (s !== null && s.exitCode === null) {
      const gone = new Promise((r) => s.once('exit', r));
      s.kill('SIGTERM');
      await gone;
    }
  });

  it('the CLI and a worker connect over TLS with the password; a run completes', async () => {
    const url = `rediss://:s3cret@localhost:${port}`;
    env = fleetEnv(url);
    const e = env;
    startWorker(e, { FOXHUNT_REDIS_CA: join(dir, 'ca.crt') });
    await enqueueEpochs(e.queue, e.redis, e.keys, { runId: 'tls1', epochs: 2, config: tinyConfig() });
    const runs = new RunStore(e.redis, e.keys);
    const run = await waitUntil('run over TLS', async () => {
      const r = await runs.require('tls1');
      return r.status === 'completed' ? r : null;
    }, 60_000);
    expect(run.committedEpoch).toBe(2);
    const listed = cli(['runs', '--json'], { REDIS_URL: url, FOXHUNT_PREFIX: e.prefix });
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.out) as { runId: string }[]).map((r) => r.runId)).toEqual(['tls1']);
  });

  it('a wrong password or an unknown CA is a clear error', () => {
    const wrong = cli(['runs'], { REDIS_URL: `rediss://:nope@localhost:${port}` });
    expect(wrong.code).toBe(1);
    expect(wrong.err).toMatch(/cannot reach Redis at rediss:\/\/:\*\*\*@localhost:\d+\/?: .*(WRONGPASS|invalid|password)/i);
    const noCa = cli(['runs'], { REDIS_URL: `rediss://:s3cret@localhost:${port}`, FOXHUNT_REDIS_CA: '' });
    expect(noCa.code).toBe(1);
    expect(noCa.err).toMatch(/cannot reach Redis at rediss:.*(certificate|self.signed)/i);
  });
});
