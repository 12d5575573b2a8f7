/**
 * What a front thread is started with: its door (HTTP or gRPC) and that door's settings. Plain data
 * (the thread's `workerData`); the host fills in the port the first thread bound for the others.
 */
import type { GrpcFrontConfig } from './front-grpc.js';
import type { HttpFrontConfig } from './front-http.js';

/** A front thread's door and its settings (the port: 0 for the first thread, then the port it bound). */
export type FrontDoorConfig = { readonly kind: 'http'; readonly http: HttpFrontConfig } | { readonly kind: 'grpc'; readonly grpc: GrpcFrontConfig };

/** What a front thread is started with (its `workerData`). */
export interface FrontThreadConfig {
  readonly door: FrontDoorConfig;
  /** The thread's number, for its log lines. */
  readonly index?: number;
}

/** `door` bound to `port`. */
export function onPort(door: FrontDoorConfig, port: number): FrontDoorConfig {
  return door.kind === 'http' ? { ...door, http: { ...door.http, port } } : { ...door, grpc: { ...door.grpc, port } };
}

/** The port `door` binds. */
export function portOf(door: FrontDoorConfig): number {
  return door.kind === 'http' ? door.http.port : door.grpc.port;
}


/** Each of `threads` threads' share of a door's connection cap (0: no cap); at least 1. */
export function connectionShare(cap: number, threads: number): number {
  return cap === 0 ? 0 : Math.max(1, Math.floor(cap / threads));
}
