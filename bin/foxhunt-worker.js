#!/usr/bin/env node
// Worker entry point: runs worker/main.ts through tsx's ESM loader.
import { register } from 'tsx/esm/api';
register();
await import('../worker/main.ts');
