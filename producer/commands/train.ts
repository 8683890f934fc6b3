/**
 * `foxhunt train`: train locally without Redis, one table row per epoch (or one JSON object of
 * flattened scalars per line with --json), a progress bar on a terminal.
 */
import type { Command } from 'commander';
import { Option } from 'commander';
import cliProgress from 'cli-progress';
import { loadRunConfig } from '../../src/config/load.js';
import { FoxhuntError } from '../../src/errors.js';
import type { BackendChoice } from '../../src/native/trainer.js';
import { stderrLogger, trainLocal } from '../../src/trainer/local.js';
import { formatEpochHeader, formatEpochRow } from '../../src/trainer/scalars.js';

interface TrainFlags {
  config: string;
  set: string[];
  epochs: string;
  backend?: BackendChoice;
  checkpointOut?: string;
  resume?: string;
  json?: boolean;
}

export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function parseCount(value: string, flag: string, min = 0): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) {
    throw new FoxhuntError('CONFIG_INVALID', `expected an integer >= ${min}, got ${JSON.stringify(value)}`, { where: flag });
  }
  return n;
}

export function register(program: Command): void {
  program
    .command('train')
    .description('train locally (no Redis): one table row per epoch')
    .requiredOption('--config <file>', 'run config (TOML)')
    .option('--set <key=value>', 'override a config field (repeatable), e.g. --set agent.lr=3e-4', collect, [])
    .option('--epochs <n>', 'epochs to run', '5')
    .addOption(new Option('--backend <backend>', 'native backend (default: the config\'s gpu.backend)').choices(['auto', 'cpu', 'cuda']))
    .option('--checkpoint-out <file>', 'write a checkpoint after the last epoch')
    .option('--resume <file>', 'load this checkpoint before the first epoch')
    .option('--json', 'print one JSON object of flattened scalars per epoch')
    .action(async (flags: TrainFlags) => {
      const epochs = parseCount(flags.epochs, '--epochs');
      const cfg = loadRunConfig(flags.config, flags.set);
      const log = stderrLogger();
      const json = flags.json === true;
      const tty = !json && process.stdout.isTTY === true;
      const bars = tty
        ? new cliProgress.MultiBar({
          format: 'epoch {value}/{total} [{bar}] {percentage}% | eta {eta_formatted} | val Sharpe {sharpe}',
          hideCursor: true,
          clearOnComplete: true,
          stream: process.stdout,
        }, cliProgress.Presets.shades_classic)
        : null;
      const bar = bars?.create(epochs, 0, { sharpe: '-' }) ?? null;
      const print = (line: string): void => {
        if (bars !== null) bars.log(`${line}\n`);
        else process.stdout.write(`${line}\n`);
      };
      const opts: Parameters<typeof trainLocal>[1] = {
        epochs,
        log,
        onStart: (info) => {
          if (json) return;
          print(`backend ${info.backend} (${info.deviceName}), batch ${info.batchSize}, obs ${info.obsDim}, params ${info.nParams}, lib ${info.libSha256.slice(0, 12)}`);
          print(formatEpochHeader());
        },
        onEpoch: (_stats, scalars) => {
          if (json) process.stdout.write(`${JSON.stringify(scalars)}\n`);
          else print(formatEpochRow(scalars));
          const sharpe = scalars['val/sharpe'];
          bar?.increment(1, { sharpe: sharpe === null || sharpe === undefined ? '-' : sharpe.toFixed(2) });
        },
      };
      if (flags.backend !== undefined) opts.backend = flags.backend;
      // Ctrl-C: finish the epoch in flight (and write --checkpoint-out), then stop; twice: exit now.
      const stop = new AbortController();
      opts.signal = stop.signal;
      const onSigint = (): void => {
        if (stop.signal.aborted) process.exit(130);
        stop.abort();
        log.warn('interrupted: stopping after the current epoch (Ctrl-C again to exit now)');
      };
      process.on('SIGINT', onSigint);
      if (flags.checkpointOut !== undefined) opts.checkpointOut = flags.checkpointOut;
      if (flags.resume !== undefined) opts.resume = flags.resume;
      try {
        const result = await trainLocal(cfg, opts);
        if (!json && result.checkpointBytes !== undefined) print(`checkpoint ${flags.checkpointOut ?? ''} (${result.checkpointBytes} bytes)`);
      } finally {
        process.off('SIGINT', onSigint);
        bars?.stop();
      }
    });
}
