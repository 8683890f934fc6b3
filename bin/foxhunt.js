#!/usr/bin/env node
// Producer CLI entry point: runs producer/cli.ts through tsx's ESM loader.
import { register } from 'tsx/esm/api';
register();
await import('../producer/cli.ts');
