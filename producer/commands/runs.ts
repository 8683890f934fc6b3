/** `foxhunt runs [--json] [--limit N]`: the runs in Redis, newest first. */
import type { Command } from 'commander';
import { parseIntArg, withRedis } from '../../src/queue/cli.js';
import { RunStore } from '../../src/redis/runs.js';

function ago(ms: number): string {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

export function register(program: Command): void {
  program
    .command('runs')
    .description('list runs (newest first)')
    .option('--limit <n>', 'at most this many', '50')
    .option('--json', 'print JSON')
    .action(async (flags: { limit: string; json?: boolean }) => {
      const limit = parseIntArg(flags.limit, '--limit', 1);
      await withRedis(async (redis, keys) => {
        const runs = await new RunStore(redis, keys).list(limit);
        if (flags.json === true) {
          process.stdout.write(`${JSON.stringify(runs.map(({ config: _c, ...r }) => r), null, 2)}\n`);
          return;
        }
        if (runs.length === 0) {
          process.stdout.write('no runs\n');
          return;
        }
        const rows = runs.map((r) => [r.runId, r.status, `${r.committedEpoch}/${r.targetEpochs}`,
          r.bestSharpe === null ? '-' : `${r.bestSharpe.toFixed(3)}@${r.bestEpoch}`, r.backend ?? '-', r.sweepId ?? '-', ago(r.updatedMs)]);
        const head = ['RUN', 'STATUS', 'EPOCHS', 'BEST VAL SHARPE', 'BACKEND', 'SWEEP', 'UPDATED'];
        const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
        for (const r of [head, ...rows]) process.stdout.write(`${r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`);
      });
    });
}
