/**
 * The one error taxonomy of Switchyard.
 *
 * Every failure a caller can act on is a `SwitchyardError` with a `code` from this closed set.
 * Code is classified once, where the failure is understood; only the front doors (HTTP, gRPC)
 * map codes to status codes and wire formats. Nothing matches on message strings.
 *
 * Messages follow Triton's wording where Triton has one, because clients and tests match
 * on substrings of them.
 */
export const ERROR_CODES = [
  'invalid_argument',
  'not_found',
  'unavailable',
  'unsupported',
  'already_exists',
  'cancelled',
  'deadline_exceeded',
  'capacity_exhausted',
  /** The request lacks the credential a restricted API group requires (`--http-restricted-api`, `--grpc-restricted-protocol`). */
  'permission_denied',
  /** The request's API key is missing or wrong (`--openai-api-key`). */
  'unauthenticated',
  'internal',
  'unknown',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class SwitchyardError extends Error {
  override readonly name = 'SwitchyardError';
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}

export const invalidArgument = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('invalid_argument', message, { cause });
export const notFound = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('not_found', message, { cause });
export const unavailable = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('unavailable', message, { cause });
export const unsupported = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('unsupported', message, { cause });
export const alreadyExists = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('already_exists', message, { cause });
export const cancelled = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('cancelled', message, { cause });
export const deadlineExceeded = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('deadline_exceeded', message, { cause });
export const capacityExhausted = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('capacity_exhausted', message, { cause });
export const permissionDenied = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('permission_denied', message, { cause });
export const unauthenticated = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('unauthenticated', message, { cause });
export const internal = (message: string, cause?: unknown): SwitchyardError =>
  new SwitchyardError('internal', message, { cause });

export function isSwitchyardError(e: unknown): e is SwitchyardError {
  return e instanceof SwitchyardError;
}

/**
 * Classify anything thrown into the taxonomy. A non-Switchyard error is a bug or an
 * unexpected library failure: it becomes `internal` with the original as `cause`.
 */
export function toSwitchyardError(e: unknown): SwitchyardError {
  if (e instanceof SwitchyardError) return e;
  if (e instanceof Error) return new SwitchyardError('internal', e.message, { cause: e });
  return new SwitchyardError('internal', String(e));
}

/** The message of anything thrown: an Error's `message`, anything else as a string. */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
