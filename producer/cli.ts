/**
 * `foxhunt`, the producer CLI. Each command lives in producer/commands/<name>.ts and exports
 * `register(program: Command): void`; this file only loads them, so commands never collide.
 */
import { Command } from 'commander';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

interface CommandModule {
  register(program: Command): void;
}

const program = new Command('foxhunt')
  .description('foxhunt fleet producer: data tools, local training, queue and sweep commands')
  .showHelpAfterError();

const dir = join(dirname(fileURLToPath(import.meta.url)), 'commands');
const files = readdirSync(dir).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts')).sort();
for (const file of files) {
  const mod = (await import(pathToFileURL(join(dir, file)).href)) as Partial<CommandModule>;
  if (typeof mod.register !== 'function') {
    throw new Error(`producer/commands/${file} does not export register(program)`);
  }
  mod.register(program);
}

try {
  await program.parseAsync(process.argv);
} catch (err) {
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`foxhunt: ${message}\n`);
  process.exitCode = process.exitCode && process.exitCode !== 0 ? process.exitCode : 1;
}
