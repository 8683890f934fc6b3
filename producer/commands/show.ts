/** `foxhunt show RUN [--json]`: the run record and every committed epoch's scalars. */
import type { Command } from 'commander';
import { withRedis } from '../../src/queue/cli.js';
import { CheckpointStore } from '../../src/redis/checkpoints.js';
import { RunStore } from '../../src/redis/runs.js';
import { formatEpochHeader, formatEpochRow } from '../../src/trainer/scalars.js';

export function register(program: Command): void {
  program
    .command('show')
    .description('show a run: its record and every epoch\'s scalars (table, or JSON)')
    .argument('<run>', 'run id')
    .option('--json', 'print JSON: { run, epochs: [{ epoch, scalars, worker, ts }], checkpoints }')
    .action(async (runId: string, flags: { json?: boolean }) => {
      await withRedis(async (redis, keys) => {
        const store = new RunStore(redis, keys);
        const run = await store.require(runId);
        const epochs = await store.epochs(runId);
        const checkpoints = await new CheckpointStore(redis, keys).list(runId);
        if (flags.json === true) {
          process.stdout.write(`${JSON.stringify({ run, epochs, checkpoints }, null, 2)}\n`);
          return;
        }
        const w = (s: string): boolean => process.stdout.write(`${s}\n`);
        w(`run ${run.runId}: ${run.status}, epoch ${run.committedEpoch}/${run.targetEpochs}` +
          `${run.sweepId !== null ? `, sweep ${run.sweepId}` : ''}`);
        w(`  config ${run.configHash.slice(0, 16)}  seed ${run.seed}  backend ${run.backend ?? '-'}  engine ${run.engine ?? '-'}  lib ${run.libSha256?.slice(0, 16) ?? '-'}`);
        w(`  best val Sharpe ${run.bestSharpe === null ? '-' : `${run.bestSharpe.toFixed(3)} at epoch ${run.bestEpoch}`}` +
          `  checkpoints: ${checkpoints.map((c) => c.epoch).join(', ') || 'none'}`);
        if (run.error !== null) w(`  last error: ${run.error}`);
        w('');
        w(formatEpochHeader());
        for (const e of epochs) w(formatEpochRow(e.scalars));
      });
    });
}
