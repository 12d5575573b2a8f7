export {
  ERROR_CODES,
  SwitchyardError,
  alreadyExists,
  cancelled,
  capacityExhausted,
  deadlineExceeded,
  errorMessage,
  internal,
  invalidArgument,
  isSwitchyardError,
  notFound,
  permissionDenied,
  toSwitchyardError,
  unauthenticated,
  unavailable,
  unsupported,
} from './errors.js';
export type { ErrorCode } from './errors.js';
export { silentLogger } from './logger.js';
export type { LogFn, Logger } from './logger.js';
export { confinedSegments, resolveConfinedPath } from './confined-path.js';
export type { ConfinedPath } from './confined-path.js';
export { enforceLimits, limitMessage } from './limits.js';
export { pauseUnlessAborted } from './pause.js';
export { Cancellation } from './cancellation.js';
export { LoopLoad } from './loop-load.js';
export { threadExecArgv } from './thread-exec-argv.js';
export type { LoopLoadOptions, LoopTimes } from './loop-load.js';
export type { CancelSignal } from './cancellation.js';
export type { LimitCheck } from './limits.js';
export { DEFAULT_DESCRIBE_MAX_LENGTH, DESCRIBE_MAX_DEPTH, describeValue } from './describe-value.js';
