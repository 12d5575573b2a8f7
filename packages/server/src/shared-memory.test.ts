import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SwitchyardError } from '@switchyard/common';
import { CLIENT_SHM_DISABLED_MESSAGE, MAX_SHM_TENSOR_BYTES, SharedMemoryManager } from './shared-memory.js';

function codeOf(fn: () => unknown): [string, string] {
  try {
    fn();
  } catch (e) {
    if (e instanceof SwitchyardError) return [e.code, e.message];
    throw e;
  }
  throw new Error('expected a throw');
}

describe('SharedMemoryManager', () => {
  let dir: string;
  let shm: SharedMemoryManager;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'shm-test-'));
    fs.writeFileSync(path.join(dir, 'region_a'), Buffer.alloc(64));
    shm = new SharedMemoryManager({ enabled: true, shmDir: dir });
  });
  afterEach(() => {
    shm.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('is gated by enabled', () => {
    const off = new SharedMemoryManager({ enabled: false });
    expect(off.enabled).toBe(false);
    expect(codeOf(() => off.assertEnabled())).toEqual(['unsupported', CLIENT_SHM_DISABLED_MESSAGE]);
    expect(() => shm.assertEnabled()).not.toThrow();
  });

  it('registers, reports status in order, and unregisters', () => {
    shm.register('r1', '/region_a', 0, 32);
    shm.register('r2', '/region_a', 32, 32);
    expect(shm.status()).toEqual([
      { name: 'r1', key: '/region_a', offset: 0, byte_size: 32 },
      { name: 'r2', key: '/region_a', offset: 32, byte_size: 32 },
    ]);
    expect(shm.status('r2')).toEqual([{ name: 'r2', key: '/region_a', offset: 32, byte_size: 32 }]);
    shm.unregister('r1');
    shm.unregister('nope');
    expect(shm.status().map((s) => s.name)).toEqual(['r2']);
    shm.unregister();
    expect(shm.status()).toEqual([]);
  });

  it('uses Triton error messages', () => {
    shm.register('r1', 'region_a', 0, 64);
    expect(codeOf(() => shm.register('r1', 'region_a', 0, 8))).toEqual([
      'already_exists',
      "shared memory region 'r1' already in manager",
    ]);
    expect(codeOf(() => shm.register('r9', '/missing', 0, 8))).toEqual([
      'internal',
      "Unable to open shared memory region: '/missing'",
    ]);
    expect(codeOf(() => shm.register('r3', '/region_a', 60, 8))).toEqual([
      'invalid_argument',
      "failed to register shared memory region 'r3': invalid args",
    ]);
    expect(codeOf(() => shm.status('zz'))).toEqual(['not_found', "Unable to find system shared memory region: 'zz'"]);
    expect(codeOf(() => shm.read('zz', 0, 4))).toEqual(['not_found', "Unable to find shared memory region: 'zz'"]);
    expect(codeOf(() => shm.read('r1', 64, 0))).toEqual(['invalid_argument', "Invalid offset for shared memory region: 'r1'"]);
    expect(codeOf(() => shm.read('r1', 60, 8))).toEqual([
      'invalid_argument',
      "Invalid offset + byte size for shared memory region: 'r1'",
    ]);
  });

  it('reads and writes through to the file at region offset + offset', () => {
    shm.register('out', '/region_a', 16, 16);
    shm.write('out', 4, new Uint8Array([1, 2, 3, 4]));
    const file = fs.readFileSync(path.join(dir, 'region_a'));
    expect([...file.subarray(20, 24)]).toEqual([1, 2, 3, 4]);
    expect([...shm.read('out', 4, 4)]).toEqual([1, 2, 3, 4]);
    expect(shm.regionByteSize('out')).toBe(16);
  });

  it('opens only regular files directly in the shm directory, never through a symlink', () => {
    // A file outside the shm directory, as a root-only file would be, and links to it planted inside.
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'shm-outside-'));
    try {
      const secret = path.join(outside, 'secret');
      fs.writeFileSync(secret, 'top secret, do not read or overwrite');
      fs.symlinkSync(secret, path.join(dir, 'link'));
      fs.symlinkSync(path.join(dir, 'region_a'), path.join(dir, 'link_inside'));
      fs.mkdirSync(path.join(dir, 'subdir'));
      fs.writeFileSync(path.join(dir, 'subdir', 'r'), Buffer.alloc(8));
      execFileSync('mkfifo', [path.join(dir, 'fifo')]);
      const refused = (key: string) => ['internal', `Unable to open shared memory region: '${key}'`];
      for (const key of ['/link', 'link', '//link', '/link_inside', '/subdir', '/subdir/r', '/fifo', '/../region_a', '/..', '/.', '/', '', 'a\0b']) {
        expect(codeOf(() => shm.register('r', key, 0, 4)), key).toEqual(refused(key));
      }
      expect(shm.status()).toEqual([]);
      expect(fs.readFileSync(secret, 'utf8')).toBe('top secret, do not read or overwrite');
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });

  it("refuses Triton's reserved key prefix", () => {
    fs.writeFileSync(path.join(dir, 'triton_python_backend_shm_region_x'), Buffer.alloc(8));
    expect(codeOf(() => shm.register('r', '/triton_python_backend_shm_region_x', 0, 8))).toEqual([
      'invalid_argument',
      "cannot register shared memory region 'r' with key '/triton_python_backend_shm_region_x' as the key contains the reserved prefix 'triton_python_backend_shm_region_'",
    ]);
  });

  it('refuses a read above the largest tensor before allocating it, and overflowing ranges', () => {
    // A sparse 3 GiB region: registering it is fine, reading more than INT32_MAX bytes at once is not.
    const big = path.join(dir, 'big');
    const fd = fs.openSync(big, 'w');
    fs.ftruncateSync(fd, 3 * 2 ** 30);
    fs.closeSync(fd);
    shm.register('big', '/big', 0, 3 * 2 ** 30);
    expect(codeOf(() => shm.read('big', 0, MAX_SHM_TENSOR_BYTES + 1))).toEqual([
      'invalid_argument',
      `shared memory region 'big': a tensor of ${MAX_SHM_TENSOR_BYTES + 1} bytes exceeds the largest this server reads from shared memory (${MAX_SHM_TENSOR_BYTES} bytes)`,
    ]);
    expect(codeOf(() => shm.read('big', 2 ** 31, 2 ** 31))).toEqual(['invalid_argument', "Invalid offset + byte size for shared memory region: 'big'"]);
    expect(codeOf(() => shm.read('big', 1, Number.MAX_SAFE_INTEGER))).toEqual(['invalid_argument', "Invalid offset + byte size for shared memory region: 'big'"]);
    expect(codeOf(() => shm.register('huge', '/big', 2 ** 62, 2 ** 62))).toEqual(['invalid_argument', "failed to register shared memory region 'huge': invalid args"]);
    expect([...shm.read('big', 3 * 2 ** 30 - 4, 4)]).toEqual([0, 0, 0, 0]);
  });

  describe('regions held by in-flight requests', () => {
    /** Descriptors this process has open on `file` (a region's mapping is its descriptor here). */
    const openOn = (file: string): number =>
      fs.readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return fs.readlinkSync(`/proc/self/fd/${fd}`) === file;
        } catch {
          return false;
        }
      }).length;

    it('an unregister while held only marks the region: listed, usable and its name taken until the last lease goes', () => {
      const file = path.join(dir, 'region_a');
      shm.register('r1', '/region_a', 0, 64);
      shm.register('r2', '/region_a', 0, 64);
      const first = shm.acquire(['r1', 'r2', 'r1']);
      shm.unregister();
      expect(shm.status().map((s) => s.name)).toEqual(['r1', 'r2']);
      expect(codeOf(() => shm.register('r1', '/region_a', 0, 8))).toEqual(['already_exists', "shared memory region 'r1' already in manager"]);
      // A new request may still use a marked region, and then holds it too.
      const second = shm.acquire(['r1']);
      shm.write('r1', 0, new Uint8Array([7]));
      first.release();
      first.release();
      expect(shm.status().map((s) => s.name)).toEqual(['r1']);
      expect(codeOf(() => shm.status('r2'))).toEqual(['not_found', "Unable to find system shared memory region: 'r2'"]);
      expect(openOn(file)).toBe(1);
      second.release();
      expect(shm.status()).toEqual([]);
      expect(openOn(file)).toBe(0);
      // The name is free again.
      shm.register('r1', '/region_a', 0, 8);
      expect(shm.status()).toEqual([{ name: 'r1', key: '/region_a', offset: 0, byte_size: 8 }]);
    });

    it('a released lease on a region never unregistered leaves it registered; acquire of an unknown name holds nothing', () => {
      shm.register('r1', '/region_a', 0, 64);
      shm.acquire(['r1']).release();
      expect(shm.status().map((s) => s.name)).toEqual(['r1']);
      expect(codeOf(() => shm.acquire(['r1', 'nope']))).toEqual(['not_found', "Unable to find shared memory region: 'nope'"]);
      shm.unregister('r1');
      expect(shm.status()).toEqual([]);
    });

    it('close drops held regions too, and a lease released afterwards touches nothing of a later registration', () => {
      const file = path.join(dir, 'region_a');
      shm.register('r1', '/region_a', 0, 64);
      const lease = shm.acquire(['r1']);
      shm.close();
      expect(shm.status()).toEqual([]);
      expect(openOn(file)).toBe(0);
      shm.register('r1', '/region_a', 0, 32);
      shm.unregister('r1');
      shm.register('r1', '/region_a', 0, 16);
      lease.release();
      expect(shm.status()).toEqual([{ name: 'r1', key: '/region_a', offset: 0, byte_size: 16 }]);
    });
  });
});
