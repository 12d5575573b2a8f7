/**
 * Moving tensor bytes between requests/responses and client shared memory, for a front door.
 *
 * Inputs: the codec leaves shared-memory inputs with `shared_memory_region` / `_byte_size` /
 * `_offset` parameters and empty data; `readSharedMemoryInputs` fills the data from the region
 * and drops those parameters, so the engine sees ordinary tensors.
 * Outputs: `sharedMemoryOutputTargets` validates the requested regions before the request is
 * issued (Triton looks them up while building the request); `writeSharedMemoryOutputs` copies
 * each such output into its region after the response and returns the names written, whose
 * bytes are then left out of the wire response.
 *
 * `useSharedMemory` does the input and output steps under a lease on every region the request
 * names, which the door releases when the request is over (answered, failed or cancelled): a
 * region unregistered meanwhile stays registered until then, as in Triton.
 *
 * Both front doors use these functions.
 */
import { internal, invalidArgument } from '@switchyard/common';
import { checkInputByteSize, fixedByteSize, type InferRequest, type InferResponse, type InferTensor, type Parameters } from '@switchyard/kserve';
import type { SharedMemoryLease, SharedMemoryManager } from './shared-memory.js';

export interface SharedMemoryTarget {
  region: string;
  /** As the client sent it: a `bigint` past 2^53 (HTTP carries uint64), which no region reaches. */
  offset: number | bigint;
  byteSize: number | bigint;
}

const SHM_KEYS = ['shared_memory_region', 'shared_memory_byte_size', 'shared_memory_offset'];

const exact = (v: unknown): number | bigint => (typeof v === 'bigint' ? v : Number(v ?? 0));

function targetOf(parameters: Parameters): SharedMemoryTarget | undefined {
  const region = parameters['shared_memory_region'];
  if (typeof region !== 'string') return undefined;
  return { region, offset: exact(parameters['shared_memory_offset']), byteSize: exact(parameters['shared_memory_byte_size']) };
}

function withoutShmParameters(parameters: Parameters): Parameters {
  const out: Parameters = {};
  for (const [k, v] of Object.entries(parameters)) if (!SHM_KEYS.includes(k)) out[k] = v;
  return out;
}

/** A request's shared memory, resolved: inputs read, output regions checked, its regions held. */
export interface SharedMemoryUse {
  /** The request with every shared-memory input read from its region. */
  request: InferRequest;
  /** Outputs to write to client shared memory instead of the response. */
  targets: Map<string, SharedMemoryTarget>;
  /** Ends the hold on the request's regions; call once the request is over. Idempotent. */
  release(): void;
}

/** Some input or output of `request` names a shared memory region. */
export function usesSharedMemory(request: InferRequest): boolean {
  for (const t of request.inputs) if (targetOf(t.parameters) !== undefined) return true;
  for (const t of request.outputs) if (targetOf(t.parameters) !== undefined) return true;
  return false;
}

const NO_LEASE = { release: (): void => undefined };

/**
 * Hold every region `request` names (inputs and outputs), then read its inputs and check its
 * output regions. On any error the hold is released before the error is thrown, so a request
 * refused here holds nothing.
 */
export function useSharedMemory(shm: SharedMemoryManager, request: InferRequest): SharedMemoryUse {
  const regions: string[] = [];
  for (const t of [...request.inputs, ...request.outputs]) {
    const target = targetOf(t.parameters);
    if (target !== undefined) regions.push(target.region);
  }
  if (regions.length === 0) return { request, targets: new Map(), release: NO_LEASE.release };
  shm.assertEnabled();
  // Regions are checked in request order by the steps below, with their own messages; only those
  // registered now are held (an unknown one fails the request in those steps).
  const lease: SharedMemoryLease = shm.acquire(regions.filter((r) => shm.isRegistered(r)));
  try {
    const read = readSharedMemoryInputs(shm, request);
    return { request: read, targets: sharedMemoryOutputTargets(shm, read), release: lease.release };
  } catch (e) {
    lease.release();
    throw e;
  }
}

/**
 * The request with every shared-memory input read from its region. Throws unsupported when
 * client shared memory is disabled, and the manager's not_found / invalid_argument errors for
 * unknown regions and out-of-range offsets. Before anything is read, a fixed-size input's
 * `shared_memory_byte_size` must equal what its shape and datatype hold (Triton's `unexpected
 * total byte size` error), so a request never makes the server copy more than its tensors.
 */
export function readSharedMemoryInputs(shm: SharedMemoryManager, request: InferRequest): InferRequest {
  if (!request.inputs.some((t) => targetOf(t.parameters) !== undefined)) return request;
  shm.assertEnabled();
  const inputs = request.inputs.map((t): InferTensor => {
    const target = targetOf(t.parameters);
    if (target === undefined) return t;
    // The size the client states is bounded like any tensor's before a buffer of that size is made.
    checkInputByteSize(t.name, Number(target.byteSize), `shared_memory_byte_size ${target.byteSize}`, { requestId: request.id, model: request.modelName });
    shm.checkRange(target.region, target.offset, target.byteSize);
    // Both are now within a registered region, so exact as numbers.
    const offset = Number(target.offset);
    const byteSize = Number(target.byteSize);
    const expected = t.shape.every((d) => Number.isSafeInteger(d) && d >= 0) ? fixedByteSize(t.datatype, t.shape) : undefined;
    if (expected !== undefined && byteSize !== expected) {
      throw invalidArgument(`unexpected total byte size ${byteSize} for input '${t.name}', expecting ${expected}`);
    }
    return { ...t, data: shm.read(target.region, offset, byteSize), parameters: withoutShmParameters(t.parameters) };
  });
  return { ...request, inputs };
}

/** Requested outputs that go to shared memory, checked against the registered regions. */
export function sharedMemoryOutputTargets(shm: SharedMemoryManager, request: InferRequest): Map<string, SharedMemoryTarget> {
  const targets = new Map<string, SharedMemoryTarget>();
  for (const o of request.outputs) {
    const target = targetOf(o.parameters);
    if (target === undefined) continue;
    if (targets.size === 0) shm.assertEnabled();
    shm.checkRange(target.region, target.offset, target.byteSize);
    targets.set(o.name, target);
  }
  return targets;
}

/**
 * Copy every output that has a target into its region. An output larger than the space the
 * client reserved fails the response with Triton's (INTERNAL) message.
 */
export function writeSharedMemoryOutputs(
  shm: SharedMemoryManager,
  targets: ReadonlyMap<string, SharedMemoryTarget>,
  response: InferResponse,
): Set<string> {
  const written = new Set<string>();
  if (targets.size === 0) return written;
  for (const out of response.outputs) {
    const target = targets.get(out.name);
    if (target === undefined) continue;
    if (out.data.byteLength > target.byteSize) {
      throw internal(
        `shared memory size specified with the request for output '${out.name}' (${target.byteSize} bytes) should be at least ${out.data.byteLength} bytes to hold the results`,
      );
    }
    shm.write(target.region, Number(target.offset), out.data);
    written.add(out.name);
  }
  return written;
}
