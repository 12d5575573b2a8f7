/**
 * The one place gRPC renders Switchyard errors: `SwitchyardError.code` → gRPC status code
 * (Triton's GrpcStatusUtil::CodeToStatus plus our extra codes), message = the plain message.
 */
import { status, type ServerErrorResponse } from '@grpc/grpc-js';
import { toSwitchyardError, type ErrorCode, type Logger } from '@switchyard/common';

const STATUS_BY_CODE: Record<ErrorCode, status> = {
  invalid_argument: status.INVALID_ARGUMENT,
  not_found: status.NOT_FOUND,
  unavailable: status.UNAVAILABLE,
  // Queue full and queue timeouts are UNAVAILABLE in Triton; clients check for that code.
  capacity_exhausted: status.UNAVAILABLE,
  deadline_exceeded: status.UNAVAILABLE,
  unsupported: status.UNIMPLEMENTED,
  // A restricted protocol without its metadata: Triton answers UNAVAILABLE, and its clients and
  // tests expect that code (grpc_server.cc, infer_handler.cc).
  permission_denied: status.UNAVAILABLE,
  unauthenticated: status.UNAUTHENTICATED,
  already_exists: status.ALREADY_EXISTS,
  cancelled: status.CANCELLED,
  internal: status.INTERNAL,
  unknown: status.UNKNOWN,
};

export function grpcStatusFor(code: ErrorCode): status {
  return STATUS_BY_CODE[code];
}

/** A status grpc-js itself would send for a transport-level failure, passed through `toGrpcError` as is. */
export class GrpcStatusError extends Error {
  constructor(
    readonly code: status,
    readonly details: string,
  ) {
    super(details);
    this.name = 'GrpcStatusError';
  }
}

/**
 * Anything thrown → the error object grpc-js sends as the call's status. Unclassified errors
 * (bugs, library failures) become INTERNAL and are logged; classified ones are the client's
 * business and are not.
 */
export function toGrpcError(e: unknown, logger?: Logger): ServerErrorResponse & { code: status; details: string } {
  if (e instanceof GrpcStatusError) return e;
  const err = toSwitchyardError(e);
  if (err.code === 'internal' && logger !== undefined) logger.error({ err: e }, 'gRPC request failed with an internal error');
  return Object.assign(new Error(err.message), { code: grpcStatusFor(err.code), details: err.message });
}
