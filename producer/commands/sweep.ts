/**
 * `foxhunt sweep FILE [--dry-run]` starts a sweep (or lists its trials); `foxhunt sweep-resume ID`
 * re-enqueues what an interrupted sweep lost; `foxhunt sweep-cancel ID` ends a sweep and its trials.
 */
import { Queue } from 'bullmq';
import type { Command } from 'commander';
import { bullConnection, cliRedis } from '../../src/queue/connection.js';
import { epochsQueue } from '../../src/queue/queues.js';
import { sweepsQueueName } from '../../src/queue/names.js';
import { defaultJobOptions } from '../../src/queue/retry.js';
import { Keys, isValidRunId } from '../../src/redis/keys.js';
import { cancelSweep } from '../../src/sweep/cancel.js';
import { fmtValue, paramsCell, table } from '../../src/sweep/format.js';
import { SWEEP_JOB, sweepJobId } from '../../src/sweep/processor.js';
import { resumeSweep } from '../../src/sweep/resume.js';
import { newSweepId, sweepRecordOf, trialRunId } from '../../src/sweep/runner.js';
import type { SweepContext } from '../../src/sweep/runner.js';
import { planTrials, loadSweepSpec } from '../../src/sweep/spec.js';
import { SweepStore } from '../../src/sweep/store.js';
import { FoxhuntError } from '../../src/errors.js';

export function register(program: Command): void {
  program.command('sweep')
    .description('start a hyperparameter sweep from a spec file (TOML or JSON)')
    .argument('<file>', 'sweep spec, e.g. config/sweeps/example.toml')
    .option('--dry-run', 'validate the spec and list the trials without enqueuing anything')
    .option('--id <id>', 'sweep id (default: <name>-<utc time>-<random>)')
    .option('--json', 'print JSON instead of tables')
    .action(async (file: string, o: { dryRun?: boolean; id?: string; json?: boolean }) => {
      const spec = loadSweepSpec(file);
      const trials = planTrials(spec);
      const id = o.id ?? newSweepId(spec.name);
      if (!isValidRunId(id)) throw new FoxhuntError('CONFIG_INVALID', 'sweep id: letters, digits, ".", "_", "-"', { where: '--id' });
      const rows = trials.map((t) => ({ index: t.index, runId: trialRunId(id, t.index), params: t.params, configHash: t.configHash }));
      const summary = `sweep ${id}: ${trials.length} trials${trials.length < spec.trials ? ` (${spec.trials} asked; duplicates by config hash dropped)` : ''}, ` +
        `${spec.metric} (${spec.goal}), max ${spec.max_epochs} epochs, rungs ${spec.rungs.join(', ') || 'none'} (eta ${spec.asha.eta}), concurrency ${spec.concurrency}, sampler ${spec.sampler.kind} seed ${spec.sampler.seed}\n`;
      if (o.dryRun) {
        if (o.json) process.stdout.write(`${JSON.stringify({ sweepId: id, dryRun: true, rungs: spec.rungs, trials: rows }, null, 2)}\n`);
        else process.stdout.write(summary + table(['#', 'run', 'params', 'config hash'], rows.map((r) => [String(r.index), r.runId, paramsCell(r.params), r.configHash.slice(0, 12)])) + 'dry run: nothing enqueued\n');
        return;
      }
      const redis = await cliRedis();
      const queue = new Queue(sweepsQueueName(), { connection: bullConnection() });
      try {
        const store = new SweepStore(redis, new Keys().prefix);
        if (!(await store.create(sweepRecordOf(id, spec)))) {
          throw new FoxhuntError('JOB_INVALID', `sweep ${id} already exists (resume it with foxhunt sweep-resume ${id})`, { where: '--id' });
        }
        await queue.add(SWEEP_JOB, { sweepId: id }, { ...defaultJobOptions(), jobId: sweepJobId(id) });
        if (o.json) process.stdout.write(`${JSON.stringify({ sweepId: id, trials: rows }, null, 2)}\n`);
        else process.stdout.write(`${summary}enqueued; follow it with: foxhunt sweep-status ${id}\n`);
      } finally {
        await queue.close();
        await redis.quit();
      }
    });

  sweepIdCommand(program, 'sweep-resume',
    'resume an interrupted sweep: re-enqueue trials that have no live job and are not finished', resumeSweep, (id, r) => {
      process.stdout.write(`sweep ${id} (${r.status}): ${r.reenqueued.length} re-enqueued, ${r.started.length} started, ` +
        `${r.replayed.length} lost reports replayed, ${r.failed.length} failed for good, ${r.added} trials added\n`);
      for (const [what, ids] of [['re-enqueued', r.reenqueued], ['started', r.started], ['replayed', r.replayed], ['failed', r.failed]] as const) {
        if (ids.length > 0) process.stdout.write(`  ${what}: ${ids.join(' ')}\n`);
      }
    });

  sweepIdCommand(program, 'sweep-cancel',
    'cancel a running sweep: no trial starts again, queued trials are removed, training ones stop at their next epoch',
    cancelSweep, (id, r) => {
      const training = r.runs.filter((x) => x.job === 'active').map((x) => x.runId);
      const removed = [...r.runs.filter((x) => x.job === 'removed').map((x) => x.runId), ...r.jobsRemoved];
      process.stdout.write(`${r.again ? `sweep ${id} was already cancelled; its runs checked again` : `cancelled sweep ${id}`}: ` +
        `${r.runs.length} runs cancelled (${training.length} stop at their next epoch, ${removed.length} queued jobs removed)` +
        `${r.again ? '' : `, ${r.pending} pending trials never started`}${r.trials === 0 ? ' (its trials had not been added yet)' : ''}\n`);
      if (training.length > 0) process.stdout.write(`  stopping: ${training.join(' ')}\n`);
      if (r.completed.length > 0) process.stdout.write(`  completed before the cancel reached them: ${r.completed.join(' ')}\n`);
      if (removed.length > 0) process.stdout.write(`  removed: ${removed.join(' ')}\n`);
      process.stdout.write(r.best !== null
        ? `best so far: ${r.best.runId} ${r.metric}=${fmtValue(r.best.metric)} after ${r.best.epochs} epochs (foxhunt sweep-status ${id})\n`
        : `no trial had reported yet (foxhunt sweep-status ${id})\n`);
    });
}

/**
 * A command `NAME <id> [--json]` on a sweep: runs `run` with the Redis connection and the epochs queue (both closed
 * after it) and prints its report as JSON, or as text through `print`.
 */
function sweepIdCommand<R>(program: Command, name: string, description: string,
  run: (ctx: SweepContext, id: string) => Promise<R>, print: (id: string, r: R) => void): void {
  program.command(name)
    .description(description)
    .argument('<id>', 'sweep id')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const redis = await cliRedis();
      const queue = epochsQueue();
      try {
        const r = await run({ redis, keys: new Keys(), queue }, id);
        if (o.json) process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
        else print(id, r);
      } finally {
        await queue.close();
        await redis.quit();
      }
    });
}
