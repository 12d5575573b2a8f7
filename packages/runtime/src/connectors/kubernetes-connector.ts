/**
 * The planner's Kubernetes connector: one Deployment per pool, sized through its scale subresource
 * (`GET` / `PATCH /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale`) with
 * `@kubernetes/client-node`. The RBAC it needs (get + patch on `deployments/scale`, get on
 * `deployments`) is in `deploy/kubernetes/base/cluster/planner.yaml`.
 *
 * Contracts:
 * - `replicas()` reports each Deployment's **desired** count (`spec.replicas` of its Scale), not
 *   `status.replicas`. The `Connector` port counts a replica still starting and not one draining,
 *   and `spec.replicas` is exactly that: it rises the moment the planner asks (a pod being
 *   scheduled counts) and falls the moment it asks for fewer (a terminating pod, still draining
 *   under its `terminationGracePeriodSeconds`, no longer counts). `status.replicas` would lag both
 *   ways and make the planner ask again for what is already under way.
 * - `scale()` reads the Scale, then patches `spec.replicas` with the `resourceVersion` it read
 *   (a JSON merge patch), so a concurrent writer (`kubectl scale`, an HPA) makes the API server
 *   answer 409 rather than be overwritten blindly; a 409 is retried with a fresh read, up to
 *   `maxConflictRetries` times. A target equal to the current spec sends no patch.
 * - Scale-down is the pod's own drain: Kubernetes sends SIGTERM, the worker leaves discovery and
 *   finishes its in-flight requests (`--exit-timeout-secs`), and the manifests give it a
 *   `terminationGracePeriodSeconds` longer than that. Which pod goes is the ReplicaSet's choice.
 * - Errors map once, here, to the taxonomy: 401 → unauthenticated, 403 → permission_denied (the
 *   RBAC), 404 → not_found (no such Deployment or namespace), 409 left after the retries, 429 and
 *   5xx and no connection → unavailable, a request over `requestTimeoutMs` → deadline_exceeded,
 *   400 / 422 → invalid_argument, an answer that is not a Scale (bad JSON, no replicas) → internal.
 *   Messages name the pool, the Deployment and the namespace.
 */
import { readFileSync } from 'node:fs';
import { AppsV1Api, ApiException, KubeConfig, Observable, PatchStrategy, type ConfigurationOptions, type ObservableMiddleware, type V1Scale } from '@kubernetes/client-node';
import {
  SwitchyardError,
  deadlineExceeded,
  internal,
  invalidArgument,
  notFound,
  permissionDenied,
  silentLogger,
  unauthenticated,
  unavailable,
  type Logger,
} from '@switchyard/common';
import { POOLS, type Connector, type Pool } from '@switchyard/planner';

/** How long one API call may take before it fails deadline_exceeded. */
export const DEFAULT_KUBE_REQUEST_TIMEOUT_MS = 10_000;
/** How many times a scale that meets a 409 conflict reads again and retries. */
export const DEFAULT_KUBE_CONFLICT_RETRIES = 5;
/** The service account namespace file every in-cluster pod has. */
export const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** Kubernetes object names (RFC 1123 DNS subdomain, which Deployments use). */
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Namespaces are RFC 1123 labels. */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** Deployments' replicas are an int32. */
const MAX_REPLICAS = 2 ** 31 - 1;

export interface KubernetesConnectorOptions {
  /** Pool → name of the Deployment that serves it. Pools absent here are not managed. At least one. */
  deployments: Partial<Record<Pool, string>>;
  /**
   * Path of a kubeconfig file (its current context is used). Absent: in-cluster config (the pod's
   * service account token and CA, `KUBERNETES_SERVICE_HOST` / `_PORT`).
   */
  kubeconfig?: string;
  /**
   * Kubernetes namespace of the Deployments. Absent: the kubeconfig context's namespace, else (in
   * a cluster) the pod's own namespace, else `default`.
   */
  namespace?: string;
  /** Per API call (default `DEFAULT_KUBE_REQUEST_TIMEOUT_MS`). */
  requestTimeoutMs?: number;
  /** Fresh reads after a 409 before `scale` gives up unavailable (default `DEFAULT_KUBE_CONFLICT_RETRIES`). */
  maxConflictRetries?: number;
  logger?: Logger;
}

/**
 * The planner's `Connector` on Kubernetes. Calls are not expected to overlap (the port's contract);
 * if they do, each still reads before it patches.
 */
export class KubernetesConnector implements Connector {
  readonly namespace: string;
  private readonly api: AppsV1Api;
  private readonly deployments: ReadonlyMap<Pool, string>;
  private readonly timeoutMs: number;
  private readonly conflictRetries: number;
  private readonly logger: Logger;
  private closed = false;

  constructor(options: KubernetesConnectorOptions) {
    const entries = Object.entries(options.deployments).filter((e): e is [Pool, string] => e[1] !== undefined);
    if (entries.length === 0) throw invalidArgument('the Kubernetes connector needs at least one pool → Deployment name');
    for (const [pool, name] of entries) {
      if (!POOLS.includes(pool)) throw invalidArgument(`unknown pool '${pool}': prefill, decode or aggregated`);
      if (!DNS_SUBDOMAIN.test(name)) throw invalidArgument(`Deployment name '${name}' of pool ${pool} is not a Kubernetes object name (lower-case RFC 1123 subdomain)`);
    }
    this.timeoutMs = positiveInt(options.requestTimeoutMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS, 'requestTimeoutMs', 1);
    this.conflictRetries = positiveInt(options.maxConflictRetries ?? DEFAULT_KUBE_CONFLICT_RETRIES, 'maxConflictRetries', 0);
    this.deployments = new Map(entries);
    this.logger = options.logger ?? silentLogger;

    const kc = new KubeConfig();
    if (options.kubeconfig === undefined && (process.env.KUBERNETES_SERVICE_HOST ?? '') === '') {
      throw invalidArgument('not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST unset): give a kubeconfig');
    }
    try {
      if (options.kubeconfig !== undefined) kc.loadFromFile(options.kubeconfig);
      else kc.loadFromCluster();
    } catch (err) {
      throw invalidArgument(
        options.kubeconfig !== undefined ? `cannot read kubeconfig ${options.kubeconfig}: ${(err as Error).message}` : `cannot load the in-cluster config: ${(err as Error).message}`,
        err,
      );
    }
    if (kc.getCurrentCluster() === null) {
      throw invalidArgument(
        options.kubeconfig !== undefined ? `kubeconfig ${options.kubeconfig} has no current context with a cluster` : 'the in-cluster config names no cluster',
      );
    }
    const namespace = options.namespace ?? contextNamespace(kc) ?? (options.kubeconfig === undefined ? podNamespace() : undefined) ?? 'default';
    if (!DNS_LABEL.test(namespace)) throw invalidArgument(`Kubernetes namespace '${namespace}' is not a valid namespace name`);
    this.namespace = namespace;
    this.api = kc.makeApiClient(AppsV1Api);
  }

  /** Desired replicas (`spec.replicas`) of every managed pool's Deployment; see the module comment for why. */
  async replicas(): Promise<Partial<Record<Pool, number>>> {
    this.checkOpen();
    const pools = [...this.deployments.keys()];
    const counts = await Promise.all(pools.map(async (pool) => specReplicas(await this.readScale(pool), this.describe(pool))));
    const out: Partial<Record<Pool, number>> = {};
    pools.forEach((pool, i) => (out[pool] = counts[i]));
    return out;
  }

  /** Sets the pool's Deployment to `target` replicas (resolves once the API server accepted it). */
  async scale(pool: Pool, target: number): Promise<void> {
    this.checkOpen();
    if (!this.deployments.has(pool)) throw invalidArgument(`pool ${pool} is not managed by this connector`);
    if (!Number.isInteger(target) || target < 0 || target > MAX_REPLICAS) throw invalidArgument(`bad target ${target} for pool ${pool}: an integer from 0 to ${MAX_REPLICAS}`);
    const what = this.describe(pool);
    for (let attempt = 0; ; attempt++) {
      const scale = await this.readScale(pool);
      const current = specReplicas(scale, what);
      if (current === target) return;
      const resourceVersion = scale.metadata?.resourceVersion;
      if (typeof resourceVersion !== 'string' || resourceVersion === '') throw internal(`the API server's Scale of ${what} has no resourceVersion`);
      try {
        const patched = await this.call(what, 'patch', (options) =>
          this.api.patchNamespacedDeploymentScale(
            { name: this.deployments.get(pool)!, namespace: this.namespace, body: { metadata: { resourceVersion }, spec: { replicas: target } } },
            options,
          ),
        );
        this.logger.info({ pool, deployment: this.deployments.get(pool), namespace: this.namespace, from: current, to: specReplicas(patched, what) }, 'scaled');
        return;
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        if (attempt >= this.conflictRetries) {
          throw unavailable(`scaling ${what} to ${target}: it kept changing under us (409 Conflict ${attempt + 1} times); another writer (an HPA, kubectl scale) is scaling it too`, err.cause);
        }
        this.logger.debug({ pool, attempt }, 'scale conflict: reading again');
      }
    }
  }

  /** Stops managing; the Deployments keep their replicas. Idempotent. */
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  private checkOpen(): void {
    if (this.closed) throw unavailable('the Kubernetes connector is closed');
  }

  private describe(pool: Pool): string {
    return `Deployment ${this.namespace}/${this.deployments.get(pool)} (pool ${pool})`;
  }

  private readScale(pool: Pool): Promise<V1Scale> {
    return this.call(this.describe(pool), 'read', (options) =>
      this.api.readNamespacedDeploymentScale({ name: this.deployments.get(pool)!, namespace: this.namespace }, options),
    );
  }

  /** One API call under the timeout, its failure classified. A 409 becomes `ConflictError` for `scale`'s retry. */
  private async call<T>(what: string, verb: 'read' | 'patch', run: (options: ConfigurationOptions<ObservableMiddleware>) => Promise<T>): Promise<T> {
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      return await run(callOptions(signal, verb === 'patch'));
    } catch (err) {
      if (signal.aborted) throw deadlineExceeded(`${verb} of ${what}: no answer from the Kubernetes API server within ${this.timeoutMs} ms`, err);
      throw classify(err, `${verb} of ${what}`);
    }
  }
}

/** A 409 on patch: the caller reads again. */
class ConflictError extends Error {}

/** Per-call middleware: the timeout's signal, and the merge-patch content type on a patch. */
function callOptions(signal: AbortSignal, patch: boolean): ConfigurationOptions<ObservableMiddleware> {
  const middleware: ObservableMiddleware = {
    pre: (context) => {
      context.setSignal(signal);
      if (patch) context.setHeaderParam('Content-Type', PatchStrategy.MergePatch);
      return new Observable(Promise.resolve(context));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  // 'append' keeps the client's own middleware.
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}

function classify(err: unknown, what: string): SwitchyardError | ConflictError {
  if (err instanceof SwitchyardError) return err;
  if (err instanceof ApiException) {
    const code = (err as ApiException<unknown>).code;
    const reason = statusMessage((err as ApiException<unknown>).body);
    const detail = `${what}: HTTP ${code}${reason === undefined ? '' : ` (${reason})`}`;
    if (code === 409) return new ConflictError(detail, { cause: err });
    if (code === 401) return unauthenticated(`${detail}: the API server refused our credentials`, err);
    if (code === 403) return permissionDenied(`${detail}: the service account may not do this; it needs get and patch on deployments/scale (deploy/kubernetes/base/cluster/planner.yaml)`, err);
    if (code === 404) return notFound(`${detail}: no such Deployment in that namespace`, err);
    if (code === 400 || code === 422) return invalidArgument(`${detail}: the API server refused the request`, err);
    if (code === 429 || code >= 500) return unavailable(`${detail}: the API server cannot serve it now`, err);
    if (code >= 200 && code < 300) return internal(`${what}: the API server's answer is not a Scale`, err);
    return unavailable(`${detail}: unexpected answer from the API server`, err);
  }
  if (err instanceof SyntaxError) return internal(`${what}: the API server's answer is not JSON: ${err.message}`, err);
  const message = err instanceof Error ? err.message : String(err);
  return unavailable(`${what}: cannot reach the Kubernetes API server: ${message}`, err);
}

/** The `message` of a Kubernetes `Status` body, if the body is one (bounded: the body is the server's). */
function statusMessage(body: unknown): string | undefined {
  let value = body;
  if (typeof body === 'string') {
    try {
      value = JSON.parse(body) as unknown;
    } catch {
      return body.length === 0 ? undefined : body.slice(0, 200);
    }
  }
  if (typeof value === 'object' && value !== null && typeof (value as { message?: unknown }).message === 'string') {
    return (value as { message: string }).message.slice(0, 200);
  }
  return undefined;
}

function specReplicas(scale: V1Scale, what: string): number {
  const replicas = (scale as { spec?: { replicas?: unknown } } | undefined)?.spec?.replicas;
  // The API server omits spec.replicas when it is 0 (omitempty).
  if (replicas === undefined && typeof scale === 'object' && scale !== null && typeof scale.spec === 'object') return 0;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0 || replicas > MAX_REPLICAS) {
    throw internal(`the API server's Scale of ${what} has no valid spec.replicas`);
  }
  return replicas;
}

function contextNamespace(kc: KubeConfig): string | undefined {
  const ns = kc.getContextObject(kc.getCurrentContext())?.namespace;
  return ns === undefined || ns === '' ? undefined : ns;
}

function podNamespace(): string | undefined {
  try {
    const ns = readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8').trim();
    return ns === '' ? undefined : ns;
  } catch {
    return undefined;
  }
}

function positiveInt(value: number, name: string, min: number): number {
  if (!Number.isInteger(value) || value < min) throw invalidArgument(`${name} must be an integer ≥ ${min}, got ${value}`);
  return value;
}
