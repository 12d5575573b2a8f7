/**
 * Triton's system shared memory manager, shared by the HTTP and gRPC front doors.
 *
 * A client creates a POSIX shared memory object with `shm_open(key)`; on Linux that is the file
 * `/dev/shm/<key without its leading '/'>`. Registering a region opens that file, checks that
 * `offset + byte_size` lies inside it, and keeps the file descriptor open until the region is
 * unregistered. Reads and writes go through `fs.readSync` / `fs.writeSync` at
 * `region.offset + offset`, so the client sees outputs in its own mapping without any copy back.
 *
 * Concurrency: every method is synchronous and runs to completion on the event loop, so no
 * locking is needed. Regions sharing a key share one descriptor (reference counted), as Triton
 * shares one mapping.
 *
 * In-flight requests hold the regions they use (`acquire` → `SharedMemoryLease.release`), as
 * Triton's requests hold a reference to each region's info from the lookup to the end of the
 * request. Unregistering a held region only marks it: it stays registered — listed by `status`,
 * usable by new requests, its name taken for `register` — until the last lease on it is released,
 * and is removed (its descriptor closed when no region of its key is left) at that moment.
 *
 * Opening, as glibc's `shm_open` does under /dev/shm: the key names one entry directly inside the
 * shm directory (leading slashes stripped; no other '/', not '.' or '..'), opened with
 * O_NOFOLLOW so a symlink planted there is refused, and the opened descriptor must be a regular
 * file (fstat on the descriptor, so nothing can be swapped in between the check and the use).
 *
 * Size: one tensor read from a region is at most `MAX_SHM_TENSOR_BYTES` (INT32_MAX, the largest
 * message Triton's gRPC door accepts); a larger read is refused before anything is allocated.
 * Reads and writes go in chunks of at most `IO_CHUNK_BYTES`, below what one `fs` call takes.
 *
 * Error messages and codes are Triton's (`server:src/shared_memory_manager.cc`).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { alreadyExists, internal, invalidArgument, notFound, unsupported } from '@switchyard/common';

export interface SystemShmRegionStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

/** Shown when a client uses shared memory on a server started without `--allow-client-shm=true`. */
export const CLIENT_SHM_DISABLED_MESSAGE =
  "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";

export const DEFAULT_SHM_DIR = '/dev/shm';

/** Keys Triton reserves for its Python backend's own regions; registering one is invalid_argument. */
export const RESERVED_SHM_KEY_PREFIX = 'triton_python_backend_shm_region_';

/** The largest tensor one shared-memory read may produce, in bytes (INT32_MAX). */
export const MAX_SHM_TENSOR_BYTES = 2 ** 31 - 1;

/** size_t's maximum: Triton sums offset and byte size as size_t. */
const UINT64_MAX = 2n ** 64n - 1n;

/** Largest single `fs.readSync` / `fs.writeSync` (Node refuses lengths above INT32_MAX). */
const IO_CHUNK_BYTES = 1 << 30;

/** open(2) flags: read-write, never through a symlink, never blocking on a FIFO planted as a key. */
const OPEN_FLAGS = fs.constants.O_RDWR | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;

interface OpenFile {
  fd: number;
  refs: number;
}

interface Region {
  name: string;
  key: string;
  offset: number;
  byteSize: number;
  file: OpenFile;
  /** Leases not yet released: in-flight requests using the region. */
  users: number;
  /** Unregistered while in use: removed when `users` drops to 0. */
  awaitingUnregister: boolean;
}

/**
 * The regions one request uses, held from lookup to the end of the request. `release` is
 * idempotent; a request releases its lease exactly when it finishes, fails or is cancelled.
 */
export interface SharedMemoryLease {
  release(): void;
}

export class SharedMemoryManager {
  readonly enabled: boolean;
  readonly #shmDir: string;
  /** Region name → region. A Map keeps registration order, which `status()` reports. */
  readonly #regions = new Map<string, Region>();
  /** Key → open descriptor, shared by every region of that key. */
  readonly #files = new Map<string, OpenFile>();

  constructor(options: { enabled: boolean; shmDir?: string }) {
    this.enabled = options.enabled;
    this.#shmDir = options.shmDir ?? DEFAULT_SHM_DIR;
  }

  /** Throws unsupported with Triton's message when client shared memory is disabled. */
  assertEnabled(): void {
    if (!this.enabled) throw unsupported(CLIENT_SHM_DISABLED_MESSAGE);
  }

  /**
   * Register `byteSize` bytes at `offset` of the object `key` under `name`.
   * Errors: already_exists for a taken name, internal when the object cannot be opened,
   * invalid_argument when the range exceeds the object.
   */
  register(name: string, key: string, offset: number, byteSize: number): void {
    if (key.replace(/^\/+/, '').startsWith(RESERVED_SHM_KEY_PREFIX)) {
      throw invalidArgument(
        `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${RESERVED_SHM_KEY_PREFIX}'`,
      );
    }
    if (this.#regions.has(name)) throw alreadyExists(`shared memory region '${name}' already in manager`);
    if (!Number.isSafeInteger(offset) || offset < 0 || !Number.isSafeInteger(byteSize) || byteSize < 0) {
      throw invalidArgument(`failed to register shared memory region '${name}': invalid args`);
    }
    let file = this.#files.get(key);
    const opened = file === undefined;
    if (file === undefined) file = { fd: this.#open(key), refs: 0 };
    let size: number;
    try {
      size = fs.fstatSync(file.fd).size;
    } catch (e) {
      if (opened) closeQuietly(file.fd);
      throw internal(`Invalid shared memory region: '${key}'`, e);
    }
    if (offset + byteSize > size) {
      if (opened) closeQuietly(file.fd);
      throw invalidArgument(`failed to register shared memory region '${name}': invalid args`);
    }
    file.refs += 1;
    this.#files.set(key, file);
    this.#regions.set(name, { name, key, offset, byteSize, file, users: 0, awaitingUnregister: false });
  }

  /**
   * Hold the regions `names` for one request: each stays registered until the lease is released,
   * whatever unregister calls come meanwhile. Each name must be registered (not_found otherwise,
   * Triton's message, and nothing is held).
   */
  acquire(names: Iterable<string>): SharedMemoryLease {
    const held: Region[] = [];
    for (const name of new Set(names)) {
      const region = this.#regions.get(name);
      if (region === undefined) throw notFound(`Unable to find shared memory region: '${name}'`);
      held.push(region);
    }
    for (const region of held) region.users += 1;
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        for (const region of held) {
          // A region dropped by close() is no longer this manager's, whatever now bears its name.
          if (this.#regions.get(region.name) !== region) continue;
          region.users -= 1;
          if (region.users === 0 && region.awaitingUnregister) this.#remove(region.name);
        }
      },
    };
  }

  /**
   * Unregister one region, or every region when `name` is omitted or empty. Unknown names succeed
   * silently. A region held by in-flight requests is only marked, and goes when the last of them
   * finishes (Triton's "will be unregistered after in-flight requests complete").
   */
  unregister(name?: string): void {
    if (name === undefined || name === '') {
      for (const n of [...this.#regions.keys()]) this.#remove(n);
      return;
    }
    this.#remove(name);
  }

  /** Whether a region named `name` is registered (marked ones included). */
  isRegistered(name: string): boolean {
    return this.#regions.has(name);
  }

  /** Status of every region, or of one; an unknown name is not_found. */
  status(name?: string): SystemShmRegionStatus[] {
    if (name === undefined || name === '') return [...this.#regions.values()].map(toStatus);
    const region = this.#regions.get(name);
    if (region === undefined) throw notFound(`Unable to find system shared memory region: '${name}'`);
    return [toStatus(region)];
  }

  /**
   * Copy `byteSize` bytes at `offset` inside region `name` (infer-time input). A read above
   * `MAX_SHM_TENSOR_BYTES` is invalid_argument, refused before any allocation.
   */
  read(name: string, offset: number, byteSize: number): Uint8Array {
    const region = this.#lookup(name, offset, byteSize);
    if (byteSize > MAX_SHM_TENSOR_BYTES) {
      throw invalidArgument(
        `shared memory region '${name}': a tensor of ${byteSize} bytes exceeds the largest this server reads from shared memory (${MAX_SHM_TENSOR_BYTES} bytes)`,
      );
    }
    const out = new Uint8Array(byteSize);
    let done = 0;
    while (done < byteSize) {
      const n = fs.readSync(region.file.fd, out, done, Math.min(byteSize - done, IO_CHUNK_BYTES), region.offset + offset + done);
      if (n === 0) throw internal(`Invalid offset + byte size for shared memory region: '${name}'`);
      done += n;
    }
    return out;
  }

  /** Write `data` at `offset` inside region `name` (infer-time output). */
  write(name: string, offset: number, data: Uint8Array): void {
    const region = this.#lookup(name, offset, data.byteLength);
    let done = 0;
    while (done < data.byteLength) {
      done += fs.writeSync(region.file.fd, data, done, Math.min(data.byteLength - done, IO_CHUNK_BYTES), region.offset + offset + done);
    }
  }

  /**
   * Check that `byteSize` bytes at `offset` lie inside region `name`, with the same errors as
   * `read` / `write`; used to validate an output region before running the model.
   */
  checkRange(name: string, offset: number | bigint, byteSize: number | bigint): void {
    this.#lookup(name, offset, byteSize);
  }

  /**
   * The byte size of region `name` (for output size checks before running a model), or throws
   * not_found like `read`.
   */
  regionByteSize(name: string): number {
    const region = this.#regions.get(name);
    if (region === undefined) throw notFound(`Unable to find shared memory region: '${name}'`);
    return region.byteSize;
  }

  /** Release every descriptor, held regions included; the manager is empty afterwards. */
  close(): void {
    for (const region of this.#regions.values()) region.users = 0;
    this.unregister();
  }

  /**
   * Open the object `key` names, as shm_open would, or throw internal with Triton's message: a key
   * glibc refuses (empty, an inner '/', '.' or '..', a NUL byte), a missing entry, a symlink
   * (O_NOFOLLOW: ELOOP) and anything that is not a regular file once opened.
   */
  #open(key: string): number {
    const failure = (cause?: unknown) => internal(`Unable to open shared memory region: '${key}'`, cause);
    const base = key.replace(/^\/+/, '');
    if (base === '' || base.includes('/') || base.includes('\0') || base === '.' || base === '..') throw failure();
    let fd: number;
    try {
      fd = fs.openSync(path.join(this.#shmDir, base), OPEN_FLAGS);
    } catch (e) {
      throw failure(e);
    }
    let regular: boolean;
    try {
      regular = fs.fstatSync(fd).isFile();
    } catch (e) {
      closeQuietly(fd);
      throw failure(e);
    }
    if (!regular) {
      closeQuietly(fd);
      throw failure();
    }
    return fd;
  }

  #lookup(name: string, offset: number | bigint, byteSize: number | bigint): Region {
    const region = this.#regions.get(name);
    if (region === undefined) throw notFound(`Unable to find shared memory region: '${name}'`);
    // Triton rejects an offset at or past the region's end, even for a zero-byte access.
    if (typeof offset === 'bigint' || !Number.isSafeInteger(offset) || offset < 0 || offset >= region.byteSize) {
      throw invalidArgument(`Invalid offset for shared memory region: '${name}'`);
    }
    // Triton sums the two as size_t (uint64) and refuses a sum past its maximum before the bounds check.
    if (BigInt(byteSize) > UINT64_MAX - BigInt(offset)) {
      throw invalidArgument(`Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) exceeds maximum value (${UINT64_MAX}) for region '${name}'`);
    }
    if (typeof byteSize === 'bigint' || !Number.isSafeInteger(byteSize) || byteSize < 0 || offset + byteSize > region.byteSize) {
      throw invalidArgument(`Invalid offset + byte size for shared memory region: '${name}'`);
    }
    return region;
  }

  #remove(name: string): void {
    const region = this.#regions.get(name);
    if (region === undefined) return;
    if (region.users > 0) {
      region.awaitingUnregister = true;
      return;
    }
    this.#regions.delete(name);
    region.file.refs -= 1;
    if (region.file.refs === 0) {
      this.#files.delete(region.key);
      closeQuietly(region.file.fd);
    }
  }
}

function toStatus(r: Region): SystemShmRegionStatus {
  return { name: r.name, key: r.key, offset: r.offset, byte_size: r.byteSize };
}

function closeQuietly(fd: number): void {
  try {
    fs.closeSync(fd);
  } catch {
    // Closing is best-effort: the descriptor is ours and nothing else can act on a failure.
  }
}
