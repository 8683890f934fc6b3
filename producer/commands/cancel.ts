/**
 * `foxhunt cancel RUN`: marks the run cancelled and removes its waiting job. A worker training it
 * stops at the next epoch boundary (its commit is refused once the run is cancelled).
 */
import type { Command } from 'commander';
import { FoxhuntError } from '../../src/errors.js';
import { withRedis } from '../../src/queue/cli.js';
import { redisUrl } from '../../src/queue/connection.js';
import { epochsQueue } from '../../src/queue/queues.js';
import { RunStore } from '../../src/redis/runs.js';

export function register(program: Command): void {
  program
    .command('cancel')
    .description('cancel a run (its queued job is removed; a running one stops at the next epoch)')
    .argument('<run>', 'run id')
    .action(async (runId: string) => {
      await withRedis(async (redis, keys) => {
        const store = new RunStore(redis, keys);
        const run = await store.require(runId);
        if (run.status === 'completed' || run.status === 'cancelled' || run.status === 'pruned') {
          throw new FoxhuntError('JOB_INVALID', `run ${runId} is already ${run.status}`, { where: runId });
        }
        await store.setStatus(runId, 'cancelled');
        let note = '';
        if (run.jobId !== null) {
          const queue = epochsQueue(redisUrl());
          try {
            const job = await queue.getJob(run.jobId);
            const state = job !== undefined ? await job.getState() : 'gone';
            if (job !== undefined && (state === 'waiting' || state === 'delayed' || state === 'prioritized')) {
              await job.remove();
              note = ' (queued job removed)';
            } else if (state === 'active') {
              note = ' (the worker stops at the next epoch boundary)';
            }
          } finally {
            await queue.close();
          }
        }
        process.stdout.write(`cancelled run ${runId} at epoch ${run.committedEpoch}${note}\n`);
      });
    });
}
