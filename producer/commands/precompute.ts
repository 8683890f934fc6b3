/** `foxhunt precompute --config FILE [--set k=v ...]`: a precompute job that fills the fxcache. */
import type { Command } from 'commander';
import { loadRunConfig } from '../../src/config/load.js';
import { collect, withRedis } from '../../src/queue/cli.js';
import { redisUrl } from '../../src/queue/connection.js';
import { enqueuePrecompute, epochsQueue } from '../../src/queue/queues.js';

export function register(program: Command): void {
  program
    .command('precompute')
    .description('enqueue a precompute job: a worker builds the config\'s features into the fxcache')
    .requiredOption('--config <file>', 'run config (TOML)')
    .option('--set <key=value>', 'override a config field (repeatable)', collect, [])
    .action(async (flags: { config: string; set: string[] }) => {
      const config = loadRunConfig(flags.config, flags.set);
      await withRedis(async () => {
        const queue = epochsQueue(redisUrl());
        try {
          const id = await enqueuePrecompute(queue, { config });
          process.stdout.write(`enqueued precompute job ${id} on ${queue.name}\n`);
        } finally {
          await queue.close();
        }
      });
    });
}
