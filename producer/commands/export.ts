/** `foxhunt export RUN [--epoch K] --out FILE`: writes a checkpoint (verified by sha256) to a file. */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { FoxhuntError } from '../../src/errors.js';
import { parseIntArg, withRedis } from '../../src/queue/cli.js';
import { CheckpointStore } from '../../src/redis/checkpoints.js';
import { RunStore } from '../../src/redis/runs.js';

export function register(program: Command): void {
  program
    .command('export')
    .description('write a run\'s checkpoint to a file (default: the latest; --epoch K for another retained one)')
    .argument('<run>', 'run id')
    .option('--epoch <k>', 'epoch of the checkpoint')
    .requiredOption('--out <file>', 'output file')
    .action(async (runId: string, flags: { epoch?: string; out: string }) => {
      const epoch = flags.epoch !== undefined ? parseIntArg(flags.epoch, '--epoch', 1) : undefined;
      await withRedis(async (redis, keys) => {
        await new RunStore(redis, keys).require(runId);
        const store = new CheckpointStore(redis, keys);
        const meta = await store.meta(runId, epoch);
        if (meta === null) {
          const kept = (await store.list(runId)).map((m) => m.epoch);
          throw new FoxhuntError('NOT_FOUND', `run ${runId} has no checkpoint${epoch !== undefined ? ` of epoch ${epoch}` : ''} (retained: ${kept.join(', ') || 'none'})`, { where: '--epoch' });
        }
        const buf = await store.read(runId, meta);
        await mkdir(dirname(resolve(flags.out)), { recursive: true });
        await writeFile(flags.out, buf);
        process.stdout.write(`wrote ${flags.out}: run ${runId} epoch ${meta.epoch}, ${buf.length} bytes, sha256 ${meta.sha256}\n`);
      });
    });
}
