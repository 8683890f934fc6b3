/**
 * `foxhunt cancel RUN`: marks the run cancelled and removes its waiting job. A worker training it
 * stops at the next epoch boundary (its commit is refused once the run is cancelled).
 */
import type { Command } from 'commander';
import { FoxhuntError } from '../../src/errors.js';
import { cancelRun } from '../../src/queue/cancel.js';
import { withRedis } from '../../src/queue/cli.js';
import { redisUrl } from '../../src/queue/connection.js';
import { epochsQueue } from '../../src/queue/queues.js';

export function register(program: Command): void {
  program
    .command('cancel')
    .description('cancel a run (its queued job is removed; a running one stops at the next epoch)')
    .argument('<run>', 'run id')
    .action(async (runId: string) => {
      await withRedis(async (redis, keys) => {
        const queue = epochsQueue(redisUrl());
        try {
          const r = await cancelRun(redis, keys, queue, runId);
          if (!r.cancelled) throw new FoxhuntError('JOB_INVALID', `run ${runId} is already ${r.before}`, { where: runId });
          const note = r.job === 'removed' ? ' (queued job removed)' : r.job === 'active' ? ' (the worker stops at the next epoch boundary)' : '';
          process.stdout.write(`cancelled run ${runId} at epoch ${r.committedEpoch}${note}\n`);
        } finally {
          await queue.close();
        }
      });
    });
}
