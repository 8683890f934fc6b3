/**
 * The feature cache (fxcache): one binary file per key under the cache directory,
 * `<cacheDir>/<key>.fxc`, so a second run with the same bars and feature settings skips the
 * feature computation ("fxcache hit").
 *
 * Key = sha256 of (sha256 of the bar content, feature set version, normaliser window, leak canary,
 * train range used for the normaliser).
 *
 * File layout (little-endian):
 *   magic    8 bytes  "FHFXC\0\0\1"
 *   version  u32      FXCACHE_VERSION
 *   hdrLen   u32      bytes of the JSON header
 *   header   JSON     { key, nBars, nFeatures, featureNames, featureSet }
 *   payload  f32      (nBars, nFeatures) normalised features
 *   sha256   32 bytes of everything before it
 * Written atomically (temp file in the same directory, then rename). A file that is truncated,
 * corrupt, of another version or for another key is reported as corrupt: the caller warns and
 * rebuilds it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Bars } from '../data/types.js';

export const FXCACHE_MAGIC = Buffer.from([0x46, 0x48, 0x46, 0x58, 0x43, 0x00, 0x00, 0x01]); // "FHFXC\0\0\1"
export const FXCACHE_VERSION = 1;

export interface FxEntry {
  key: string;
  nBars: number;
  nFeatures: number;
  featureNames: string[];
  featureSet: string;
  features: Float32Array;
}

export type FxReadResult = { status: 'hit'; entry: FxEntry } | { status: 'miss' } | { status: 'corrupt'; reason: string };

/** Minimal logger (pino-compatible). */
export interface FxLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

function bytesOf(a: ArrayBufferView): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/** sha256 (hex) of every bar array and the symbol. */
export function barsContentHash(b: Bars): string {
  const h = createHash('sha256');
  h.update(`bars:${b.close.length}:${b.symbol ?? ''}\n`);
  for (const a of [b.ts, b.open, b.high, b.low, b.close, b.volume, b.sessionStart]) h.update(bytesOf(a));
  return h.digest('hex');
}

export function fxcacheKey(parts: {
  barsHash: string;
  featureSet: string;
  normWindow: number;
  leakCanary: boolean;
  trainBegin: number;
  trainEnd: number;
}): string {
  const text = JSON.stringify([parts.barsHash, parts.featureSet, parts.normWindow, parts.leakCanary, parts.trainBegin, parts.trainEnd]);
  return createHash('sha256').update(text).digest('hex');
}

export function fxcachePath(cacheDir: string, key: string): string {
  return join(cacheDir, `${key}.fxc`);
}

export function encodeFx(e: FxEntry): Buffer {
  const header = Buffer.from(JSON.stringify({
    key: e.key, nBars: e.nBars, nFeatures: e.nFeatures, featureNames: e.featureNames, featureSet: e.featureSet,
  }), 'utf8');
  const fixed = Buffer.alloc(16);
  FXCACHE_MAGIC.copy(fixed, 0);
  fixed.writeUInt32LE(FXCACHE_VERSION, 8);
  fixed.writeUInt32LE(header.length, 12);
  const payload = bytesOf(e.features);
  const sum = createHash('sha256').update(fixed).update(header).update(payload).digest();
  return Buffer.concat([fixed, header, payload, sum]);
}

/** Decode and verify a cache file's bytes; `expectedKey` must match the stored key. */
export function decodeFx(buf: Buffer, expectedKey: string): FxReadResult {
  if (buf.length < 16 + 32) return { status: 'corrupt', reason: `truncated (${buf.length} bytes)` };
  if (!buf.subarray(0, 8).equals(FXCACHE_MAGIC)) return { status: 'corrupt', reason: 'bad magic' };
  const version = buf.readUInt32LE(8);
  if (version !== FXCACHE_VERSION) return { status: 'corrupt', reason: `version ${version}, expected ${FXCACHE_VERSION}` };
  const hdrLen = buf.readUInt32LE(12);
  if (16 + hdrLen + 32 > buf.length) return { status: 'corrupt', reason: 'truncated header' };
  const body = buf.subarray(0, buf.length - 32);
  const sum = createHash('sha256').update(body).digest();
  if (!sum.equals(buf.subarray(buf.length - 32))) return { status: 'corrupt', reason: 'checksum mismatch (truncated or corrupt)' };
  let header: { key?: unknown; nBars?: unknown; nFeatures?: unknown; featureNames?: unknown; featureSet?: unknown };
  try {
    header = JSON.parse(buf.subarray(16, 16 + hdrLen).toString('utf8')) as typeof header;
  } catch {
    return { status: 'corrupt', reason: 'unreadable header' };
  }
  const { key, nBars, nFeatures, featureNames, featureSet } = header;
  if (typeof key !== 'string' || typeof nBars !== 'number' || typeof nFeatures !== 'number'
    || !Array.isArray(featureNames) || typeof featureSet !== 'string') {
    return { status: 'corrupt', reason: 'malformed header' };
  }
  if (key !== expectedKey) return { status: 'corrupt', reason: `key ${key} does not match ${expectedKey}` };
  const payloadLen = body.length - 16 - hdrLen;
  if (payloadLen !== nBars * nFeatures * 4) return { status: 'corrupt', reason: `payload ${payloadLen} bytes, expected ${nBars * nFeatures * 4}` };
  const features = new Float32Array(nBars * nFeatures);
  bytesOf(features).set(buf.subarray(16 + hdrLen, 16 + hdrLen + payloadLen));
  return { status: 'hit', entry: { key, nBars, nFeatures, featureNames: featureNames.map(String), featureSet, features } };
}

export function readFx(cacheDir: string, key: string): FxReadResult {
  let buf: Buffer;
  try {
    buf = readFileSync(fxcachePath(cacheDir, key));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { status: 'miss' };
    return { status: 'corrupt', reason: (err as Error).message };
  }
  return decodeFx(buf, key);
}

/** Write atomically: temp file in the same directory, then rename over the final name. */
export function writeFx(cacheDir: string, e: FxEntry): string {
  mkdirSync(cacheDir, { recursive: true });
  const path = fxcachePath(cacheDir, e.key);
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    writeFileSync(tmp, encodeFx(e));
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  return path;
}

/**
 * Look up `key`; on a miss or a corrupt file build the entry with `build`, store it and return it.
 * Logs "fxcache hit" / "fxcache miss" (info) and "fxcache corrupt, rebuilding" (warn).
 */
export function getOrBuildFx(
  cacheDir: string | undefined,
  key: string,
  build: () => FxEntry,
  log?: FxLogger,
): { entry: FxEntry; hit: boolean } {
  if (cacheDir === undefined) return { entry: build(), hit: false };
  const path = fxcachePath(cacheDir, key);
  const r = readFx(cacheDir, key);
  if (r.status === 'hit') {
    log?.info({ key, path }, 'fxcache hit');
    return { entry: r.entry, hit: true };
  }
  if (r.status === 'corrupt') log?.warn({ key, path, reason: r.reason }, 'fxcache corrupt, rebuilding');
  else log?.info({ key, path }, 'fxcache miss');
  const entry = build();
  writeFx(cacheDir, entry);
  return { entry, hit: false };
}
