/**
 * The one mapping from Switchyard error codes to HTTP status codes (Triton's
 * `HttpCodeFromError`). Only the HTTP front door uses it; nothing else knows about statuses.
 */
import type { ErrorCode } from '@switchyard/common';

const STATUS: Record<ErrorCode, number> = {
  internal: 500,
  not_found: 404,
  unavailable: 503,
  capacity_exhausted: 503,
  deadline_exceeded: 503,
  unsupported: 501,
  // A restricted API without its header: Triton's RespondIfRestricted answers 403.
  permission_denied: 403,
  unauthenticated: 401,
  invalid_argument: 400,
  already_exists: 400,
  cancelled: 400,
  unknown: 400,
};

export function httpStatusFromErrorCode(code: ErrorCode): number {
  return STATUS[code];
}
