import { defineConfig } from 'vitest/config';

// GPU suite: `npm run test:gpu` on a host with an NVIDIA GPU and the CUDA backend built.
export default defineConfig({
  test: {
    include: ['test/gpu/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
