/**
 * Finds the infrastructure server binaries and, where they are missing, installs their Debian
 * packages with apt-get: once per machine, serialized across processes by a lock file.
 *
 * Concurrency contract: any number of vitest workers (separate processes) may call
 * `ensureBinaries()` at the same time. Within a process the first call's promise is shared;
 * across processes an exclusive lock file under os.tmpdir() lets exactly one of them run apt-get
 * while the others wait, then re-check for the binaries (so the install happens once).
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, openSync, closeSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { notFound } from '@switchyard/common';

/** A server binary and the Debian package that ships it. */
export interface DebianBinary {
  readonly binary: string;
  readonly debianPackage: string;
}

export const ETCD_BINARY: DebianBinary = { binary: 'etcd', debianPackage: 'etcd-server' };
export const NATS_BINARY: DebianBinary = { binary: 'nats-server', debianPackage: 'nats-server' };
export const REDIS_BINARY: DebianBinary = { binary: 'redis-server', debianPackage: 'redis-server' };

/** Debian's Chromium, for the browser suites (driven by playwright-core, never a downloaded browser). */
export const CHROMIUM_BINARY: DebianBinary = { binary: 'chromium', debianPackage: 'chromium' };

/** All three are installed together, so the first harness call on a fresh machine pays once. */
export const INFRA_BINARIES: readonly DebianBinary[] = [ETCD_BINARY, NATS_BINARY, REDIS_BINARY];

/**
 * kubectl, for rendering the deploy/kubernetes overlays (`kubectl kustomize`). Debian's package
 * (bookworm: kubectl 1.20, kustomize 2.0.3 inside) stands in where no newer kubectl is on PATH.
 */
export const KUBECTL_BINARY: DebianBinary = { binary: 'kubectl', debianPackage: 'kubernetes-client' };

/**
 * The Prometheus server and its rule checker, one Debian package, for the observability suite
 * (deploy/observability); installed when a caller first asks for it.
 */
export const PROMETHEUS_BINARY: DebianBinary = { binary: 'prometheus', debianPackage: 'prometheus' };
export const PROMTOOL_BINARY: DebianBinary = { binary: 'promtool', debianPackage: 'prometheus' };

/** The lock file apt installs serialize on (shared by every process on the machine). */
export const APT_LOCK_PATH = join(tmpdir(), 'switchyard-testing-apt.lock');

/** How long a process waits for another one's install before giving up (default 10 min). */
const DEFAULT_LOCK_TIMEOUT_MS = 10 * 60_000;

// Debian puts nats-server in /usr/sbin, which is not on a non-root PATH.
const EXTRA_DIRS = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];

/** The absolute path of `binary` on PATH (or in the usual system folders), or `null`. */
export function findBinary(binary: string): string | null {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter).filter((d) => d !== ''), ...EXTRA_DIRS];
  for (const dir of dirs) {
    const candidate = join(dir, binary);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      /* not here */
    }
  }
  return null;
}

const pending = new Map<string, Promise<void>>();

/**
 * Resolves each binary to its absolute path, installing the Debian packages of the missing
 * ones first, in one apt-get call (when any infrastructure server is missing, all of
 * `INFRA_BINARIES` that are missing). Throws a `not_found` SwitchyardError, with apt-get's
 * output as the cause, when that is impossible.
 */
export function ensureBinaries(wanted: readonly DebianBinary[] = INFRA_BINARIES): Promise<Map<string, string>> {
  const found = locate(wanted);
  if (found.missing.length === 0) return Promise.resolve(found.paths);
  const group = installGroup(found.missing);
  // Share one install per process and set of packages; a failed install is retried by the next call.
  const key = group.map((b) => b.debianPackage).sort().join(' ');
  let install = pending.get(key);
  if (install === undefined) {
    install = installMissing(group).finally(() => pending.delete(key));
    pending.set(key, install);
  }
  return install.then(() => {
    const again = locate(wanted);
    if (again.missing.length > 0) {
      throw notFound(`server binaries not found after install: ${again.missing.map((b) => b.binary).join(', ')}`);
    }
    return again.paths;
  });
}

/**
 * What one apt-get call installs for these missing binaries: them, and when any is an
 * infrastructure server, every one of `INFRA_BINARIES` (those already present are skipped later).
 */
export function installGroup(missing: readonly DebianBinary[]): DebianBinary[] {
  const infra = missing.some((m) => INFRA_BINARIES.some((b) => b.binary === m.binary));
  return infra ? [...INFRA_BINARIES, ...missing.filter((m) => !INFRA_BINARIES.some((b) => b.binary === m.binary))] : [...missing];
}

function locate(wanted: readonly DebianBinary[]): { paths: Map<string, string>; missing: DebianBinary[] } {
  const paths = new Map<string, string>();
  const missing: DebianBinary[] = [];
  for (const b of wanted) {
    const path = findBinary(b.binary);
    if (path === null) missing.push(b);
    else paths.set(b.binary, path);
  }
  return { paths, missing };
}

async function installMissing(group: readonly DebianBinary[]): Promise<void> {
  const release = await acquireLock(APT_LOCK_PATH, DEFAULT_LOCK_TIMEOUT_MS);
  try {
    // Another process may have installed them while we waited for the lock.
    const { missing } = locate(group);
    if (missing.length === 0) return;
    const packages = [...new Set(missing.map((b) => b.debianPackage))]; // prometheus ships two binaries
    const hint = `install them by hand: apt-get install -y ${packages.join(' ')}`;
    if (findBinary('apt-get') === null) throw notFound(`missing ${packages.join(', ')} and apt-get is not available; ${hint}`);
    if (process.getuid?.() !== 0) throw notFound(`missing ${packages.join(', ')} and not running as root; ${hint}`);
    const first = await run('apt-get', ['install', '-y', ...packages]);
    if (first.code === 0) return;
    // Usually "Unable to locate package" on a machine whose package lists were never fetched.
    const update = await run('apt-get', ['update']);
    const second = await run('apt-get', ['install', '-y', ...packages]);
    if (second.code !== 0) {
      throw notFound(`apt-get install ${packages.join(' ')} failed (exit ${second.code}); ${hint}`, new Error(tail(first.output + update.output + second.output, 40)));
    }
  } finally {
    release();
  }
}

function run(cmd: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
    child.once('error', (err) => resolve({ code: null, output: output + String(err) }));
    child.once('close', (code) => resolve({ code, output }));
  });
}

/**
 * An exclusive lock file holding the owner's pid. A lock whose owner is gone (crashed worker)
 * is taken over. Returns the release function.
 */
async function acquireLock(path: string, timeoutMs: number): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          unlinkSync(path);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (lockOwnerGone(path)) {
      try {
        unlinkSync(path);
      } catch {
        /* someone else took it over first */
      }
      continue;
    }
    if (Date.now() > deadline) throw notFound(`timed out after ${timeoutMs} ms waiting for the install lock ${path}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function lockOwnerGone(path: string): boolean {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(path, 'utf8'), 10);
  } catch {
    return false; // vanished or being written: look again
  }
  if (!Number.isInteger(pid) || pid <= 0) return false; // being written: look again
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** The last `n` lines of `text`. */
export function tail(text: string, n: number): string {
  return text.trimEnd().split('\n').slice(-n).join('\n');
}
