import { defineConfig } from 'vitest/config';

// CPU suite: runs in CI on a machine with no GPU, against a real Redis.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/gpu/**', 'node_modules/**'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: true,
    maxWorkers: 2,
  },
});
