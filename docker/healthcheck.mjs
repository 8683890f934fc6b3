#!/usr/bin/env node
// Container healthcheck with no curl in the image: `node docker/healthcheck.mjs URL [timeout_ms]`
// exits 0 when URL answers HTTP 200 within the timeout (default 4000 ms), 1 otherwise, and says why
// on stderr (Docker keeps the last lines in `docker inspect`).
const [url, timeoutArg] = process.argv.slice(2);
if (!url) {
  process.stderr.write('usage: healthcheck.mjs URL [timeout_ms]\n');
  process.exit(2);
}
const timeoutMs = Number(timeoutArg ?? 4000);
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  await res.arrayBuffer();
  if (res.status !== 200) {
    process.stderr.write(`healthcheck: ${url} answered ${res.status}\n`);
    process.exit(1);
  }
  process.exit(0);
} catch (err) {
  process.stderr.write(`healthcheck: ${url}: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
