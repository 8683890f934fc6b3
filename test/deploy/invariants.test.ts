/**
 * The invariants the deployment files must keep (docs/SCALING.md): one GPU per worker, Redis with
 * AOF, noeviction and a password on localhost only, auth on the dashboard, grace periods longer than
 * the documented epoch + commit budget, health port and paths as docs/DESIGN.md section 8 says, and
 * the scaler reading the dashboard's queue-depth metric.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { EPOCHS_QUEUE } from '../../src/queue/names.js';
import { ROOT, at, durationSeconds, isObject, loadCompose, loadK8s } from './load.js';
import type { Json, JsonObject, K8sDoc } from './load.js';

const compose = loadCompose();
const composeText = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
const k8s = loadK8s();
const design = readFileSync(join(ROOT, 'docs', 'DESIGN.md'), 'utf8');
const designFleet = design.slice(design.indexOf('## 8.'));

function services(): [string, JsonObject][] {
  const s = at(compose, 'services');
  if (!isObject(s)) throw new Error('docker-compose.yml: no services');
  return Object.entries(s).map(([name, v]) => {
    if (!isObject(v)) throw new Error(`docker-compose.yml: services.${name} is not a mapping`);
    return [name, v];
  });
}
function service(name: string): JsonObject {
  const found = services().find(([n]) => n === name);
  if (!found) throw new Error(`docker-compose.yml: no service ${name}`);
  return found[1];
}
function strings(v: Json | undefined, where: string): string[] {
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Error(`${where}: expected a list of strings`);
  return v as string[];
}
/** The value after `--flag` in an argv list (undefined when the flag is absent). */
function flag(argv: string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}
function k8sObject(kind: string, name: string): K8sDoc {
  const d = k8s.find((x) => x.obj['kind'] === kind && at(x.obj, 'metadata', 'name') === name);
  if (!d) throw new Error(`config/k8s: no ${kind} ${name}`);
  return d;
}
function container(d: K8sDoc, index = 0): JsonObject {
  const c = at(d.obj, 'spec', 'template', 'spec', 'containers', index);
  if (!isObject(c)) throw new Error(`${d.file}:${d.line}: no container ${index}`);
  return c;
}

const workerServices = services().filter(([n]) => n.startsWith('worker-'));
const gpuWorkers = workerServices.filter(([n]) => n.startsWith('worker-gpu'));

// --- the single documented budget -------------------------------------------------------------

const fleet = k8sObject('ConfigMap', 'foxhunt-fleet');
function budget(key: string): number {
  const v = at(fleet.obj, 'data', key);
  const n = Number(v);
  if (typeof v !== 'string' || !Number.isFinite(n) || n <= 0) throw new Error(`${fleet.file}: data.${key} must be a positive number of seconds, got ${JSON.stringify(v)}`);
  return n;
}
const EPOCH_BUDGET_S = budget('FOXHUNT_EPOCH_BUDGET_S');
const COMMIT_BUDGET_S = budget('FOXHUNT_COMMIT_BUDGET_S');

describe('grace periods outlast an epoch plus its commit', () => {
  test('the budget is documented where the grace periods are', () => {
    expect(readFileSync(join(ROOT, 'docs', 'SCALING.md'), 'utf8')).toContain('FOXHUNT_EPOCH_BUDGET_S');
    expect(composeText).toContain('FOXHUNT_EPOCH_BUDGET_S');
  });

  test.each(workerServices.map(([n, s]) => [n, s] as const))('compose %s: stop_grace_period > budget, stops on SIGTERM', (name, s) => {
    expect(durationSeconds(s['stop_grace_period'], `services.${name}.stop_grace_period`)).toBeGreaterThan(EPOCH_BUDGET_S + COMMIT_BUDGET_S);
    expect(s['stop_signal'] ?? 'SIGTERM').toBe('SIGTERM');
  });

  test('k8s worker: terminationGracePeriodSeconds > budget, budget reaches the pod', () => {
    const worker = k8sObject('Deployment', 'foxhunt-worker');
    const grace = at(worker.obj, 'spec', 'template', 'spec', 'terminationGracePeriodSeconds');
    expect(typeof grace).toBe('number');
    expect(grace as number).toBeGreaterThan(EPOCH_BUDGET_S + COMMIT_BUDGET_S);
    const envFrom = at(container(worker), 'envFrom');
    expect(JSON.stringify(envFrom)).toContain('"foxhunt-fleet"');
    // A preStop hook would eat into the grace period before SIGTERM: the worker handles SIGTERM itself.
    expect(at(container(worker), 'lifecycle', 'preStop')).toBeUndefined();
  });
});

// --- one GPU per worker -----------------------------------------------------------------------

describe('one GPU per worker', () => {
  test('compose: every GPU worker reserves exactly one distinct NVIDIA GPU and binds it as --gpu 0', () => {
    expect(gpuWorkers.length).toBe(8);
    const seen = new Set<string>();
    for (const [name, s] of gpuWorkers) {
      const devices = at(s, 'deploy', 'resources', 'reservations', 'devices');
      expect(Array.isArray(devices) && devices.length, `${name}: one device reservation`).toBe(1);
      const dev = at(devices, 0);
      if (!isObject(dev)) throw new Error(`${name}: device reservation is not a mapping`);
      expect(dev['driver'], name).toBe('nvidia');
      expect(dev['count'], `${name}: device_ids, not count`).toBeUndefined();
      const ids = strings(dev['device_ids'], `${name}.device_ids`);
      expect(ids.length, name).toBe(1);
      expect(strings(dev['capabilities'], `${name}.capabilities`)).toContain('gpu');
      const id = ids[0] ?? '';
      expect(seen.has(id), `${name}: GPU ${id} reserved twice`).toBe(false);
      seen.add(id);
      expect(name).toBe(`worker-gpu${id}`);
      const argv = strings(s['command'], `${name}.command`);
      expect(flag(argv, '--gpu'), `${name}: the container sees its GPU as device 0`).toBe('0');
      expect(argv).not.toContain('--gpus');
      expect(at(s, 'deploy', 'replicas') ?? 1, `${name}: one replica`).toBe(1);
    }
    expect([...seen].sort()).toEqual(['0', '1', '2', '3', '4', '5', '6', '7']);
  });

  test('compose: profile gpuN starts exactly the workers of GPUs 0..N-1', () => {
    for (const n of [1, 2, 4, 8]) {
      const on = gpuWorkers.filter(([, s]) => strings(s['profiles'], 'profiles').includes(`gpu${n}`)).map(([name]) => name).sort();
      expect(on).toEqual(Array.from({ length: n }, (_, i) => `worker-gpu${i}`).sort());
    }
  });

  test('compose: the CPU worker needs no GPU', () => {
    const cpu = service('worker-cpu');
    expect(strings(cpu['profiles'], 'worker-cpu.profiles')).toEqual(['cpu']);
    expect(strings(cpu['command'], 'worker-cpu.command')).toContain('--cpu');
    expect(at(cpu, 'deploy', 'resources', 'reservations', 'devices')).toBeUndefined();
  });

  test('k8s: the worker pod limits nvidia.com/gpu to 1 and binds it as --gpu 0', () => {
    const worker = k8sObject('Deployment', 'foxhunt-worker');
    const containers = at(worker.obj, 'spec', 'template', 'spec', 'containers');
    if (!Array.isArray(containers)) throw new Error('no containers');
    const withGpu = containers.filter((c) => at(c, 'resources', 'limits', 'nvidia.com/gpu') !== undefined);
    expect(withGpu.length).toBe(1);
    expect(Number(at(container(worker), 'resources', 'limits', 'nvidia.com/gpu'))).toBe(1);
    const req = at(container(worker), 'resources', 'requests', 'nvidia.com/gpu');
    if (req !== undefined) expect(Number(req)).toBe(1);
    expect(flag(strings(at(container(worker), 'args'), 'worker args'), '--gpu')).toBe('0');
    // Rolling updates must not ask for a spare GPU.
    expect(at(worker.obj, 'spec', 'strategy', 'rollingUpdate', 'maxSurge')).toBe(0);
  });
});

// --- Redis ------------------------------------------------------------------------------------

function checkRedisArgs(argv: string[], where: string): void {
  expect(flag(argv, '--appendonly'), `${where}: AOF`).toBe('yes');
  expect(flag(argv, '--appendfsync'), `${where}: appendfsync`).toBe('everysec');
  expect(flag(argv, '--maxmemory-policy'), `${where}: eviction`).toBe('noeviction');
  const pass = flag(argv, '--requirepass');
  expect(pass, `${where}: requirepass`).toBeDefined();
  expect(pass?.length ?? 0).toBeGreaterThan(0);
  for (const a of argv) expect(a, `${where}: settings as flags, not a config file that could differ`).not.toMatch(/\.conf$/);
}

describe('Redis', () => {
  test('compose: AOF everysec, noeviction, a required password, bound to localhost', () => {
    const redis = service('redis');
    expect(String(redis['image'])).toMatch(/^redis:7\.\d+\.\d+/);
    const argv = strings(redis['command'], 'redis.command');
    expect(argv[0]).toBe('redis-server');
    checkRedisArgs(argv, 'compose redis');
    // The password comes from a required variable, never a literal in the file.
    expect(flag(argv, '--requirepass')).toMatch(/^\$\{REDIS_PASSWORD:\?/);
    for (const p of strings(redis['ports'], 'redis.ports')) expect(p.startsWith('127.0.0.1:'), `redis port ${p}`).toBe(true);
  });

  test('compose: every URL the services use carries the password', () => {
    for (const [name, s] of services()) {
      const url = at(s, 'environment', 'REDIS_URL');
      if (url === undefined) continue;
      expect(String(url), name).toMatch(/^rediss?:\/\/:\$\{REDIS_PASSWORD:\?[^}]*\}@redis:6379/);
    }
  });

  test('no compose service publishes a port beyond localhost', () => {
    for (const [name, s] of services()) {
      const ports = s['ports'];
      if (ports === undefined) continue;
      for (const p of strings(ports, `${name}.ports`)) expect(p.startsWith('127.0.0.1:'), `${name}: ${p}`).toBe(true);
    }
  });

  test('k8s StatefulSet (optional): same settings, password from the Secret', () => {
    const sts = k8sObject('StatefulSet', 'foxhunt-redis');
    const c = container(sts);
    expect(String(c['image'])).toMatch(/^redis:7\.\d+\.\d+/);
    const argv = strings(c['args'], 'redis args');
    checkRedisArgs(argv, 'k8s redis');
    expect(flag(argv, '--requirepass')).toBe('$(REDIS_PASSWORD)');
    expect(JSON.stringify(at(c, 'env'))).toContain('"secretKeyRef":{"name":"foxhunt-redis","key":"password"}');
  });
});

// --- auth and secrets -------------------------------------------------------------------------

describe('auth on', () => {
  test('compose dashboard: both tokens are required variables', () => {
    const d = service('dashboard');
    expect(String(at(d, 'environment', 'FOXHUNT_DASHBOARD_TOKEN'))).toMatch(/^\$\{FOXHUNT_DASHBOARD_TOKEN:\?/);
    expect(String(at(d, 'environment', 'FOXHUNT_DASHBOARD_READONLY_TOKEN'))).toMatch(/^\$\{FOXHUNT_DASHBOARD_READONLY_TOKEN:\?/);
    expect(strings(d['command'], 'dashboard.command')).not.toContain('--no-auth');
  });

  test('k8s: tokens and the Redis URL come from Secrets that hold placeholders only', () => {
    const secrets = k8s.filter((d) => d.obj['kind'] === 'Secret');
    const keys = new Set<string>();
    for (const s of secrets) {
      expect(s.obj['data'], `${s.file}: stringData placeholders, no base64 data`).toBeUndefined();
      const data = at(s.obj, 'stringData');
      if (!isObject(data)) throw new Error(`${s.file}: no stringData`);
      for (const [k, v] of Object.entries(data)) {
        expect(String(v), `${s.file}: ${k} must be a CHANGE_ME placeholder`).toContain('CHANGE_ME');
        keys.add(`${String(at(s.obj, 'metadata', 'name'))}/${k}`);
      }
    }
    const dash = container(k8sObject('Deployment', 'foxhunt-dashboard'));
    const env = at(dash, 'env');
    if (!Array.isArray(env)) throw new Error('dashboard env missing');
    const fromSecret = (name: string): string | undefined => {
      const e = env.find((x) => at(x, 'name') === name);
      const ref = at(e, 'valueFrom', 'secretKeyRef');
      return isObject(ref) ? `${String(ref['name'])}/${String(ref['key'])}` : undefined;
    };
    for (const name of ['FOXHUNT_DASHBOARD_TOKEN', 'FOXHUNT_DASHBOARD_READONLY_TOKEN', 'REDIS_URL']) {
      const ref = fromSecret(name);
      expect(ref, `dashboard ${name} from a Secret`).toBeDefined();
      expect(keys.has(ref ?? ''), `${name} -> ${ref ?? '?'} exists in secrets.yaml`).toBe(true);
    }
    expect(strings(at(dash, 'args'), 'dashboard args')).not.toContain('--no-auth');
  });
});

// --- the contract of docs/DESIGN.md section 8 -------------------------------------------------

describe('health port and paths match DESIGN section 8', () => {
  const port = Number(/--health-port P`? \(default (\d+)\)/.exec(designFleet)?.[1]);
  test('DESIGN names the port and both paths', () => {
    expect(port).toBeGreaterThan(0);
    expect(designFleet).toContain('GET /healthz');
    expect(designFleet).toContain('GET /readyz');
  });

  test('compose workers: --health-port and the healthcheck use it', () => {
    for (const [name, s] of workerServices) {
      expect(Number(flag(strings(s['command'], `${name}.command`), '--health-port')), name).toBe(port);
      const hc = strings(at(s, 'healthcheck', 'test'), `${name}.healthcheck.test`).join(' ');
      expect(hc, name).toContain(`http://127.0.0.1:${port}/healthz`);
    }
  });

  test('k8s worker: readiness on /readyz, liveness on /healthz, both on the health port', () => {
    const c = container(k8sObject('Deployment', 'foxhunt-worker'));
    expect(Number(flag(strings(c['args'], 'worker args'), '--health-port'))).toBe(port);
    const ports = at(c, 'ports');
    if (!Array.isArray(ports)) throw new Error('worker ports missing');
    const named = ports.find((p) => at(p, 'containerPort') === port);
    expect(named, `containerPort ${port}`).toBeDefined();
    const portRef = (probe: string) => {
      const p = at(c, probe, 'httpGet', 'port');
      return p === port || p === at(named, 'name');
    };
    expect(at(c, 'readinessProbe', 'httpGet', 'path')).toBe('/readyz');
    expect(portRef('readinessProbe')).toBe(true);
    expect(at(c, 'livenessProbe', 'httpGet', 'path')).toBe('/healthz');
    expect(portRef('livenessProbe')).toBe(true);
  });

  test('worker image: default flags and HEALTHCHECK use the same port', () => {
    const df = readFileSync(join(ROOT, 'docker', 'worker.Dockerfile'), 'utf8');
    expect(df).toMatch(new RegExp(`HEALTHCHECK[^\\n]*\\n?[^\\n]*http://127\\.0\\.0\\.1:${port}/healthz`));
    expect(df).toContain(`CMD ["--gpu", "0", "--health-port", "${port}"]`);
    expect(df).toContain(`EXPOSE ${port}`);
  });

  test('the dashboard runs as DESIGN says, in compose and k8s', () => {
    const m = /`foxhunt dashboard --port (\d+)`/.exec(designFleet);
    expect(m).not.toBeNull();
    const dport = m?.[1] ?? '';
    // In a container the dashboard must bind all interfaces (its default is loopback); compose still
    // publishes the port on the host's 127.0.0.1 only (checked above).
    for (const argv of [strings(service('dashboard')['command'], 'dashboard.command'),
      strings(at(container(k8sObject('Deployment', 'foxhunt-dashboard')), 'args'), 'args')]) {
      expect(argv[0]).toBe('dashboard');
      expect(flag(argv, '--port')).toBe(dport);
      expect(flag(argv, '--host')).toBe('0.0.0.0');
    }
    expect(at(k8sObject('Service', 'foxhunt-dashboard').obj, 'spec', 'ports', 0, 'port')).toBe(Number(dport));
    expect(at(container(k8sObject('Deployment', 'foxhunt-dashboard')), 'readinessProbe', 'httpGet', 'path')).toBe('/healthz');
  });
});

describe('the scaler reads queue depth from the dashboard /metrics', () => {
  const so = k8sObject('ScaledObject', 'foxhunt-worker');
  const trigger = at(so.obj, 'spec', 'triggers', 0);
  const query = String(at(trigger, 'metadata', 'query'));

  test('it scales the worker Deployment through a Prometheus trigger', () => {
    expect(at(so.obj, 'spec', 'scaleTargetRef', 'name')).toBe(at(k8sObject('Deployment', 'foxhunt-worker').obj, 'metadata', 'name'));
    expect(at(so.obj, 'spec', 'scaleTargetRef', 'kind')).toBe('Deployment');
    expect(at(trigger, 'type')).toBe('prometheus');
    expect(Number(at(trigger, 'metadata', 'threshold'))).toBe(1); // one job per worker (concurrency 1 per GPU)
    expect(Number(at(so.obj, 'spec', 'maxReplicaCount'))).toBeGreaterThanOrEqual(1);
  });

  test('the query sums the metric DESIGN names, for the epochs queue, not a raw list length', () => {
    const metric = /`(foxhunt_queue_jobs)\{queue,state\}`/.exec(designFleet)?.[1];
    expect(metric).toBe('foxhunt_queue_jobs');
    expect(query).toMatch(new RegExp(`^sum\\(${metric ?? '?'}\\{`));
    expect(query).toContain(`queue="${EPOCHS_QUEUE}"`);
    expect(designFleet).toContain(`\`${EPOCHS_QUEUE}\``);
    expect(query.toLowerCase()).not.toContain('llen');
  });

  test('the dashboard is scraped where the scaler expects it', () => {
    const svc = k8sObject('Service', 'foxhunt-dashboard');
    expect(at(svc.obj, 'metadata', 'annotations', 'prometheus.io/scrape')).toBe('true');
    expect(at(svc.obj, 'metadata', 'annotations', 'prometheus.io/path')).toBe('/metrics');
    expect(Number(at(svc.obj, 'metadata', 'annotations', 'prometheus.io/port'))).toBe(at(svc.obj, 'spec', 'ports', 0, 'port'));
  });
});

describe('images', () => {
  const worker = readFileSync(join(ROOT, 'docker', 'worker.Dockerfile'), 'utf8');
  const node = readFileSync(join(ROOT, 'docker', 'node.Dockerfile'), 'utf8');
  const arg = (df: string, name: string) => new RegExp(`^ARG ${name}=(\\S+)$`, 'm').exec(df)?.[1];

  test('pinned bases: CUDA devel builder, CUDA runtime image, Node 20 slim', () => {
    expect(arg(worker, 'CUDA_VERSION')).toMatch(/^\d+\.\d+\.\d+$/);
    expect(worker).toMatch(/^FROM nvidia\/cuda:\$\{CUDA_VERSION\}-devel-\$\{UBUNTU\} AS native$/m);
    expect(worker).toMatch(/^FROM nvidia\/cuda:\$\{CUDA_VERSION\}-runtime-\$\{UBUNTU\}$/m);
    expect(arg(worker, 'NODE_IMAGE')).toMatch(/^node:20\.\d+\.\d+-\w+-slim$/);
    expect(arg(node, 'NODE_VERSION')).toMatch(/^20\.\d+\.\d+$/);
    expect(node).toMatch(/^FROM node:\$\{NODE_VERSION\}-bookworm-slim$/m);
    for (const df of [worker, node]) expect(df).not.toMatch(/:latest\b/);
  });

  test('the native library is built for sm_90 by default, any arch list by build arg', () => {
    expect(arg(worker, 'CUDA_ARCHITECTURES')).toBe('90');
    expect(worker).toContain('-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}');
    expect(String(at(service('worker-gpu0'), 'build', 'args', 'CUDA_ARCHITECTURES'))).toBe('${CUDA_ARCHITECTURES:-90}');
  });

  test('non-root users and healthchecks in both images', () => {
    for (const df of [worker, node]) {
      const user = [...df.matchAll(/^USER (\S+)$/gm)].at(-1)?.[1];
      expect(user).toBeDefined();
      expect(user?.split(':')[0]).not.toMatch(/^(root|0)$/);
      expect(df).toMatch(/^HEALTHCHECK /m);
    }
  });

  test('every COPY source exists in the build context and is not excluded by .dockerignore', () => {
    const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#')).map((l) => l.replace(/\/$/, ''));
    for (const [name, df] of [['worker.Dockerfile', worker], ['node.Dockerfile', node]] as const) {
      const lines = df.replace(/\\\n/g, ' ').split('\n');
      let copies = 0;
      for (const line of lines) {
        const m = /^COPY\s+(.*)$/.exec(line.trim());
        if (!m || /--from=/.test(m[1] ?? '')) continue;
        const parts = (m[1] ?? '').split(/\s+/).filter((t) => !t.startsWith('--'));
        for (const src of parts.slice(0, -1)) {
          copies += 1;
          expect(existsSync(join(ROOT, src)), `${name}: COPY ${src} does not exist`).toBe(true);
          const top = src.replace(/\/$/, '');
          for (const pat of ignore) {
            expect(top === pat || top.startsWith(`${pat}/`), `${name}: COPY ${src} is excluded by .dockerignore (${pat})`).toBe(false);
          }
        }
      }
      expect(copies).toBeGreaterThan(5);
    }
    // and what must never enter an image is excluded
    for (const p of ['.git', 'node_modules', 'native/build', '.env']) expect(ignore).toContain(p);
  });

  test('k8s pods run as the images\' non-root user', () => {
    for (const name of ['foxhunt-worker', 'foxhunt-dashboard']) {
      const d = k8sObject('Deployment', name);
      expect(at(d.obj, 'spec', 'template', 'spec', 'securityContext', 'runAsNonRoot')).toBe(true);
      expect(at(d.obj, 'spec', 'template', 'spec', 'securityContext', 'runAsUser')).toBe(10001);
    }
    expect(worker).toContain('useradd --uid 10001');
    expect(node).toContain('useradd --uid 10001');
  });
});
