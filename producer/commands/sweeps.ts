/** `foxhunt sweeps` lists sweeps; `foxhunt sweep-status ID [--json]` prints a sweep's leaderboard. */
import type { Command } from 'commander';
import { cliRedis } from '../../src/queue/connection.js';
import { Keys } from '../../src/redis/keys.js';
import { fmtValue, leaderboardTable, paramsCell, table } from '../../src/sweep/format.js';
import { requireSweep } from '../../src/sweep/runner.js';
import { SweepStore } from '../../src/sweep/store.js';

export function register(program: Command): void {
  program.command('sweeps')
    .description('list sweeps, newest first')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const redis = await cliRedis();
      try {
        const store = new SweepStore(redis, new Keys().prefix);
        const sweeps = await store.list();
        if (o.json) {
          process.stdout.write(`${JSON.stringify(sweeps.map(({ spec: _spec, ...s }) => s), null, 2)}\n`);
          return;
        }
        process.stdout.write(table(['sweep', 'status', 'trials', 'metric', 'max epochs', 'best run', 'best metric', 'created'],
          sweeps.map((s) => [s.id, s.status, String(s.trials), `${s.metric} (${s.goal})`, String(s.maxEpochs),
            s.best?.runId ?? '-', fmtValue(s.best?.metric ?? null), new Date(s.createdMs).toISOString()])));
      } finally {
        await redis.quit();
      }
    });

  program.command('sweep-status')
    .description("a sweep's leaderboard: rank, run, params, metric, epochs done, status")
    .argument('<id>', 'sweep id')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const redis = await cliRedis();
      try {
        const store = new SweepStore(redis, new Keys().prefix);
        const rec = await requireSweep(store, id);
        const leaderboard = await store.leaderboard(id, rec.goal);
        if (o.json) {
          const { spec, ...sweep } = rec;
          process.stdout.write(`${JSON.stringify({ sweep: { ...sweep, space: spec.space, sampler: spec.sampler }, leaderboard }, null, 2)}\n`);
          return;
        }
        const counts = new Map<string, number>();
        for (const r of leaderboard) counts.set(r.status, (counts.get(r.status) ?? 0) + 1);
        const finished = rec.finishedMs !== null ? ` (${new Date(rec.finishedMs).toISOString()})` : '';
        process.stdout.write(`sweep ${id}: ${rec.status}${finished}; ${[...counts].map(([s, n]) => `${n} ${s}`).join(', ') || 'no trials added yet'}; ` +
          `${rec.metric} (${rec.goal}); rungs ${rec.rungs.join(', ') || 'none'} (eta ${rec.eta}); max ${rec.maxEpochs} epochs\n`);
        process.stdout.write(leaderboardTable(leaderboard, rec.metric));
        if (rec.best !== null) {
          process.stdout.write(`best: ${rec.best.runId} ${rec.metric}=${fmtValue(rec.best.metric)} after ${rec.best.epochs} epochs (${paramsCell(rec.best.params)}); ` +
            `checkpoint: ${rec.best.checkpoint ? `foxhunt export ${rec.best.checkpoint.runId} --epoch ${rec.best.checkpoint.epoch} --out FILE` : 'none'}\n`);
        }
      } finally {
        await redis.quit();
      }
    });
}
