/**
 * docker-compose.yml against the Compose Specification's JSON schema and every manifest in
 * config/k8s against the Kubernetes (standalone-strict) or KEDA schema of its kind, statically:
 * no Docker engine or cluster here. Each validator is also shown a broken copy, so a schema that
 * accepted anything would fail these tests.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { K8S_DIR, K8S_SCHEMA_FILES, at, composeValidate, formatErrors, isObject, k8sValidate, loadCompose, loadK8s } from './load.js';
import type { JsonObject } from './load.js';
import { parse } from 'yaml';

const clone = (o: JsonObject): JsonObject => structuredClone(o);

describe('docker-compose.yml', () => {
  test('validates against the Compose Specification schema', () => {
    const validate = composeValidate();
    const ok = validate(loadCompose());
    expect(formatErrors(validate.errors)).toBe('');
    expect(ok).toBe(true);
  });

  test('the schema rejects a misspelt service key and a malformed device reservation', () => {
    const validate = composeValidate();
    const bad1 = clone(loadCompose());
    const w = at(bad1, 'services', 'worker-gpu0');
    if (!isObject(w)) throw new Error('worker-gpu0 missing');
    w['stop_grace_periode'] = '180s';
    expect(validate(bad1)).toBe(false);

    const bad2 = clone(loadCompose());
    const dev = at(bad2, 'services', 'worker-gpu0', 'deploy', 'resources', 'reservations', 'devices', 0);
    if (!isObject(dev)) throw new Error('worker-gpu0 device reservation missing');
    dev['device_ids'] = '0';
    expect(validate(bad2)).toBe(false);
    expect(formatErrors(validate.errors)).toContain('device_ids');
  });
});

describe('config/k8s', () => {
  const docs = loadK8s();

  test('holds the kinds the deployment needs', () => {
    const kinds = docs.map((d) => `${String(d.obj['kind'])}/${String(at(d.obj, 'metadata', 'name'))}`);
    for (const k of ['Namespace/foxhunt', 'ConfigMap/foxhunt-fleet', 'Secret/foxhunt-redis', 'Secret/foxhunt-dashboard',
      'Deployment/foxhunt-worker', 'Deployment/foxhunt-dashboard', 'Service/foxhunt-dashboard', 'ScaledObject/foxhunt-worker']) {
      expect(kinds).toContain(k);
    }
  });

  test.each(docs.map((d) => [`${d.file}:${d.line} ${String(d.obj['kind'])}`, d] as const))('%s validates against its schema', (_name, d) => {
    const apiVersion = d.obj['apiVersion'];
    const kind = d.obj['kind'];
    expect(typeof apiVersion, `${d.file}:${d.line}: apiVersion`).toBe('string');
    expect(typeof kind, `${d.file}:${d.line}: kind`).toBe('string');
    const validate = k8sValidate(String(apiVersion), String(kind));
    expect(validate, `${d.file}:${d.line}: no vendored schema for ${String(apiVersion)} ${String(kind)}`).toBeDefined();
    if (!validate) return;
    const ok = validate(d.obj);
    expect(formatErrors(validate.errors), `${d.file}:${d.line}`).toBe('');
    expect(ok).toBe(true);
    expect(at(d.obj, 'metadata', 'name'), `${d.file}:${d.line}: metadata.name`).toBeTypeOf('string');
    if (kind !== 'Namespace') expect(at(d.obj, 'metadata', 'namespace'), `${d.file}:${d.line}: metadata.namespace`).toBe('foxhunt');
  });

  test('every vendored schema is strict: an unknown or mistyped field fails', () => {
    const worker = docs.find((d) => d.obj['kind'] === 'Deployment' && at(d.obj, 'metadata', 'name') === 'foxhunt-worker');
    if (!worker) throw new Error('worker Deployment missing');
    const validate = k8sValidate('apps/v1', 'Deployment');
    if (!validate) throw new Error('no Deployment schema');
    const typo = clone(worker.obj);
    const podSpec = at(typo, 'spec', 'template', 'spec');
    if (!isObject(podSpec)) throw new Error('no pod spec');
    podSpec['terminationGracePeriodSecond'] = 210;
    expect(validate(typo)).toBe(false);
    const wrongType = clone(worker.obj);
    const probe = at(wrongType, 'spec', 'template', 'spec', 'containers', 0, 'readinessProbe');
    if (!isObject(probe)) throw new Error('no readiness probe');
    probe['periodSeconds'] = '10';
    expect(validate(wrongType)).toBe(false);

    const scaled = docs.find((d) => d.obj['kind'] === 'ScaledObject');
    const keda = k8sValidate('keda.sh/v1alpha1', 'ScaledObject');
    if (!scaled || !keda) throw new Error('ScaledObject or its schema missing');
    const noQuery = clone(scaled.obj);
    const meta = at(noQuery, 'spec', 'triggers', 0, 'metadata');
    if (!isObject(meta)) throw new Error('no trigger metadata');
    delete meta['query'];
    expect(keda(noQuery)).toBe(false);
    const numeric = clone(scaled.obj);
    const meta2 = at(numeric, 'spec', 'triggers', 0, 'metadata');
    if (!isObject(meta2)) throw new Error('no trigger metadata');
    meta2['threshold'] = 1; // KEDA trigger metadata is map[string]string
    expect(keda(numeric)).toBe(false);
  });

  test('kustomization.yaml lists every manifest except the secret template and the optional Redis', () => {
    const kust = parse(readFileSync(join(K8S_DIR, 'kustomization.yaml'), 'utf8')) as JsonObject;
    const resources = at(kust, 'resources');
    expect(Array.isArray(resources)).toBe(true);
    const files = new Set(docs.map((d) => d.file));
    const listed = new Set((resources as string[]));
    for (const f of listed) expect(files.has(f), `kustomization.yaml lists ${f}, which is not in config/k8s`).toBe(true);
    for (const f of files) {
      if (f === 'secrets.yaml' || f === 'redis-statefulset.yaml') expect(listed.has(f), `${f} must stay out of kustomization.yaml`).toBe(false);
      else expect(listed.has(f), `kustomization.yaml misses ${f}`).toBe(true);
    }
  });

  test('the schema table covers only files that exist', () => {
    for (const file of Object.values(K8S_SCHEMA_FILES)) {
      expect(() => readFileSync(join(K8S_DIR, '..', '..', 'test', 'deploy', 'schemas', file))).not.toThrow();
    }
  });
});
