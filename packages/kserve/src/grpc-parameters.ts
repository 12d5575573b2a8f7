/**
 * gRPC parameter values (`InferParameter` oneofs) and model version strings: conversion to and
 * from `ParameterValue`, and the request-level parameter rules of Triton's gRPC front end
 * (`server:src/grpc/infer_handler.cc` SetInferenceRequestMetadata), with its exact messages.
 */
import { invalidArgument } from '@switchyard/common';
import type { GrpcInferParameter, GrpcInt64, GrpcParameterChoice } from './grpc-messages.js';
import { setOwn } from './http-json.js';
import type { ParameterValue, Parameters } from './protocols.js';

const CHOICES: readonly GrpcParameterChoice[] = ['bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param'];

/** The only `triton_`-prefixed key a client may set (Triton's TRITON_RESERVED_REQUEST_PARAMS). */
export const ENABLE_EMPTY_FINAL_RESPONSE = 'triton_enable_empty_final_response';
/** Set on every streamed response: whether it is the last one for its request. */
export const FINAL_RESPONSE_PARAMETER = 'triton_final_response';

/** Which oneof member is set: `parameter_choice` when the loader filled it, else the first defined member. */
export function parameterChoice(p: GrpcInferParameter | null | undefined): GrpcParameterChoice | undefined {
  if (p === null || p === undefined) return undefined;
  if (p.parameter_choice !== undefined) return p.parameter_choice;
  return CHOICES.find((c) => p[c] !== undefined && p[c] !== null);
}

/**
 * A 64-bit wire integer as a `ParameterValue`: a number when it is a safe integer, a bigint
 * otherwise (uint64 sequence ids above 2^53 keep every bit).
 */
export function int64Value(v: GrpcInt64 | bigint): number | bigint {
  if (typeof v === 'number') return v;
  const big = typeof v === 'bigint' ? v : BigInt(v);
  return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
}

/** The value of a oneof, or undefined when no member is set. */
export function parameterValue(p: GrpcInferParameter | null | undefined): ParameterValue | undefined {
  switch (parameterChoice(p)) {
    case 'bool_param':
      return p?.bool_param === true;
    case 'int64_param':
      return int64Value(p?.int64_param ?? 0);
    case 'uint64_param':
      return int64Value(p?.uint64_param ?? 0);
    case 'string_param':
      return p?.string_param ?? '';
    case 'double_param':
      return p?.double_param ?? 0;
    default:
      return undefined;
  }
}

const INT64_MAX = (1n << 63n) - 1n;

/**
 * A `ParameterValue` as an `InferParameter`, the way Triton types response parameters:
 * booleans → bool_param, integers → int64_param (uint64_param above int64's range),
 * other numbers → double_param, strings → string_param.
 */
export function encodeParameter(v: ParameterValue): GrpcInferParameter {
  if (typeof v === 'boolean') return { bool_param: v };
  if (typeof v === 'string') return { string_param: v };
  if (typeof v === 'bigint') return v > INT64_MAX ? { uint64_param: v.toString() } : { int64_param: v.toString() };
  return Number.isInteger(v) ? { int64_param: v } : { double_param: v };
}

export function encodeParameters(params: Parameters): Record<string, GrpcInferParameter> {
  const out: Record<string, GrpcInferParameter> = {};
  for (const [k, v] of Object.entries(params)) out[k] = encodeParameter(v);
  return out;
}

export interface DecodedRequestParameters {
  parameters: Parameters;
  /** The request set `triton_enable_empty_final_response: true` (streaming, decoupled models). */
  enableEmptyFinalResponse: boolean;
}

/**
 * Validate and convert `ModelInferRequest.parameters`. Reserved keys must carry their expected
 * oneof member; custom keys may be bool, int64, string or double; `triton_*` keys other than
 * `triton_enable_empty_final_response` are refused. The empty-final-response flag is returned
 * apart and not forwarded to the engine (Triton keeps it in the front end too).
 */
export function decodeRequestParameters(params: Record<string, GrpcInferParameter> | undefined): DecodedRequestParameters {
  const out: Parameters = {};
  let enableEmptyFinalResponse = false;
  for (const [key, p] of Object.entries(params ?? {})) {
    const choice = parameterChoice(p);
    const value = parameterValue(p);
    switch (key) {
      case 'sequence_id':
        if (choice !== 'int64_param' && choice !== 'string_param') {
          throw invalidArgument("invalid value type for 'sequence_id' parameter, expected int64_param or string_param.");
        }
        break;
      case 'sequence_start':
      case 'sequence_end':
        if (choice !== 'bool_param') throw invalidArgument(`invalid value type for '${key}' parameter, expected bool_param.`);
        break;
      case 'priority':
        if (choice === 'int64_param') {
          if ((value as number | bigint) < 0) throw invalidArgument("invalid value for 'priority', expected value >= 0.");
        } else if (choice !== 'uint64_param') {
          throw invalidArgument("invalid value type for 'priority' parameter, expected int64_param or uint64_param.");
        }
        break;
      case 'timeout':
        if (choice !== 'int64_param') throw invalidArgument("invalid value type for 'timeout' parameter, expected int64_param.");
        break;
      default:
        if (key.startsWith('triton_')) {
          if (key !== ENABLE_EMPTY_FINAL_RESPONSE) {
            throw invalidArgument(
              "parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: " +
                ENABLE_EMPTY_FINAL_RESPONSE,
            );
          }
          if (choice !== 'bool_param') throw invalidArgument(`invalid value type for '${key}' parameter, expected bool_param.`);
          enableEmptyFinalResponse = value === true;
          continue;
        }
        if (choice !== 'int64_param' && choice !== 'bool_param' && choice !== 'string_param' && choice !== 'double_param') {
          throw invalidArgument(`invalid value type for '${key}' parameter, expected int64_param, bool_param, or string_param.`);
        }
    }
    setOwn(out, key, value as ParameterValue);
  }
  return { parameters: out, enableEmptyFinalResponse };
}

const INT64_MIN = -(1n << 63n);

/**
 * A gRPC `model_version` string as the engine's version: '' → undefined (latest READY),
 * otherwise parsed like C++ `std::stol` (leading whitespace, optional sign, leading digits;
 * trailing characters ignored), with Triton's messages for unparsable and negative values.
 */
export function parseModelVersion(version: string | undefined): number | undefined {
  if (version === undefined || version === '') return undefined;
  const m = /^[ \t\n\v\f\r]*([+-]?[0-9]+)/.exec(version);
  // More than 19 significant digits cannot be an int64: refused without BigInt, whose decimal parse
  // time grows faster than linearly (a megabyte version string would stall the door).
  const significant = m?.[1]?.replace(/^[+-]?0*/, '') ?? '';
  const parsed = m?.[1] === undefined || significant.length > 19 ? undefined : BigInt(m[1]);
  if (parsed === undefined || parsed > INT64_MAX || parsed < INT64_MIN) {
    throw invalidArgument(
      `failed to get model version from specified version string '${version}' (details: stol), version should be an integral value > 0`,
    );
  }
  if (parsed < 0n) {
    throw invalidArgument(`invalid model version specified '${version}' , version should be an integral value > 0`);
  }
  return Number(parsed);
}
