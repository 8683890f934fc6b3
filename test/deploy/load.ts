/**
 * Loading and schema validation for the deployment files (docker-compose.yml, config/k8s/*.yaml),
 * shared by the test/deploy suites. Schemas are vendored under test/deploy/schemas (README there):
 * nothing here touches the network.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { parseAllDocuments, parseDocument } from 'yaml';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SCHEMAS = join(ROOT, 'test', 'deploy', 'schemas');
export const K8S_DIR = join(ROOT, 'config', 'k8s');

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Walks a path of keys/indices; undefined as soon as one is missing. */
export function at(v: Json | undefined, ...path: (string | number)[]): Json | undefined {
  let cur = v;
  for (const p of path) {
    if (typeof p === 'number') cur = Array.isArray(cur) ? cur[p] : undefined;
    else cur = isObject(cur) ? cur[p] : undefined;
    if (cur === undefined) return undefined;
  }
  return cur;
}

function readJson(file: string): JsonObject {
  return JSON.parse(readFileSync(join(SCHEMAS, file), 'utf8')) as JsonObject;
}

/** docker-compose.yml as Compose sees it: YAML merge keys (<<) resolved, anchors expanded. */
export function loadCompose(text = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8')): JsonObject {
  const doc = parseDocument(text, { merge: true, prettyErrors: true });
  if (doc.errors.length > 0) throw new Error(`docker-compose.yml: ${doc.errors.map((e) => e.message).join('; ')}`);
  const value = doc.toJS({ maxAliasCount: 1000 }) as Json;
  if (!isObject(value)) throw new Error('docker-compose.yml: not a mapping');
  return value;
}

export interface K8sDoc {
  file: string;
  /** 1-based line where the document starts */
  line: number;
  obj: JsonObject;
}

/** Every Kubernetes object in config/k8s/*.yaml (multi-document files split), kustomization.yaml aside. */
export function loadK8s(dir = K8S_DIR): K8sDoc[] {
  const out: K8sDoc[] = [];
  for (const file of readdirSync(dir).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort()) {
    const text = readFileSync(join(dir, file), 'utf8');
    for (const doc of parseAllDocuments(text, { prettyErrors: true })) {
      if (!('errors' in doc) || doc.errors.length > 0) {
        throw new Error(`config/k8s/${file}: ${'errors' in doc ? doc.errors.map((e) => e.message).join('; ') : 'bad YAML stream'}`);
      }
      const value = doc.toJS() as Json;
      if (value === null) continue;
      if (!isObject(value)) throw new Error(`config/k8s/${file}: a document is not a mapping`);
      const offset = doc.range[0];
      out.push({ file, line: text.slice(0, offset).split('\n').length, obj: value });
    }
  }
  return out;
}

const INT32 = (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31;
const INT64 = (n: number) => Number.isInteger(n);
const GO_DURATION = /^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/;
const COMPOSE_PORT = /^((\[[0-9a-fA-F:.]+\]|[0-9.]+):)?([0-9]+(-[0-9]+)?:)?[0-9]+(-[0-9]+)?(\/(tcp|udp|sctp))?$/;

export function formatErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`).join('\n');
}

let composeValidator: ValidateFunction | undefined;

/** The 2021 compose schema still names subschemas with draft-04 `id` strings: informative only, dropped. */
function dropLegacyIds<T extends Json>(node: T): T {
  if (Array.isArray(node)) return node.map((n) => dropLegacyIds(n)) as T;
  if (!isObject(node)) return node;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'id' && typeof v === 'string') continue;
    out[k] = dropLegacyIds(v);
  }
  return out as T;
}

/** The Compose Specification schema (draft 2019-09; its legacy `id` keywords are ignored). */
export function composeValidate(): ValidateFunction {
  if (composeValidator) return composeValidator;
  const schema = dropLegacyIds(readJson('compose-spec.json'));
  delete schema['$schema'];
  const ajv = new Ajv2019({ allErrors: true, strict: false });
  ajv.addFormat('duration', GO_DURATION);
  ajv.addFormat('ports', { type: 'string', validate: (s: string) => COMPOSE_PORT.test(s) });
  ajv.addFormat('expose', { type: 'string', validate: (s: string) => /^[0-9]+(-[0-9]+)?(\/(tcp|udp|sctp))?$/.test(s) });
  ajv.addFormat('subnet_ip_address', /^[0-9a-fA-F:.]+\/[0-9]+$/);
  composeValidator = ajv.compile(schema);
  return composeValidator;
}

/** apiVersion/kind → vendored schema file. */
export const K8S_SCHEMA_FILES: Record<string, string> = {
  'v1/Namespace': 'namespace-v1.json',
  'v1/Secret': 'secret-v1.json',
  'v1/ConfigMap': 'configmap-v1.json',
  'v1/Service': 'service-v1.json',
  'apps/v1/Deployment': 'deployment-apps-v1.json',
  'apps/v1/StatefulSet': 'statefulset-apps-v1.json',
  'keda.sh/v1alpha1/ScaledObject': 'keda-scaledobject-v1alpha1.json',
};

const k8sValidators = new Map<string, ValidateFunction>();

/** The validator for an object's apiVersion/kind, or undefined when we vendor no schema for it. */
export function k8sValidate(apiVersion: string, kind: string): ValidateFunction | undefined {
  const key = `${apiVersion}/${kind}`;
  const file = K8S_SCHEMA_FILES[key];
  if (file === undefined) return undefined;
  const cached = k8sValidators.get(key);
  if (cached) return cached;
  const schema = readJson(file);
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictRequired: false });
  // Kubernetes' OpenAPI extensions are annotations, not assertions.
  ajv.addVocabulary(['x-kubernetes-group-version-kind', 'x-kubernetes-patch-merge-key', 'x-kubernetes-patch-strategy',
    'x-kubernetes-list-map-keys', 'x-kubernetes-list-type', 'x-kubernetes-map-type', 'x-kubernetes-unions']);
  ajv.addFormat('int32', { type: 'number', validate: INT32 });
  ajv.addFormat('int64', { type: 'number', validate: INT64 });
  ajv.addFormat('date-time', { type: 'string', validate: (s: string) => !Number.isNaN(Date.parse(s)) });
  ajv.addFormat('byte', /^[A-Za-z0-9+/]*={0,2}$/);
  const v = ajv.compile(schema);
  k8sValidators.set(key, v);
  return v;
}

/**
 * Parses a duration as Compose writes them ("180s", "1m30s", "2m") into seconds.
 */
export function durationSeconds(value: Json | undefined, where: string): number {
  if (typeof value !== 'string' || !GO_DURATION.test(value)) throw new Error(`${where}: not a duration: ${JSON.stringify(value)}`);
  const unit: Record<string, number> = { ns: 1e-9, us: 1e-6, 'µs': 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 };
  let total = 0;
  for (const m of value.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) total += Number(m[1]) * (unit[m[2] ?? 's'] ?? 0);
  return total;
}
