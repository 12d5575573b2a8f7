export { main } from './main.js';
export { startRouter } from './router.js';
export type { RunningRouter } from './router.js';
export { DEFAULTS, DEFAULT_NAMESPACE, ROUTER_MODES, UsageError, helpText, parseRouterArgs } from './options.js';
export type { RouterMode, RouterOptions } from './options.js';
export { renderRouterMetrics } from './router-metrics.js';
export type { ServedModel } from './router-metrics.js';
