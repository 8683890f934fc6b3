/**
 * Key scans by pattern (SCAN, never KEYS): every key that matches, and deletion of them in batches.
 * Used to drop a run's checkpoint chunks, and by tests and benchmarks to clean up their prefix.
 */
import type { Redis } from 'ioredis';

/** Every key matching `pattern` (a Redis glob). */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const out: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    out.push(...found);
  } while (cursor !== '0');
  return out;
}

/** Deletes every key matching `pattern`; returns how many were deleted. */
export async function deleteKeys(redis: Redis, pattern: string): Promise<number> {
  const found = await scanKeys(redis, pattern);
  for (let i = 0; i < found.length; i += 500) await redis.del(...found.slice(i, i + 500));
  return found.length;
}
