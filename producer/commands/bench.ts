/**
 * `foxhunt bench` (`npm run bench -- ...`): the SPEC §7 benchmark table; with --json the last
 * stdout line is one JSON object of the results.
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import { basename } from 'node:path';
import { formatBench, resolveConfigPath, runBench } from '../../bench/bench.js';
import type { BenchOptions } from '../../bench/bench.js';
import { loadRunConfig } from '../../src/config/load.js';
import { FoxhuntError } from '../../src/errors.js';
import type { BackendChoice } from '../../src/native/trainer.js';
import { stderrLogger } from '../../src/trainer/local.js';
import { collect, parseCount } from './train.js';

interface BenchFlags {
  config: string;
  set: string[];
  backend?: BackendChoice;
  epochs: string;
  warmup: string;
  peakTflops?: string;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('bench')
    .description('benchmark epochs of a run config: per-phase ms, throughput, syncs, FLOP rate vs the floor')
    .option('--config <name|file>', 'config/runs/<name>.toml or a TOML path', 'tiny')
    .option('--set <key=value>', 'override a config field (repeatable)', collect, [])
    .addOption(new Option('--backend <backend>', 'native backend (default: the config\'s gpu.backend)').choices(['auto', 'cpu', 'cuda']))
    .option('--epochs <n>', 'measured epochs', '5')
    .option('--warmup <k>', 'warm-up epochs (not measured)', '1')
    .option('--peak-tflops <x>', 'peak rate for the floor (default: 790 on H100/H200, none on CPU)')
    .option('--json', 'print the results as one JSON object on the last line')
    .action(async (flags: BenchFlags) => {
      const configPath = resolveConfigPath(flags.config);
      const opts: BenchOptions = {
        configPath,
        configName: basename(configPath, '.toml'),
        cfg: loadRunConfig(configPath, flags.set),
        epochs: parseCount(flags.epochs, '--epochs', 1),
        warmup: parseCount(flags.warmup, '--warmup'),
        log: stderrLogger(process.env['FOXHUNT_LOG_LEVEL'] ?? 'warn'),
      };
      if (flags.backend !== undefined) opts.backend = flags.backend;
      if (flags.peakTflops !== undefined) {
        const peak = Number(flags.peakTflops);
        if (!(peak > 0)) throw new FoxhuntError('CONFIG_INVALID', `expected a positive number, got ${flags.peakTflops}`, { where: '--peak-tflops' });
        opts.peakTflops = peak;
      }
      const result = await runBench(opts);
      if (flags.json === true) process.stdout.write(`${JSON.stringify(result)}\n`);
      else process.stdout.write(`${formatBench(result)}\n`);
    });
}
