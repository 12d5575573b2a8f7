/**
 * A small fake of the Kubernetes API server: the Deployment scale subresource and nothing else, on a
 * real HTTPS server on a private port (a self-signed certificate for 127.0.0.1 made with the
 * `openssl` CLI at start, since the client refuses plain HTTP), with a kubeconfig file pointing at it
 * that carries the certificate as its CA. No real API server (nor
 * kind, nor a kubelet) can run on the machines the tests run on; this speaks the subset the planner's
 * Kubernetes connector uses, as the API server does:
 *
 *   GET   /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale   → 200 autoscaling/v1 Scale
 *   PATCH /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale   (application/merge-patch+json)
 *         a `metadata.resourceVersion` in the patch that is not the current one → 409 Conflict;
 *         `spec.replicas` not a non-negative int32 → 422; other content types → 415
 *
 * Every request must carry `Authorization: Bearer <token>` (else 401). Errors are `Status` objects
 * (`kind: Status`, `reason`, `code`, `message`), as the API server sends them. `spec.replicas` is
 * omitted when it is 0 (the API type's `omitempty`). The Deployment controller is instant:
 * `status.replicas` follows `spec.replicas`.
 *
 * Test hooks: `deny(verb)` answers 403 as RBAC would; `concurrentWriter(name, times)` has another
 * writer change the Deployment right after each of our next `times` reads (so the patch that
 * follows meets a real resourceVersion conflict); `fault({...})` replaces the next answers with a
 * given status and raw body (bad JSON, 500) or never answers (a timeout).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Largest request body the fake reads (the API server's own limit is 3 MiB). */
const MAX_BODY_BYTES = 1024 * 1024;
const SCALE_PATH = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/deployments\/([^/]+)\/scale$/;

export interface FakeKubeApiOptions {
  /** Deployment name → initial spec.replicas, all in `namespace`. */
  deployments: Record<string, number>;
  /** The namespace the Deployments live in, also the kubeconfig context's (default `switchyard`). */
  namespace?: string;
  /** The bearer token the kubeconfig carries and the fake requires (default a fixed test token). */
  token?: string;
}

export interface FakeKubeRequest {
  method: string;
  path: string;
  contentType: string | undefined;
  body: string;
}

export interface FakeKubeFault {
  /** Only requests with this method (default any). */
  method?: 'GET' | 'PATCH';
  /** How many answers to replace (default 1). */
  times?: number;
  /** Status of the answer (default 500). Ignored with `hang`. */
  status?: number;
  /** Raw body (default a `Status` object). */
  body?: string;
  /** Never answer (until the client gives up or the fake closes). */
  hang?: boolean;
}

export interface FakeKubeApi {
  /** `https://127.0.0.1:<port>` */
  readonly url: string;
  /** A kubeconfig file whose current context points at the fake with its token and namespace. */
  readonly kubeconfigPath: string;
  readonly namespace: string;
  readonly token: string;
  /** Every request received, in order. */
  readonly requests: readonly FakeKubeRequest[];
  /** spec.replicas of a Deployment (undefined: no such Deployment). */
  replicas(name: string): number | undefined;
  /** Another writer sets spec.replicas (bumps the resourceVersion). */
  setReplicas(name: string, replicas: number): void;
  /** RBAC refuses `verb` (get or patch) on deployments/scale from now on. */
  deny(verb: 'get' | 'patch'): void;
  /** After each of the next `times` GETs of `name`, another writer changes it (the next PATCH meets a 409). */
  concurrentWriter(name: string, times: number): void;
  fault(fault: FakeKubeFault): void;
  close(): Promise<void>;
}

interface Deployment {
  replicas: number;
  resourceVersion: number;
  uid: string;
}

export async function startFakeKubeApi(options: FakeKubeApiOptions): Promise<FakeKubeApi> {
  const namespace = options.namespace ?? 'switchyard';
  const token = options.token ?? 'fake-kube-api-token-0123456789';
  let version = 1000;
  const deployments = new Map<string, Deployment>();
  for (const [name, replicas] of Object.entries(options.deployments)) {
    deployments.set(name, { replicas, resourceVersion: ++version, uid: `00000000-0000-4000-8000-${String(deployments.size).padStart(12, '0')}` });
  }
  const requests: FakeKubeRequest[] = [];
  const denied = new Set<string>();
  const writers = new Map<string, number>();
  const faults: (FakeKubeFault & { left: number })[] = [];
  const hanging = new Set<ServerResponse>();

  const status = (res: ServerResponse, code: number, reason: string, message: string): void => {
    send(res, code, JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }));
  };
  const scaleOf = (name: string, d: Deployment): string =>
    JSON.stringify({
      kind: 'Scale',
      apiVersion: 'autoscaling/v1',
      metadata: { name, namespace, uid: d.uid, resourceVersion: String(d.resourceVersion), creationTimestamp: '2026-01-01T00:00:00Z' },
      spec: d.replicas === 0 ? {} : { replicas: d.replicas },
      status: { replicas: d.replicas, selector: `app.kubernetes.io/name=${name}` },
    });

  const handle = (req: IncomingMessage, res: ServerResponse, body: string): void => {
    const path = (req.url ?? '/').split('?')[0]!;
    requests.push({ method: req.method ?? '', path, contentType: req.headers['content-type'], body });
    if (req.headers.authorization !== `Bearer ${token}`) return status(res, 401, 'Unauthorized', 'Unauthorized');
    const fault = faults.find((f) => f.method === undefined || f.method === req.method);
    if (fault !== undefined) {
      if (--fault.left === 0) faults.splice(faults.indexOf(fault), 1);
      if (fault.hang === true) {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      if (fault.body !== undefined) return send(res, fault.status ?? 500, fault.body);
      return status(res, fault.status ?? 500, 'InternalError', 'injected fault');
    }
    const m = SCALE_PATH.exec(path);
    if (m === null) return status(res, 404, 'NotFound', 'the server could not find the requested resource');
    const [ns, name] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!)];
    const verb = req.method === 'GET' ? 'get' : req.method === 'PATCH' ? 'patch' : undefined;
    if (verb === undefined) return status(res, 405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`);
    if (denied.has(verb)) {
      return status(
        res,
        403,
        'Forbidden',
        `deployments.apps "${name}" is forbidden: User "system:serviceaccount:${namespace}:switchyard-planner" cannot ${verb} resource "deployments/scale" in API group "apps" in the namespace "${ns}"`,
      );
    }
    const d = ns === namespace ? deployments.get(name) : undefined;
    if (d === undefined) return status(res, 404, 'NotFound', `deployments.apps "${name}" not found`);
    if (verb === 'get') {
      const answer = scaleOf(name, d);
      const left = writers.get(name) ?? 0;
      if (left > 0) {
        writers.set(name, left - 1);
        d.resourceVersion = ++version; // another writer touched it after our read
      }
      return send(res, 200, answer);
    }
    if (req.headers['content-type'] !== 'application/merge-patch+json') {
      return status(res, 415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json`);
    }
    let patch: { metadata?: { resourceVersion?: unknown }; spec?: { replicas?: unknown } };
    try {
      patch = JSON.parse(body) as typeof patch;
    } catch (err) {
      return status(res, 400, 'BadRequest', `error decoding patch: ${(err as Error).message}`);
    }
    const rv = patch?.metadata?.resourceVersion;
    if (rv !== undefined && rv !== String(d.resourceVersion)) {
      return status(res, 409, 'Conflict', `Operation cannot be fulfilled on deployments.apps "${name}": the object has been modified; please apply your changes to the latest version and try again`);
    }
    const replicas = patch?.spec?.replicas;
    if (replicas !== undefined) {
      if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0 || replicas > 2 ** 31 - 1) {
        return status(res, 422, 'Invalid', `Scale.autoscaling "${name}" is invalid: spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`);
      }
      d.replicas = replicas;
      d.resourceVersion = ++version;
    }
    send(res, 200, scaleOf(name, d));
  };

  const dir = mkdtempSync(join(tmpdir(), 'switchyard-fake-kube-'));
  const { key, cert } = selfSignedCertificate(dir);
  const server = createServer({ key, cert }, (req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        status(res, 413, 'RequestEntityTooLarge', 'request entity too large');
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (!res.headersSent) handle(req, res, Buffer.concat(chunks).toString('utf8'));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const kubeconfigPath = join(dir, 'kubeconfig');
  // JSON is YAML: the client reads it as a kubeconfig.
  writeFileSync(
    kubeconfigPath,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'fake', cluster: { server: url, 'certificate-authority-data': Buffer.from(cert).toString('base64') } }],
      users: [{ name: 'switchyard-planner', user: { token } }],
      contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'switchyard-planner', namespace } }],
      'current-context': 'fake',
    }),
  );

  return {
    url,
    kubeconfigPath,
    namespace,
    token,
    requests,
    replicas: (name) => deployments.get(name)?.replicas,
    setReplicas(name, replicas) {
      const d = deployments.get(name);
      if (d === undefined) throw new Error(`no Deployment ${name}`);
      d.replicas = replicas;
      d.resourceVersion = ++version;
    },
    deny: (verb) => void denied.add(verb),
    concurrentWriter: (name, times) => void writers.set(name, times),
    fault: (fault) => void faults.push({ ...fault, left: fault.times ?? 1 }),
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function send(res: ServerResponse, code: number, body: string): void {
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** A throwaway key and self-signed certificate for 127.0.0.1 (valid one day), PEM. */
function selfSignedCertificate(dir: string): { key: string; cert: string } {
  const keyPath = join(dir, 'tls.key');
  const certPath = join(dir, 'tls.crt');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyPath, '-out', certPath, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'],
    { stdio: 'pipe' },
  );
  return { key: readFileSync(keyPath, 'utf8'), cert: readFileSync(certPath, 'utf8') };
}
