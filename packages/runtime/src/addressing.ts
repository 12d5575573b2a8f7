/**
 * Addressing: namespace → component → endpoint → instance, and the ONE place that builds every etcd
 * key and NATS subject of the cluster (Dynamo's lesson: when keys are built in many places they drift).
 *
 * Names (namespace, component, endpoint) match `NAME_PATTERN`: 1–63 characters of `a-z 0-9 _ -`,
 * starting with a letter or digit. That keeps them safe as one etcd path segment (no `/`), one NATS
 * subject token (no `.`, no `*` / `>` wildcards, no spaces) and in JetStream stream names.
 *
 * An instance is one process's registration of an endpoint; its id is the process's etcd lease id in
 * 16 lowercase hex digits, so every key the process registers vanishes with the lease.
 *
 * Model names are free text (`Qwen/Qwen2.5-0.5B-Instruct`), so they are percent-encoded into one key
 * segment and never appear in subjects.
 *
 * Layout (every prefix ends in a separator, so namespace `a` never prefixes namespace `a-b`):
 *
 *   etcd   switchyard/<ns>/instances/<component>/<endpoint>/<instance>   InstanceInfo JSON
 *          switchyard/<ns>/models/<model-encoded>/<instance>             ModelCard JSON
 *   NATS   switchyard.<ns>.req.<component>.<endpoint>                   queue group (any instance)
 *          switchyard.<ns>.req.<component>.<endpoint>.<instance>        one instance
 *          switchyard.<ns>.cancel.<component>.<endpoint>                cancel broadcast to the endpoint
 *          switchyard.<ns>.kv_events.<component>                        KV events (JetStream)
 *          switchyard.<ns>.load.<component>                             load metrics (JetStream)
 *
 * The kind token (`req`, `cancel`, `kv_events`, `load`) sits right after the namespace so a component
 * named `load` can never collide with the load subject.
 */
import { invalidArgument } from '@switchyard/common';

declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

export type Namespace = Brand<string, 'Namespace'>;
export type ComponentName = Brand<string, 'ComponentName'>;
export type EndpointName = Brand<string, 'EndpointName'>;
/** 16 lowercase hex digits: the owning process's lease id. */
export type InstanceId = Brand<string, 'InstanceId'>;
/** A served model's name as clients send it (`model` in OpenAI, the model name in KServe). */
export type ModelName = Brand<string, 'ModelName'>;

export const KEY_ROOT = 'switchyard';
export const SUBJECT_ROOT = 'switchyard';
export const NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
export const INSTANCE_ID_PATTERN = /^[0-9a-f]{16}$/;
export const MAX_MODEL_NAME_LENGTH = 256;

/** A component endpoint: any instance may serve it (queue group). */
export interface EndpointAddress {
  readonly namespace: Namespace;
  readonly component: ComponentName;
  readonly endpoint: EndpointName;
}

/** One instance of an endpoint. */
export interface InstanceAddress extends EndpointAddress {
  readonly instanceId: InstanceId;
}

function checkName(kind: string, value: string): void {
  if (typeof value !== 'string' || !NAME_PATTERN.test(value)) {
    throw invalidArgument(
      `invalid ${kind} name '${String(value)}': expected 1-63 characters of a-z, 0-9, '_' or '-', starting with a letter or digit`,
    );
  }
}

export function namespace(value: string): Namespace {
  checkName('namespace', value);
  return value as Namespace;
}
export function componentName(value: string): ComponentName {
  checkName('component', value);
  return value as ComponentName;
}
export function endpointName(value: string): EndpointName {
  checkName('endpoint', value);
  return value as EndpointName;
}
export function instanceId(value: string): InstanceId {
  if (typeof value !== 'string' || !INSTANCE_ID_PATTERN.test(value)) {
    throw invalidArgument(`invalid instance id '${String(value)}': expected 16 lowercase hex digits`);
  }
  return value as InstanceId;
}
/** An etcd lease id (int64, positive) as an instance id. */
export function instanceIdFromLease(leaseId: bigint | number): InstanceId {
  const id = BigInt(leaseId);
  if (id <= 0n || id > 0x7fff_ffff_ffff_ffffn) throw invalidArgument(`invalid lease id ${id}`);
  return id.toString(16).padStart(16, '0') as InstanceId;
}
export function modelName(value: string): ModelName {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_MODEL_NAME_LENGTH || /[\x00-\x1f\x7f]/.test(value)) {
    throw invalidArgument(`invalid model name '${String(value)}': expected 1-${MAX_MODEL_NAME_LENGTH} printable characters`);
  }
  return value as ModelName;
}

/** Validate and brand all parts of an endpoint address (for addresses from flags or config). */
export function endpointAddress(ns: string, component: string, endpoint: string): EndpointAddress {
  return { namespace: namespace(ns), component: componentName(component), endpoint: endpointName(endpoint) };
}
export function instanceAddress(endpoint: EndpointAddress, id: string): InstanceAddress {
  return { ...endpointAddress(endpoint.namespace, endpoint.component, endpoint.endpoint), instanceId: instanceId(id) };
}
export function isInstanceAddress(a: EndpointAddress | InstanceAddress): a is InstanceAddress {
  return typeof (a as Partial<InstanceAddress>).instanceId === 'string';
}
/** `ns.component.endpoint[:instance]`, for logs and error messages only (never parsed). */
export function formatAddress(a: EndpointAddress | InstanceAddress): string {
  const base = `${a.namespace}.${a.component}.${a.endpoint}`;
  return isInstanceAddress(a) ? `${base}:${a.instanceId}` : base;
}

// ---- etcd keys ---------------------------------------------------------------------------------

/** Everything of one namespace. */
export function namespacePrefix(ns: Namespace): string {
  return `${KEY_ROOT}/${ns}/`;
}
/** All instances of a namespace; with `component` (and `endpoint`), only those. */
export function instancesPrefix(ns: Namespace, component?: ComponentName, endpoint?: EndpointName): string {
  let p = `${KEY_ROOT}/${ns}/instances/`;
  if (component !== undefined) {
    p += `${component}/`;
    if (endpoint !== undefined) p += `${endpoint}/`;
  }
  return p;
}
export function instanceKey(a: InstanceAddress): string {
  return `${instancesPrefix(a.namespace, a.component, a.endpoint)}${a.instanceId}`;
}
/**
 * The key a leader election holds: one per namespace and election `name` (e.g. `planner`). Its value
 * names the leading candidate; it lives under the leader's lease.
 */
export function electionKey(ns: Namespace, name: string): string {
  checkName('election', name);
  return `${KEY_ROOT}/${ns}/elections/${name}`;
}
/** All model cards of a namespace; with `model`, every instance's card of that model. */
export function modelsPrefix(ns: Namespace, model?: ModelName): string {
  const p = `${KEY_ROOT}/${ns}/models/`;
  return model === undefined ? p : `${p}${encodeURIComponent(model)}/`;
}
export function modelKey(ns: Namespace, model: ModelName, id: InstanceId): string {
  return `${modelsPrefix(ns, model)}${id}`;
}

/** What an etcd key of ours addresses; `null` for a key outside the layout (ignore it, don't throw). */
export type ParsedKey =
  | { readonly kind: 'instance'; readonly address: InstanceAddress }
  | { readonly kind: 'model'; readonly namespace: Namespace; readonly model: ModelName; readonly instanceId: InstanceId };

export function parseKey(key: string): ParsedKey | null {
  const parts = key.split('/');
  if (parts[0] !== KEY_ROOT) return null;
  try {
    if (parts.length === 6 && parts[2] === 'instances') {
      const [, ns, , component, endpoint, id] = parts as [string, string, string, string, string, string];
      return { kind: 'instance', address: instanceAddress(endpointAddress(ns, component, endpoint), id) };
    }
    if (parts.length === 5 && parts[2] === 'models') {
      const [, ns, , model, id] = parts as [string, string, string, string, string];
      return { kind: 'model', namespace: namespace(ns), model: modelName(decodeURIComponent(model)), instanceId: instanceId(id) };
    }
  } catch {
    return null;
  }
  return null;
}

// ---- NATS subjects -----------------------------------------------------------------------------

/** The queue-group subject of an endpoint: a request here goes to one of its instances. */
export function endpointSubject(a: EndpointAddress): string {
  return `${SUBJECT_ROOT}.${a.namespace}.req.${a.component}.${a.endpoint}`;
}
/** The subject of one instance: a request here goes to that instance only. */
export function instanceSubject(a: InstanceAddress): string {
  return `${endpointSubject(a)}.${a.instanceId}`;
}
/** Where callers broadcast cancel messages for requests to an endpoint (every instance listens). */
export function cancelSubject(a: EndpointAddress): string {
  return `${SUBJECT_ROOT}.${a.namespace}.cancel.${a.component}.${a.endpoint}`;
}
/** KV cache events of a component's workers (JetStream). */
export function kvEventsSubject(ns: Namespace, component: ComponentName): string {
  return `${SUBJECT_ROOT}.${ns}.kv_events.${component}`;
}
/** Load metrics of a component's workers (JetStream). */
export function loadSubject(ns: Namespace, component: ComponentName): string {
  return `${SUBJECT_ROOT}.${ns}.load.${component}`;
}
/** Per-step forward-pass figures of a component's workers, batched (JetStream; read by planners). */
export function forwardPassSubject(ns: Namespace, component: ComponentName): string {
  return `${SUBJECT_ROOT}.${ns}.forward_pass.${component}`;
}
/** Per-model request figures a component's routers publish every second (JetStream; read by planners). */
export function requestFiguresSubject(ns: Namespace, component: ComponentName): string {
  return `${SUBJECT_ROOT}.${ns}.request_figures.${component}`;
}
/** Decisions a component's planners publish each adjustment interval (JetStream; read by routers' dashboards). */
export function plannerDecisionsSubject(ns: Namespace, component: ComponentName): string {
  return `${SUBJECT_ROOT}.${ns}.planner_decisions.${component}`;
}
/** JetStream stream names (no `.`): one stream per namespace and kind, capturing every component. */
export function kvEventsStream(ns: Namespace): { readonly name: string; readonly subjects: string } {
  return { name: `${SUBJECT_ROOT}_${ns}_kv_events`, subjects: `${SUBJECT_ROOT}.${ns}.kv_events.*` };
}
export function loadStream(ns: Namespace): { readonly name: string; readonly subjects: string } {
  return { name: `${SUBJECT_ROOT}_${ns}_load`, subjects: `${SUBJECT_ROOT}.${ns}.load.*` };
}
export function forwardPassStream(ns: Namespace): { readonly name: string; readonly subjects: string } {
  return { name: `${SUBJECT_ROOT}_${ns}_forward_pass`, subjects: `${SUBJECT_ROOT}.${ns}.forward_pass.*` };
}
export function requestFiguresStream(ns: Namespace): { readonly name: string; readonly subjects: string } {
  return { name: `${SUBJECT_ROOT}_${ns}_request_figures`, subjects: `${SUBJECT_ROOT}.${ns}.request_figures.*` };
}

export function plannerDecisionsStream(ns: Namespace): { readonly name: string; readonly subjects: string } {
  return { name: `${SUBJECT_ROOT}_${ns}_planner_decisions`, subjects: `${SUBJECT_ROOT}.${ns}.planner_decisions.*` };
}

/** What a request-plane subject addresses; `null` for any other subject. */
export function parseRequestSubject(subject: string): EndpointAddress | InstanceAddress | null {
  const parts = subject.split('.');
  if (parts[0] !== SUBJECT_ROOT || parts[2] !== 'req' || (parts.length !== 5 && parts.length !== 6)) return null;
  try {
    const ep = endpointAddress(parts[1]!, parts[3]!, parts[4]!);
    return parts.length === 6 ? instanceAddress(ep, parts[5]!) : ep;
  } catch {
    return null;
  }
}

/**
 * NATS subject matching: tokens split on `.`; `*` matches one token, `>` (last) one or more.
 * Used by the memory twins; the real implementations leave it to the server.
 */
export function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    const t = f[i]!;
    if (t === '>') return i === f.length - 1 && s.length > i;
    if (i >= s.length) return false;
    if (t !== '*' && t !== s[i]) return false;
  }
  return f.length === s.length;
}
