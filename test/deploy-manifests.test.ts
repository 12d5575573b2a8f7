/**
 * deploy/: the Kubernetes overlays and compose.yaml, checked without a cluster or a container engine
 * (none can run here, and `kubectl apply --dry-run=client` still asks an API server for its resource
 * list). Each overlay under deploy/kubernetes/overlays is rendered by `kubectl kustomize` (the one on
 * PATH, or `KUBECTL`; Debian's kubernetes-client is installed when there is none), then:
 * - every object names itself validly, once; workloads select their own pods;
 * - every switchyard container's arguments are accepted by the app's own flag parser (worker, router,
 *   planner), its declared ports are the ones the app binds with those flags, and every `$(VAR)` in
 *   them is an environment variable the container declares;
 * - every probe targets a port the container declares and, for the apps, a path that port serves
 *   (the HTTP door's health routes, the metrics door's /metrics);
 * - every Service selects pods of the overlay and targets ports their containers declare;
 * - every etcd, NATS and Redis URL given to an app names a Service of the overlay and one of its ports
 *   (overlays that bring their own servers);
 * - workers and routers are given longer to stop than their drain; workers spread over nodes; every
 *   container requests CPU and memory; only the gpu overlay asks for GPUs, one per worker pool pod;
 * - the planner's Role grants exactly what the Kubernetes connector calls, on Deployments that exist;
 * - the kustomizations use only what kustomize 2.0 (kubectl 1.20, Debian bookworm's) knows.
 * compose.yaml gets the same argument, port, URL and grace-period checks for its services.
 */
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import type { KubernetesObject, V1Container, V1Deployment, V1PodTemplateSpec, V1Role, V1RoleBinding, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import { load, loadAll } from 'js-yaml';
import { parsePlannerArgs } from '@switchyard/planner-app';
import { parseRouterArgs } from '@switchyard/router';
import { isMetricsPath, matchRoute } from '@switchyard/server/internal';
import { ensureBinaries, KUBECTL_BINARY, repoRoot } from '@switchyard/testing';
import { parseWorkerArgs } from '@switchyard/worker';
import { beforeAll, describe, expect, it } from 'vitest';

const DEPLOY = join(repoRoot(), 'deploy');
const KUSTOMIZE_ROOT = join(DEPLOY, 'kubernetes');
const OVERLAYS = readdirSync(join(KUSTOMIZE_ROOT, 'overlays')).sort();
const IMAGE = /^switchyard(:|$)/;

// ---- the apps' view of an argument list --------------------------------------------------------------

/** What the deploy files must agree with: the ports an app binds and how long it drains. */
interface AppView {
  app: 'worker' | 'router' | 'planner';
  /** port name → port the app binds with these flags (`http`, `grpc`, `metrics`, `kv-transfer`, `call-home`) */
  ports: Map<string, number>;
  /** seconds a SIGTERM waits for in-flight requests (workers and routers) */
  drainSecs?: number;
  /** the etcd, NATS and Redis URLs it is given */
  urls: string[];
}

/** Parses `[app, ...flags]` with the app's own parser; throws its UsageError when refused. */
function appView(argv: readonly string[]): AppView {
  const [app, ...args] = argv;
  if (app === 'worker') {
    const o = parseWorkerArgs(args);
    const ports = new Map([
      ['http', o.httpPort],
      ['grpc', o.grpcPort],
      ['metrics', o.metricsPort],
    ]);
    if (o.kvTransferPort !== undefined) ports.set('kv-transfer', o.kvTransferPort);
    return { app, ports, drainSecs: o.exitTimeoutSecs, urls: [o.etcd, o.nats, o.redis].filter((u): u is string => u !== undefined) };
  }
  if (app === 'router') {
    const o = parseRouterArgs(args);
    const ports = new Map([
      ['http', o.httpPort],
      ['grpc', o.grpcPort],
      ['metrics', o.metricsPort],
    ]);
    if (o.callHome && o.callHomePort !== 0) ports.set('call-home', o.callHomePort);
    return { app, ports, drainSecs: o.exitTimeoutSecs, urls: [o.etcd, o.nats, o.redis] };
  }
  if (app === 'planner') {
    const o = parsePlannerArgs(args);
    return { app, ports: new Map([['metrics', o.metricsPort]]), urls: [o.etcd, o.nats] };
  }
  throw new Error(`'${String(app)}' is not a switchyard command`);
}

/** Which door serves an HTTP path on a port of the app, or why none does. */
function servesPath(view: AppView, port: number, path: string): string | undefined {
  const bare = path.split('?', 1)[0]!;
  if (view.ports.get('metrics') === port) return isMetricsPath(bare) ? undefined : `${path} is not the metrics door's path`;
  if (view.ports.get('http') === port) return matchRoute(bare)?.kind === 'health' ? undefined : `${path} is not a health route of the HTTP door`;
  return `port ${port} serves no HTTP probe`;
}

/** host:port of each URL in a comma-separated list. */
function endpoints(urls: readonly string[]): Array<{ host: string; port: number }> {
  return urls.flatMap((u) => u.split(',')).map((u) => {
    const url = new URL(u);
    const port = url.port !== '' ? Number(url.port) : ({ 'http:': 80, 'nats:': 4222, 'redis:': 6379 } as Record<string, number>)[url.protocol]!;
    return { host: url.hostname, port };
  });
}

// ---- rendering ---------------------------------------------------------------------------------------

const rendered = new Map<string, KubernetesObject[]>();
let kubectl = '';

beforeAll(async () => {
  kubectl = process.env['KUBECTL'] ?? (await ensureBinaries([KUBECTL_BINARY])).get('kubectl')!;
  const run = promisify(execFile);
  await Promise.all(
    OVERLAYS.map(async (overlay) => {
      const { stdout } = await run(kubectl, ['kustomize', join(KUSTOMIZE_ROOT, 'overlays', overlay)], { maxBuffer: 16 << 20 });
      rendered.set(overlay, (loadAll(stdout) as KubernetesObject[]).filter((o) => o !== null));
    }),
  );
}, 600_000);

type Workload = V1Deployment | V1StatefulSet;
const workloads = (objects: KubernetesObject[]): Workload[] => objects.filter((o): o is Workload => o.kind === 'Deployment' || o.kind === 'StatefulSet');
const template = (w: Workload): V1PodTemplateSpec => w.spec!.template;
const named = (o: KubernetesObject): string => `${o.kind}/${o.metadata!.name}`;
const byKind = <T extends KubernetesObject>(objects: KubernetesObject[], kind: string): T[] => objects.filter((o) => o.kind === kind) as T[];
const isApp = (c: V1Container): boolean => IMAGE.test(c.image ?? '');

/** The container's arguments as the app receives them: each `$(VAR)` expanded (to a stand-in value). */
function expanded(c: V1Container): string[] {
  const env = new Set((c.env ?? []).map((e) => e.name));
  return (c.args ?? []).map((a) =>
    a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string) => {
      // Kubernetes leaves an undeclared $(VAR) as written: the app would get the text itself
      if (!env.has(name)) throw new Error(`${c.name}: ${whole} is not an environment variable of the container`);
      return '10.0.0.7';
    }),
  );
}

function portNumber(c: V1Container, port: number | string): number | undefined {
  const declared = c.ports ?? [];
  return typeof port === 'number' ? declared.find((p) => p.containerPort === port)?.containerPort : declared.find((p) => p.name === port)?.containerPort;
}

describe.each(OVERLAYS)('deploy/kubernetes/overlays/%s', (overlay) => {
  const objects = (): KubernetesObject[] => rendered.get(overlay)!;

  it('renders objects with valid names, each once, and workloads that select their own pods', () => {
    expect(objects().length).toBeGreaterThan(0);
    const names = objects().map(named);
    expect(new Set(names).size, names.join(', ')).toBe(names.length);
    for (const o of objects()) {
      expect(o.apiVersion, named(o)).toMatch(/^(v1|apps\/v1|rbac\.authorization\.k8s\.io\/v1)$/);
      expect(o.metadata?.name, named(o)).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
    for (const w of workloads(objects())) {
      const labels = template(w).metadata!.labels!;
      expect(Object.keys(w.spec!.selector.matchLabels!).length, named(w)).toBeGreaterThan(0);
      for (const [k, v] of Object.entries(w.spec!.selector.matchLabels!)) expect(labels[k], named(w)).toBe(v);
    }
  });

  it("gives every switchyard container arguments its app's parser accepts, and declares the ports the app binds", () => {
    let apps = 0;
    for (const w of workloads(objects())) {
      for (const c of template(w).spec!.containers.filter(isApp)) {
        apps++;
        const view = appView(expanded(c));
        const declared = new Map((c.ports ?? []).map((p) => [p.name!, p.containerPort]));
        for (const [name, port] of view.ports) {
          expect(declared.get(name), `${named(w)} port ${name}`).toBe(port);
        }
        for (const [name, port] of declared) expect(view.ports.get(name), `${named(w)} declares ${name}`).toBe(port);
        const scrape = template(w).metadata!.annotations?.['prometheus.io/port'];
        if (scrape !== undefined) expect(Number(scrape), `${named(w)} scrape port`).toBe(view.ports.get('metrics'));
      }
    }
    expect(apps).toBeGreaterThan(0);
  });

  it('probes ports the containers declare, and for the apps paths those ports serve', () => {
    let probes = 0;
    for (const w of workloads(objects())) {
      for (const c of template(w).spec!.containers) {
        expect(c.readinessProbe ?? c.livenessProbe, `${named(w)} ${c.name} has a probe`).toBeDefined();
        for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
          if (probe === undefined) continue;
          probes++;
          const target = probe.httpGet ?? probe.tcpSocket;
          if (target === undefined) {
            expect(probe.exec?.command?.length, `${named(w)} ${c.name}: a probe with no port runs a command`).toBeGreaterThan(0);
            continue;
          }
          const port = portNumber(c, target.port as number | string);
          expect(port, `${named(w)} ${c.name} probe port ${String(target.port)}`).toBeDefined();
          if (isApp(c) && probe.httpGet !== undefined) {
            expect(servesPath(appView(expanded(c)), port!, probe.httpGet.path ?? '/'), `${named(w)} ${c.name}`).toBeUndefined();
          }
        }
      }
    }
    expect(probes).toBeGreaterThan(0);
  });

  it('has every Service select pods of the overlay and target ports their containers declare', () => {
    const pods = workloads(objects()).map((w) => ({ labels: template(w).metadata!.labels!, containers: template(w).spec!.containers }));
    for (const s of byKind<V1Service>(objects(), 'Service')) {
      const selector = Object.entries(s.spec!.selector ?? {});
      expect(selector.length, `${named(s)} selects by labels`).toBeGreaterThan(0);
      const selected = pods.filter((p) => selector.every(([k, v]) => p.labels[k] === v));
      expect(selected.length, `${named(s)} selects no pod`).toBeGreaterThan(0);
      for (const port of s.spec!.ports!) {
        const target = port.targetPort ?? port.port;
        for (const p of selected) expect(p.containers.some((c) => portNumber(c, target as number | string) !== undefined), `${named(s)} targetPort ${String(target)}`).toBe(true);
      }
    }
  });

  it('points every etcd, NATS and Redis URL of the apps at a Service of the overlay, when it has one', () => {
    const services = byKind<V1Service>(objects(), 'Service');
    for (const w of workloads(objects())) {
      for (const c of template(w).spec!.containers.filter(isApp)) {
        for (const { host, port } of endpoints(appView(expanded(c)).urls)) {
          const service = services.find((s) => s.metadata!.name === host);
          // an overlay without the servers expects them at these names (base/cluster alone)
          if (service === undefined && !services.some((s) => ['etcd', 'nats', 'redis'].includes(s.metadata!.name!))) continue;
          expect(service, `${named(w)}: no Service '${host}'`).toBeDefined();
          expect(service!.spec!.ports!.map((p) => p.port), `${named(w)}: Service '${host}' port`).toContain(port);
        }
      }
    }
  });

  it('gives workers and routers longer to stop than their drain, spreads workers over nodes, and requests resources', () => {
    for (const w of workloads(objects())) {
      const spec = template(w).spec!;
      for (const c of spec.containers) {
        expect(c.resources?.requests?.['cpu'], `${named(w)} ${c.name} cpu request`).toBeDefined();
        expect(c.resources?.requests?.['memory'], `${named(w)} ${c.name} memory request`).toBeDefined();
        if (!isApp(c)) continue;
        const view = appView(expanded(c));
        if (view.drainSecs !== undefined) expect(spec.terminationGracePeriodSeconds ?? 30, named(w)).toBeGreaterThan(view.drainSecs);
        if (view.app === 'worker') {
          const terms = spec.affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution?.map((t) => t.podAffinityTerm) ?? [];
          const own = terms.filter((t) => t.topologyKey === 'kubernetes.io/hostname' && Object.entries(t.labelSelector?.matchLabels ?? {}).every(([k, v]) => template(w).metadata!.labels![k] === v));
          expect(own.length, `${named(w)} anti-affinity to its own pods`).toBeGreaterThan(0);
        }
      }
    }
  });

  it('asks for GPUs in the gpu overlay only, one per worker pool pod', () => {
    for (const w of workloads(objects())) {
      for (const c of template(w).spec!.containers) {
        const gpus = c.resources?.limits?.['nvidia.com/gpu'];
        const pool = isApp(c) && c.args?.[0] === 'worker' && template(w).metadata!.labels!['switchyard.dev/pool'] !== undefined;
        if (overlay === 'gpu' && pool) {
          expect(String(gpus), `${named(w)} GPU limit`).toBe('1');
          expect(template(w).spec!.tolerations?.some((t) => t.key === 'nvidia.com/gpu'), `${named(w)} tolerates GPU nodes`).toBe(true);
        } else {
          expect(gpus, `${named(w)} ${c.name}`).toBeUndefined();
        }
      }
    }
  });

  it("grants the planner exactly what the Kubernetes connector calls, on the Deployments it sizes", () => {
    const planners = workloads(objects()).filter((w) => template(w).spec!.containers.some((c) => isApp(c) && c.args?.[0] === 'planner'));
    if (overlay === 'standalone') return expect(planners).toEqual([]);
    expect(planners.length).toBe(1);
    const planner = planners[0]!;
    const args = template(planner).spec!.containers[0]!.args!;
    const options = parsePlannerArgs(args.slice(1));
    expect(options.connector).toBe('kubernetes');
    const targets = Object.values(options.kubeDeployments).sort();
    expect(targets).toEqual(['switchyard-aggregated', 'switchyard-decode', 'switchyard-prefill']);
    const deployments = byKind<V1Deployment>(objects(), 'Deployment').map((d) => d.metadata!.name);
    for (const name of targets) expect(deployments, name).toContain(name);

    const account = template(planner).spec!.serviceAccountName!;
    expect(objects().some((o) => o.kind === 'ServiceAccount' && o.metadata!.name === account)).toBe(true);
    const binding = byKind<V1RoleBinding>(objects(), 'RoleBinding').find((b) => b.subjects?.some((s) => s.kind === 'ServiceAccount' && s.name === account))!;
    expect(binding).toBeDefined();
    const role = byKind<V1Role>(objects(), 'Role').find((r) => r.metadata!.name === binding.roleRef.name)!;
    expect(role).toBeDefined();
    const grants = new Set(
      role.rules!.flatMap((r) => r.apiGroups!.flatMap((g) => r.resources!.flatMap((res) => r.verbs.flatMap((v) => (r.resourceNames ?? ['*']).map((n) => `${g}/${res}/${v}/${n}`))))),
    );
    const needed = new Set(targets.flatMap((n) => [`apps/deployments/scale/get/${n}`, `apps/deployments/scale/patch/${n}`, `apps/deployments/get/${n}`]));
    expect(grants).toEqual(needed);
  });
});

describe('deploy/kubernetes kustomizations', () => {
  // What kustomize 2.0.3 (kubectl 1.20, Debian bookworm's kubernetes-client) reads; it takes only
  // files under `resources` (directories go under `bases`) and has no `patches` or `components`.
  const KUSTOMIZE_2_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'bases', 'patchesStrategicMerge', 'patchesJson6902', 'namespace', 'namePrefix', 'nameSuffix', 'images', 'configMapGenerator', 'secretGenerator', 'generatorOptions']);
  const kustomizations = (dir: string): string[] =>
    readdirSync(dir).flatMap((f) => {
      const path = join(dir, f);
      if (statSync(path).isDirectory()) return kustomizations(path);
      return f === 'kustomization.yaml' ? [path] : [];
    });

  it('use only what kustomize 2.0 knows, with directories under bases', () => {
    const files = kustomizations(KUSTOMIZE_ROOT);
    expect(files.length).toBeGreaterThanOrEqual(OVERLAYS.length);
    for (const file of files) {
      const k = load(readFileSync(file, 'utf8')) as Record<string, unknown>;
      const where = relative(DEPLOY, file);
      for (const field of Object.keys(k)) expect(KUSTOMIZE_2_FIELDS.has(field), `${where}: ${field}`).toBe(true);
      for (const r of (k['resources'] as string[] | undefined) ?? []) expect(statSync(join(file, '..', r)).isFile(), `${where}: resource ${r} is a file`).toBe(true);
      for (const b of (k['bases'] as string[] | undefined) ?? []) expect(statSync(join(file, '..', b)).isDirectory(), `${where}: base ${b}`).toBe(true);
    }
  });

  it('are rendered by a kubectl found or installed by the harness', () => {
    expect(kubectl).not.toBe('');
    expect(OVERLAYS).toEqual(expect.arrayContaining(['standalone', 'cluster', 'gpu']));
  });
});

// ---- compose.yaml ------------------------------------------------------------------------------------

interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  ports?: string[];
  depends_on?: Record<string, unknown> | string[];
  profiles?: string[];
  stop_grace_period?: string;
}

describe('deploy/compose.yaml', () => {
  const compose = load(readFileSync(join(DEPLOY, 'compose.yaml'), 'utf8')) as { services: Record<string, ComposeService> };
  const services = Object.entries(compose.services);
  const apps = services.filter(([, s]) => IMAGE.test(s.image ?? ''));
  const command = (name: string, s: ComposeService): string[] => {
    expect(Array.isArray(s.command), `${name}: command is a list (no shell splitting)`).toBe(true);
    return s.command as string[];
  };
  /** The ports a server's command line listens on (`--port=N`, `--port N`, `…://host:N`). */
  const listens = (words: readonly string[]): number[] =>
    words.flatMap((w, i) => {
      const m = /^--(?:port|listen-client-urls)=(?:.*:)?(\d+)$/.exec(w) ?? (words[i - 1] === '--port' ? /^(\d+)$/.exec(w) : null);
      return m === null ? [] : [Number(m[1])];
    });
  const seconds = (d: string | undefined): number => {
    const m = /^(\d+)s$/.exec(d ?? '10s');
    expect(m, `duration ${d}`).not.toBeNull();
    return Number(m![1]);
  };

  it("gives each switchyard service a command its app's parser accepts, the image built by deploy/Dockerfile", () => {
    expect(apps.map(([name]) => name).sort()).toEqual(['decode', 'planner', 'prefill', 'router', 'worker']);
    for (const [name, s] of apps) {
      expect(() => appView(command(name, s)), name).not.toThrow();
      expect(s.build, name).toEqual({ context: '..', dockerfile: 'deploy/Dockerfile' });
    }
    expect(statSync(join(DEPLOY, 'Dockerfile')).isFile()).toBe(true);
  });

  it('points every URL at a service listening on its port, and depends only on services that exist', () => {
    for (const [name, s] of apps) {
      for (const { host, port } of endpoints(appView(command(name, s)).urls)) {
        const server = compose.services[host];
        expect(server, `${name}: no service '${host}'`).toBeDefined();
        expect(listens(command(host, server!)), `${name}: ${host} listens on ${port}`).toContain(port);
        const deps = Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {});
        expect(deps, `${name} waits for ${host}`).toContain(host);
      }
    }
  });

  it('publishes ports the apps bind, and gives them longer to stop than their drain', () => {
    for (const [name, s] of apps) {
      const view = appView(command(name, s));
      const bound = [...view.ports.values()];
      for (const mapping of s.ports ?? []) expect(bound, `${name} publishes ${mapping}`).toContain(Number(mapping.split(':').at(-1)));
      if (view.drainSecs !== undefined) expect(seconds(s.stop_grace_period), name).toBeGreaterThan(view.drainSecs);
    }
  });

  it('brings up a whole cluster in each profile: aggregated, or prefill + decode advertising their own names', () => {
    const roles = (profile: string): string[] =>
      apps
        .filter(([, s]) => s.profiles === undefined || s.profiles.includes(profile))
        .map(([name, s]) => {
          const args = command(name, s);
          if (args[0] !== 'worker') return args[0]!;
          const o = parseWorkerArgs(args.slice(1));
          if (o.kvTransferAddress !== undefined) expect(o.kvTransferAddress.split(':')[0], `${name} advertises its own name`).toBe(name);
          return `worker:${o.role}`;
        })
        .sort();
    expect(roles('aggregated')).toEqual(['planner', 'router', 'worker:aggregated']);
    expect(roles('disagg')).toEqual(['planner', 'router', 'worker:decode', 'worker:prefill']);
  });
});
