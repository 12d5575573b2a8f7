/**
 * The access-control flags both apps share (the worker and the router serve through the same
 * doors): Triton's `--http-restricted-api` and `--grpc-restricted-protocol`, and
 * `--openai-api-key`. Each app spreads `ACCESS_FLAGS` into its flag table and
 * `accessFlagDefaults()` into the options it parses into, checks them with `accessPolicy(options)`
 * among its cross-flag rules, and hands that policy to the doors.
 *
 * The rules themselves (groups, Triton's messages, constant-time checks) are the doors' own
 * (`accessPolicy` in @switchyard/server); this module only names the flags and makes a malformed
 * one a `UsageError`.
 */
import { API_GROUPS, type AccessPolicy, accessPolicy as compileAccessPolicy } from '@switchyard/server';
import { type FlagTable, UsageError } from './flags.js';

export interface AccessFlagOptions {
  /** `--http-restricted-api` values as given (Triton's `<api>[,<api>...]:<header>=<value>`), repeatable; see `accessPolicy()`. */
  httpRestrictedApi: string[];
  /** `--grpc-restricted-protocol` values as given (metadata key `triton-grpc-protocol-<key>`), repeatable. */
  grpcRestrictedProtocol: string[];
  /** `--openai-api-key`: the bearer token every OpenAI `/v1` request must send; undefined = open. */
  openaiApiKey?: string;
}

/** Everything open: no restricted group, no API key. A new object per call (the repeatable flags append to its arrays). */
export function accessFlagDefaults(): AccessFlagOptions {
  return { httpRestrictedApi: [], grpcRestrictedProtocol: [] };
}

export const ACCESS_FLAGS: FlagTable<AccessFlagOptions> = {
  'http-restricted-api': {
    kind: 'strings',
    key: 'httpRestrictedApi',
    help: `Require a header for API groups over HTTP: '<api>[,<api>...]:<header>=<value>' (repeatable; default none). APIs: ${API_GROUPS.join(', ')}.`,
  },
  'grpc-restricted-protocol': {
    kind: 'strings',
    key: 'grpcRestrictedProtocol',
    help: "Require metadata 'triton-grpc-protocol-<key>: <value>' for API groups over gRPC: '<api>[,<api>...]:<key>=<value>' (repeatable; default none).",
  },
  'openai-api-key': { kind: 'string', key: 'openaiApiKey', help: "Require 'Authorization: Bearer <key>' on every OpenAI /v1 request (default none)." },
};

/** What the access flags ask the front doors to enforce; a malformed flag is a UsageError (Triton's wording). */
export function accessPolicy(o: Readonly<AccessFlagOptions>): AccessPolicy {
  try {
    return compileAccessPolicy(o);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}
