/**
 * `foxhunt enqueue --config FILE [--set k=v ...] --epochs N [--run-id ID] [--follow]` starts a run;
 * `foxhunt enqueue --run RUN --epochs N [--follow]` continues one from its latest checkpoint
 * (`--epochs` is always the run's target total).
 */
import { randomBytes } from 'node:crypto';
import { basename, extname } from 'node:path';
import type { Command } from 'commander';
import { loadRunConfig } from '../../src/config/load.js';
import { FoxhuntError } from '../../src/errors.js';
import { collect, followRun, parseIntArg, withRedis } from '../../src/queue/cli.js';
import { enqueueEpochs, epochsQueue } from '../../src/queue/queues.js';
import type { EpochsJobInput } from '../../src/queue/schemas.js';
import { redisUrl } from '../../src/queue/connection.js';

interface EnqueueFlags {
  config?: string;
  set: string[];
  epochs: string;
  runId?: string;
  run?: string;
  follow?: boolean;
  attempts?: string;
}

export function newRunId(configPath: string): string {
  const stem = basename(configPath, extname(configPath)).replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 40) || 'run';
  const ts = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  return `${stem}-${ts}-${randomBytes(2).toString('hex')}`;
}

export function register(program: Command): void {
  program
    .command('enqueue')
    .description('enqueue an epochs job: a new run (--config) or more epochs of a run (--run)')
    .option('--config <file>', 'run config (TOML) of a new run')
    .option('--set <key=value>', 'override a config field (repeatable)', collect, [])
    .requiredOption('--epochs <n>', 'target total epochs of the run')
    .option('--run-id <id>', 'id of the new run (default: <config name>-<time>-<random>)')
    .option('--run <id>', 'continue this run from its latest checkpoint')
    .option('--follow', 'follow the run: progress bar and one row per epoch until it ends')
    .option('--attempts <n>', 'attempts before the job fails (retries with exponential backoff)')
    .action(async (flags: EnqueueFlags) => {
      const epochs = parseIntArg(flags.epochs, '--epochs', 1);
      if ((flags.config === undefined) === (flags.run === undefined)) {
        throw new FoxhuntError('JOB_INVALID', 'give either --config FILE (a new run) or --run RUN (continue a run)', { where: '--config/--run' });
      }
      if (flags.run !== undefined && (flags.set.length > 0 || flags.runId !== undefined)) {
        throw new FoxhuntError('JOB_INVALID', '--set and --run-id apply to new runs only (the run keeps its config)', { where: '--run' });
      }
      const input: EpochsJobInput = { runId: flags.run ?? flags.runId ?? '', epochs };
      if (flags.config !== undefined) {
        input.config = loadRunConfig(flags.config, flags.set);
        input.runId = flags.runId ?? newRunId(flags.config);
      }
      const attempts = flags.attempts !== undefined ? parseIntArg(flags.attempts, '--attempts', 1) : undefined;
      await withRedis(async (redis, keys) => {
        const queue = epochsQueue(redisUrl());
        try {
          const res = await enqueueEpochs(queue, redis, keys, input, attempts !== undefined ? { attempts } : {});
          process.stderr.write(`enqueued run ${res.runId}: epochs ${res.fromEpoch + 1}..${res.epochs} (job ${res.jobId} on ${queue.name})\n`);
          if (flags.follow !== true) {
            process.stdout.write(`${res.runId}\n`);
            return;
          }
          const run = await followRun(redis, keys, res.runId);
          process.stderr.write(`run ${run.runId}: ${run.status} at epoch ${run.committedEpoch}` +
            `${run.bestEpoch !== null ? `, best val Sharpe ${run.bestSharpe?.toFixed(3)} at epoch ${run.bestEpoch}` : ''}\n`);
          if (run.status === 'failed') process.exitCode = 1;
        } finally {
          await queue.close();
        }
      });
    });
}
