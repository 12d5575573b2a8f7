/**
 * `@switchyard/runtime/kubernetes`: the planner's Kubernetes connector, an entry of its own so that
 * importing the runtime does not load @kubernetes/client-node (~0.4 s of CPU at start-up for every
 * router, cluster worker and planner); a planner imports it only with `--connector=kubernetes`.
 */
export { DEFAULT_KUBE_CONFLICT_RETRIES, DEFAULT_KUBE_REQUEST_TIMEOUT_MS, KubernetesConnector, type KubernetesConnectorOptions } from './connectors/kubernetes-connector.js';
