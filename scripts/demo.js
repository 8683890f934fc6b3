#!/usr/bin/env node
// `npm run demo`: the fleet end to end on this machine, in about a minute.
//   1. Redis: $REDIS_URL, else 127.0.0.1:6379, else a private redis-server on a free port (when one
//      is installed); with none of these it says how to get one and stops.
//   2. Starts one foxhunt-worker (its GPU when there is one and the CUDA library is built, else the
//      CPU backend); its JSON log goes to a file.
//   3. Enqueues a tiny run (config/runs/tiny.toml) and follows it: one row per epoch as it lands.
//      (FOXHUNT_DEMO_PRIVATE_REDIS=1 skips the local one and starts a private server.)
//   4. Stops what it started and says where the dashboard is and how to run the real thing.
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const EPOCHS = Number(process.env.DEMO_EPOCHS ?? 5);
const say = (s = '') => process.stdout.write(`${s}\n`);
const started = [];

function redact(url) {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

/** Resolves true when a TCP connection to host:port opens within `ms`. */
function reachable(host, port, ms = 800) {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    const done = (ok) => { s.destroy(); resolve(ok); };
    s.setTimeout(ms, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

async function waitFor(what, fn, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function findRedis() {
  if (process.env.REDIS_URL) {
    const u = new URL(process.env.REDIS_URL);
    if (await reachable(u.hostname, Number(u.port || 6379))) return { url: process.env.REDIS_URL, note: 'REDIS_URL' };
    throw new Error(`REDIS_URL=${redact(process.env.REDIS_URL)} does not answer. Start that Redis, or unset REDIS_URL to use a local one.`);
  }
  const forcePrivate = process.env.FOXHUNT_DEMO_PRIVATE_REDIS === '1';
  if (!forcePrivate && await reachable('127.0.0.1', 6379)) return { url: 'redis://127.0.0.1:6379', note: 'the local Redis on 127.0.0.1:6379' };
  if (spawnSync('redis-server', ['--version']).status === 0) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'foxhunt-demo-redis-'));
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no',
      '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' });
    started.push({ name: 'redis-server', proc });
    await waitFor('the private redis-server', () => reachable('127.0.0.1', port), 10_000);
    return { url: `redis://127.0.0.1:${port}`, note: `a private redis-server on port ${port} (stopped at the end)`, private: true };
  }
  throw new Error([
    'no Redis found: REDIS_URL is not set, nothing answers on 127.0.0.1:6379 and redis-server is not installed.',
    'Get one of:',
    '  docker run -d --name foxhunt-redis -p 6379:6379 redis:7 --maxmemory-policy noeviction',
    '  sudo apt-get install redis-server        (Debian/Ubuntu)',
    '  brew install redis && brew services start redis   (macOS)',
    'then run `npm run demo` again (or set REDIS_URL=redis://[:password@]host:port).',
  ].join('\n'));
}

async function stopAll() {
  for (const { name, proc } of started.reverse()) {
    if (proc.exitCode !== null || proc.signalCode !== null) continue;
    const gone = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    const t = setTimeout(() => proc.kill('SIGKILL'), name === 'worker' ? 20_000 : 5_000);
    await gone;
    clearTimeout(t);
  }
}

async function main() {
  say('foxhunt fleet demo: one worker, one tiny run, every epoch through Redis');
  say();
  const redis = await findRedis();
  say(`Redis:  ${redact(redis.url)} (${redis.note})`);
  const env = { ...process.env, REDIS_URL: redis.url };

  const logDir = mkdtempSync(join(tmpdir(), 'foxhunt-demo-'));
  const logFile = join(logDir, 'worker.log');
  const log = createWriteStream(logFile);
  const worker = spawn(process.execPath, [join(root, 'bin', 'foxhunt-worker.js'), '--health-port', '0'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push({ name: 'worker', proc: worker });
  let workerLog = '';
  const tee = (d) => { workerLog += d.toString(); log.write(d); };
  worker.stdout.on('data', tee);
  worker.stderr.on('data', tee);
  const workerExit = new Promise((r) => worker.once('exit', (code) => r(code)));
  await Promise.race([
    waitFor('the worker to start', () => workerLog.includes('"worker ready"'), 60_000),
    workerExit.then((code) => { throw new Error(`the worker exited (code ${code}) before it was ready:\n${workerLog.split('\n').slice(-5).join('\n')}`); }),
  ]);
  const backend = /"backend":"(cpu|cuda)"/.exec(workerLog)?.[1] ?? 'cpu';
  say(`Worker: pid ${worker.pid}, ${backend === 'cuda' ? 'GPU' : 'CPU backend (no GPU here)'}; its log: ${logFile}`);

  const runId = `demo-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-')}`;
  say(`Run:    ${runId}, config/runs/tiny.toml, ${EPOCHS} epochs`);
  say();
  const producer = spawn(process.execPath, [join(root, 'bin', 'foxhunt.js'), 'enqueue', '--config', join(root, 'config', 'runs', 'tiny.toml'),
    '--epochs', String(EPOCHS), '--run-id', runId, '--follow'], { cwd: root, env, stdio: 'inherit' });
  const code = await new Promise((r) => producer.once('exit', (c) => r(c ?? 1)));
  say();
  if (code !== 0) throw new Error(`the run did not complete (foxhunt enqueue exited ${code}); worker log: ${logFile}`);

  say('Done. Every epoch above was trained by the worker, committed to Redis once (stream entry');
  say(`<epoch>-1) with its checkpoint, and read back by the producer.`);
  say();
  say('Next:');
  if (redis.private) {
    say('  Dashboard and queue UI: start a Redis you keep (e.g. redis-server), then');
    say('    npx foxhunt dashboard --port 8080 --no-auth   -> http://127.0.0.1:8080 (bull-board at /queues)');
  } else {
    say(`  Dashboard and queue UI:  REDIS_URL=${redact(redis.url)} npx foxhunt dashboard --port 8080 --no-auth`);
    say('    -> http://127.0.0.1:8080 (bull-board at /queues); this run is there as ' + runId);
    say('    (--no-auth is for localhost only; set FOXHUNT_DASHBOARD_TOKEN to serve it with auth)');
    say(`  Inspect the run:         npx foxhunt show ${runId}   |   npx foxhunt export ${runId} --out ${runId}.ckpt`);
  }
  say('  The real thing, on a GPU host:');
  say('    npx foxhunt-worker --gpus all                               # one worker per GPU');
  say('    npx foxhunt enqueue --config config/runs/reference.toml --epochs 100 --follow');
  say('    docker compose up    # Redis (AOF, noeviction) + dashboard + one worker per GPU');
}

// Ctrl-C or a closed pipe: still stop the worker and the private Redis.
let interrupted = false;
const bail = (code) => {
  if (interrupted) return;
  interrupted = true;
  void stopAll().finally(() => process.exit(code));
};
process.on('SIGINT', () => bail(130));
process.on('SIGTERM', () => bail(143));
process.stdout.on('error', () => bail(1));

let exitCode = 0;
try {
  await main();
} catch (err) {
  process.stderr.write(`\ndemo: ${err instanceof Error ? err.message : String(err)}\n`);
  exitCode = 1;
} finally {
  await stopAll();
}
process.exit(exitCode);
