/**
 * `foxhunt bench-fleet --workers 1,2,3 [--trials 8] [--epochs 4] [--config tiny] [--set k=v]
 * [--launch supervisor|processes] [--no-kill-test] [--json]`: fleet scaling on this host with CPU
 * workers standing in for GPUs (bench/fleet-scaling.ts says what is measured and how).
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import { formatFleetBench, runFleetBench } from '../../bench/fleet-scaling.js';
import type { Launch } from '../../bench/fleet-scaling.js';
import { resolveRunConfigPath } from '../../src/config/load.js';
import { FoxhuntError } from '../../src/errors.js';
import { collect, parseIntArg } from '../../src/queue/cli.js';
import { cliRedis, redisUrl } from '../../src/queue/connection.js';

interface BenchFleetFlags {
  workers: string;
  trials: string;
  epochs: string;
  config: string;
  set: string[];
  launch: Launch;
  killTest: boolean;
  timeoutS?: string;
  json?: boolean;
}

/** "1,2,3" → [1, 2, 3]: distinct positive integers, in the order given. */
export function parseWorkerCounts(text: string): number[] {
  const parts = text.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const out: number[] = [];
  for (const p of parts) {
    const n = Number(p);
    if (!Number.isInteger(n) || n < 1 || n > 64) {
      throw new FoxhuntError('CONFIG_INVALID', `expected a comma-separated list of worker counts 1..64, got ${JSON.stringify(p)}`, { where: '--workers' });
    }
    if (!out.includes(n)) out.push(n);
  }
  if (out.length === 0) throw new FoxhuntError('CONFIG_INVALID', 'give at least one worker count, e.g. --workers 1,2', { where: '--workers' });
  return out;
}

export function register(program: Command): void {
  program
    .command('bench-fleet')
    .description('fleet scaling with simulated GPUs: N CPU workers train a sweep; trial-epochs/min, efficiency vs the smallest N, per-worker runs, and a SIGKILL test')
    .option('--workers <list>', 'worker counts to measure, comma-separated', '1,2')
    .option('--trials <n>', 'trials in each batch', '8')
    .option('--epochs <n>', 'epochs of each trial', '4')
    .option('--config <name|file>', 'base run config: config/runs/<name>.toml or a TOML path', 'tiny')
    .option('--set <key=value>', 'override a config field of every trial (repeatable), e.g. --set train.steps_per_epoch=2048', collect, [])
    .addOption(new Option('--launch <how>', 'supervisor: foxhunt-worker --gpus all with FOXHUNT_TEST_GPUS=N; processes: N x foxhunt-worker --cpu')
      .choices(['supervisor', 'processes']).default('supervisor'))
    .option('--no-kill-test', 'skip the N=2 SIGKILL test')
    .option('--timeout-s <s>', 'give up on a batch after this many seconds (default: from the workload)')
    .option('--json', 'print the results as one JSON object on the last line')
    .action(async (flags: BenchFleetFlags) => {
      const workers = parseWorkerCounts(flags.workers);
      const trials = parseIntArg(flags.trials, '--trials', 1);
      const epochs = parseIntArg(flags.epochs, '--epochs', 1);
      if (flags.killTest && (trials < 2 || epochs < 2)) {
        throw new FoxhuntError('CONFIG_INVALID', 'the kill test needs at least 2 trials of at least 2 epochs (or pass --no-kill-test)', { where: '--trials/--epochs' });
      }
      const configPath = resolveRunConfigPath(flags.config);
      const url = redisUrl();
      const redis = await cliRedis(url);
      try {
        const result = await runFleetBench({
          workers, trials, epochs, configPath, sets: flags.set, launch: flags.launch, killTest: flags.killTest, redis, url,
          progress: (line) => process.stderr.write(`${line}\n`),
          ...(flags.timeoutS !== undefined ? { batchTimeoutMs: parseIntArg(flags.timeoutS, '--timeout-s', 1) * 1000 } : {}),
        });
        if (flags.json === true) {
          process.stderr.write(`${formatFleetBench(result)}\n`);
          process.stdout.write(`${JSON.stringify(result)}\n`);
        } else {
          process.stdout.write(`${formatFleetBench(result)}\n`);
        }
        if (result.kill !== null && !result.kill.ok) process.exitCode = 1;
      } finally {
        redis.disconnect();
      }
    });
}
