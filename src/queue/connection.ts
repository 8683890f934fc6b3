/**
 * Redis connections from `REDIS_URL` (redis://[user:password@]host:port[/db], rediss:// for TLS,
 * with FOXHUNT_REDIS_CA naming a private CA bundle), default redis://127.0.0.1:6379. BullMQ
 * connections get `maxRetriesPerRequest: null` (they block); CLI connections fail fast with a
 * clear REDIS_UNAVAILABLE error instead of retrying forever.
 */
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import type { ConnectionOptions } from 'bullmq';
import { FoxhuntError } from '../errors.js';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** ioredis's constructor type and RedisOptions disagree under exactOptionalPropertyTypes. */
export function newRedis(opts: RedisOptions): Redis {
  return new Redis(opts as RedisOptions & { replyMapping?: never });
}

export function redisUrl(): string {
  return process.env['REDIS_URL'] || DEFAULT_REDIS_URL;
}

/** The URL with any password replaced by `***` (for messages and logs). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== '') u.password = '***';
    return u.toString();
  } catch {
    return '(unparseable REDIS_URL)';
  }
}

/** ioredis options of a redis:// or rediss:// URL. */
export function connectionOptions(url: string = redisUrl()): RedisOptions {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new FoxhuntError('CONFIG_INVALID', `not a URL: expected redis://[user:password@]host:port[/db] or rediss://...`, { where: 'REDIS_URL' });
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') {
    throw new FoxhuntError('CONFIG_INVALID', `unsupported scheme ${u.protocol} (expected redis: or rediss:)`, { where: 'REDIS_URL' });
  }
  const opts: RedisOptions = {
    host: u.hostname || '127.0.0.1',
    port: u.port !== '' ? Number(u.port) : 6379,
  };
  if (u.username !== '') opts.username = decodeURIComponent(u.username);
  if (u.password !== '') opts.password = decodeURIComponent(u.password);
  const db = u.pathname.replace(/^\//, '');
  if (db !== '') {
    const n = Number(db);
    if (!Number.isInteger(n) || n < 0) throw new FoxhuntError('CONFIG_INVALID', `bad database number ${JSON.stringify(db)}`, { where: 'REDIS_URL' });
    opts.db = n;
  }
  if (u.protocol === 'rediss:') {
    opts.tls = { servername: opts.host ?? u.hostname };
    // A private CA (e.g. a cluster-internal Redis): FOXHUNT_REDIS_CA names its PEM bundle.
    const ca = process.env['FOXHUNT_REDIS_CA'];
    if (ca !== undefined && ca !== '') {
      try {
        opts.tls.ca = readFileSync(ca);
      } catch (err) {
        throw new FoxhuntError('CONFIG_INVALID', `cannot read the CA bundle: ${(err as Error).message}`, { where: 'FOXHUNT_REDIS_CA', cause: err });
      }
    }
  }
  return opts;
}

/** Options for BullMQ Workers/Queues (blocking commands; reconnect forever). */
export function bullConnection(url: string = redisUrl()): ConnectionOptions {
  const opts = connectionOptions(url);
  opts.maxRetriesPerRequest = null;
  opts.enableReadyCheck = true;
  // bullmq's RedisOptions type differs from ioredis's only in optional-property strictness.
  return opts as ConnectionOptions;
}

/** A long-lived connection for services: reconnects forever, commands wait for the connection. */
export function serviceRedis(url: string = redisUrl()): Redis {
  const opts = connectionOptions(url);
  opts.maxRetriesPerRequest = null;
  return newRedis(opts);
}

/**
 * A connection for one-shot CLI commands: connects now and fails with REDIS_UNAVAILABLE (naming
 * the redacted URL) when Redis does not answer within `timeoutMs`.
 */
export async function cliRedis(url: string = redisUrl(), timeoutMs = 3000): Promise<Redis> {
  const opts = connectionOptions(url);
  opts.lazyConnect = true;
  opts.connectTimeout = timeoutMs;
  opts.maxRetriesPerRequest = 1;
  opts.retryStrategy = () => null;
  const redis = newRedis(opts);
  let lastError: Error | null = null;
  redis.on('error', (e: Error) => { lastError ??= e; });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    // ioredis reports the cause (refused, TLS, WRONGPASS) as an 'error' event; the rejection only
    // says "Connection is closed".
    const cause: Error = lastError ?? (err as Error);
    throw new FoxhuntError('REDIS_UNAVAILABLE',
      `cannot reach Redis at ${redactUrl(url)}: ${cause.message.replace(/\.$/, '')}. Set REDIS_URL or start one (e.g. redis-server, or docker run -p 6379:6379 redis:7)`,
      { where: 'REDIS_URL', cause });
  }
  return redis;
}

/**
 * Refuses a Redis that may evict keys: BullMQ jobs and run state would silently disappear.
 * Servers that hide CONFIG (managed Redis) are trusted with a warning returned to the caller.
 */
export async function checkEvictionPolicy(redis: Redis): Promise<string | null> {
  let policy: string | undefined;
  try {
    const res = await redis.config('GET', 'maxmemory-policy') as string[];
    policy = res[1];
  } catch {
    try {
      const info = await redis.info('memory');
      policy = /maxmemory_policy:(\S+)/.exec(info)?.[1];
    } catch {
      policy = undefined;
    }
  }
  if (policy === undefined) return 'could not read maxmemory-policy (CONFIG and INFO refused); make sure it is noeviction';
  if (policy !== 'noeviction') {
    throw new FoxhuntError('CONFIG_INVALID',
      `Redis maxmemory-policy is "${policy}": it may evict jobs and run state. Set it to noeviction (redis-cli CONFIG SET maxmemory-policy noeviction, or maxmemory-policy noeviction in redis.conf)`,
      { where: 'maxmemory-policy' });
  }
  return null;
}
