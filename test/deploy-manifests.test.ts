/**
 * The Kubernetes manifests under deploy/kubernetes, checked without a cluster (none can run here, and
 * `kubectl apply --dry-run=client` still asks an API server for its resource list): every document
 * parses as a Kubernetes object; Deployments select their own pods; the router's, the workers' and
 * the planner's arguments are accepted by the apps' own flag parsers; every worker's grace period outlasts its
 * drain (`--exit-timeout-secs`), so scaling a pool down never SIGKILLs a draining worker; and the
 * planner's Role grants exactly what the Kubernetes connector calls (get + patch on
 * deployments/scale, get on deployments) for the Deployments it is told to size, which exist.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadAllYaml, type KubernetesObject, type V1Deployment, type V1Role, type V1RoleBinding } from '@kubernetes/client-node';
import { parsePlannerArgs } from '@switchyard/planner-app';
import { parseRouterArgs } from '@switchyard/router';
import { repoRoot } from '@switchyard/testing';
import { parseWorkerArgs } from '@switchyard/worker';
import { describe, expect, it } from 'vitest';

const dir = join(repoRoot(), 'deploy', 'kubernetes');
const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'));
const objects: { file: string; object: KubernetesObject }[] = files.flatMap((file) =>
  (loadAllYaml(readFileSync(join(dir, file), 'utf8')) as KubernetesObject[]).map((object) => ({ file, object })),
);
const deployments = objects.filter((o) => o.object.kind === 'Deployment').map((o) => o.object as V1Deployment);
const argsOf = (d: V1Deployment): string[] => d.spec!.template.spec!.containers[0]!.args ?? [];
const flag = (args: readonly string[], name: string): string[] => args.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));

describe('deploy/kubernetes manifests', () => {
  it('parse as Kubernetes objects with names', () => {
    expect(files).toEqual(expect.arrayContaining(['worker.yaml', 'cluster.yaml', 'planner.yaml']));
    for (const { file, object } of objects) {
      expect(object.apiVersion, file).toMatch(/^(v1|apps\/v1|rbac\.authorization\.k8s\.io\/v1)$/);
      expect(object.metadata?.name, `${file} ${object.kind}`).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
  });

  it('every Deployment selects its own pods', () => {
    for (const d of deployments) {
      const labels = d.spec!.template.metadata!.labels!;
      for (const [k, v] of Object.entries(d.spec!.selector.matchLabels!)) expect(labels[k], d.metadata!.name).toBe(v);
    }
  });

  it("router, worker and planner arguments are accepted by the apps' own parsers", () => {
    // Kubernetes expands $(POD_IP) at start; any address stands in for it here.
    const expand = (args: string[]): string[] => args.map((a) => a.replace('$(POD_IP)', '10.0.0.7'));
    let routers = 0;
    let workers = 0;
    let planners = 0;
    for (const d of deployments) {
      const [command, ...args] = expand(argsOf(d));
      if (command === 'router') {
        routers++;
        expect(() => parseRouterArgs(args), d.metadata!.name).not.toThrow();
      } else if (command === 'worker') {
        workers++;
        expect(() => parseWorkerArgs(args), d.metadata!.name).not.toThrow();
      } else if (command === 'planner') {
        planners++;
        expect(() => parsePlannerArgs(args), d.metadata!.name).not.toThrow();
        // the metrics port the scrape annotation and the container port name
        const port = parsePlannerArgs(args).metricsPort;
        expect(d.spec!.template.metadata!.annotations!['prometheus.io/port'], d.metadata!.name).toBe(String(port));
        expect(d.spec!.template.spec!.containers[0]!.ports!.map((p) => p.containerPort)).toContain(port);
      }
    }
    expect(planners).toBe(1);
    expect(routers).toBeGreaterThanOrEqual(1);
    expect(workers).toBeGreaterThanOrEqual(4);
  });

  it('every worker and router is given longer to stop than its drain', () => {
    for (const d of deployments) {
      const args = argsOf(d);
      if (args[0] !== 'worker' && args[0] !== 'router') continue;
      const exitTimeout = Number(flag(args, 'exit-timeout-secs')[0] ?? 30);
      expect(d.spec!.template.spec!.terminationGracePeriodSeconds, d.metadata!.name).toBeGreaterThan(exitTimeout);
    }
  });

  it("the planner's Role grants exactly what the Kubernetes connector calls, on the Deployments it sizes", () => {
    const planner = deployments.find((d) => argsOf(d)[0] === 'planner')!;
    expect(planner).toBeDefined();
    const args = argsOf(planner);
    expect(flag(args, 'connector')).toEqual(['kubernetes']);
    const targets = flag(args, 'kube-deployment').map((a) => a.split('=')[1]!);
    expect(targets.length).toBeGreaterThan(0);
    // the planner reads them as its parser does: pool → Deployment
    expect(Object.values(parsePlannerArgs(args.slice(1)).kubeDeployments).sort()).toEqual([...targets].sort());
    for (const name of targets) expect(deployments.map((d) => d.metadata!.name), name).toContain(name);

    const account = planner.spec!.template.spec!.serviceAccountName!;
    const binding = objects.map((o) => o.object).find((o): o is V1RoleBinding => o.kind === 'RoleBinding' && (o as V1RoleBinding).subjects?.some((s) => s.name === account) === true)!;
    expect(binding).toBeDefined();
    expect(objects.some((o) => o.object.kind === 'ServiceAccount' && o.object.metadata!.name === account)).toBe(true);
    const role = objects.map((o) => o.object).find((o): o is V1Role => o.kind === 'Role' && o.metadata!.name === binding.roleRef.name)!;
    expect(role).toBeDefined();
    const grants = new Set(
      role.rules!.flatMap((r) => r.apiGroups!.flatMap((g) => r.resources!.flatMap((res) => r.verbs.flatMap((v) => (r.resourceNames ?? ['*']).map((n) => `${g}/${res}/${v}/${n}`))))),
    );
    const needed = new Set(targets.flatMap((n) => [`apps/deployments/scale/get/${n}`, `apps/deployments/scale/patch/${n}`, `apps/deployments/get/${n}`]));
    expect(grants).toEqual(needed);
  });
});
