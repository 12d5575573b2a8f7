/**
 * The local connector's state directory on disk (layout in replica-record.ts): the lock, the replica
 * records (written atomically: a crash leaves the old record or the new one, never half of one) and the
 * replicas' log files. Every path is built from a checked replica id, never read from a file.
 */
import { closeSync, existsSync, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { invalidArgument, unavailable, type Logger } from '@switchyard/common';
import { isSameProcess, startTicksOf } from './process-table.js';
import { decodeReplicaRecord, encodeReplicaRecord, MAX_RECORD_BYTES, REPLICA_ID_PATTERN, type ReplicaRecord } from './replica-record.js';

export class StateDir {
  private constructor(
    readonly path: string,
    private readonly log: Logger,
  ) {}

  /**
   * Creates the directory if needed and takes its lock. Throws unavailable when it cannot be written
   * or another live process holds the lock (a lock whose process is gone is taken over).
   */
  static open(path: string, log: Logger): StateDir {
    try {
      mkdirSync(join(path, 'replicas'), { recursive: true, mode: 0o700 });
      mkdirSync(join(path, 'logs'), { recursive: true, mode: 0o700 });
    } catch (err) {
      throw unavailable(`local connector: cannot create the state directory ${path}`, err);
    }
    const lock = join(path, 'connector.lock');
    const held = readLock(lock);
    if (held !== undefined && isSameProcess(held.pid, held.startTicks)) throw unavailable(`local connector: ${path} is in use by process ${held.pid}`);
    try {
      writeAtomically(lock, JSON.stringify({ pid: process.pid, startTicks: startTicksOf(process.pid) }));
    } catch (err) {
      throw unavailable(`local connector: cannot write ${lock}`, err);
    }
    return new StateDir(path, log);
  }

  /** Gives the lock up if this process still holds it. */
  release(): void {
    const lock = join(this.path, 'connector.lock');
    if (readLock(lock)?.pid === process.pid) rmSync(lock, { force: true });
  }

  /**
   * Every record that decodes. A file that does not (corrupt, truncated, not a regular file, an id
   * other than its name) is renamed `<name>.corrupt` and its process left alone; other files are ignored.
   */
  readRecords(): ReplicaRecord[] {
    const dir = join(this.path, 'replicas');
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (err) {
      throw unavailable(`local connector: cannot read ${dir}`, err);
    }
    const records: ReplicaRecord[] = [];
    for (const name of names) {
      const file = join(dir, name);
      const id = name.endsWith('.json') ? name.slice(0, -5) : '';
      if (!REPLICA_ID_PATTERN.test(id)) {
        if (!name.endsWith('.tmp') && !name.endsWith('.corrupt')) this.log.warn({ file }, 'local connector: not a replica record, ignored');
        continue;
      }
      try {
        const st = lstatSync(file);
        if (!st.isFile()) throw invalidArgument(`replica record ${id}: not a regular file`);
        if (st.size > MAX_RECORD_BYTES) throw invalidArgument(`replica record ${id}: larger than ${MAX_RECORD_BYTES} bytes`);
        records.push(decodeReplicaRecord(readFileSync(file, 'utf8'), id));
      } catch (err) {
        this.log.warn({ err, file }, 'local connector: unreadable replica record set aside');
        try {
          renameSync(file, `${file}.corrupt`);
        } catch {
          /* already gone */
        }
      }
    }
    return records;
  }

  persist(record: ReplicaRecord): void {
    writeAtomically(join(this.path, 'replicas', `${record.id}.json`), encodeReplicaRecord(record));
  }

  /** Deletes a record; a failure is logged (the next start finds the process gone and deletes it then). */
  forget(id: string): void {
    try {
      rmSync(join(this.path, 'replicas', `${id}.json`), { force: true });
    } catch (err) {
      this.log.warn({ err, id }, 'local connector: cannot delete a replica record');
    }
  }

  logFile(id: string): string {
    return join(this.path, 'logs', `${id}.log`);
  }

  /** Cuts a log past `maxBytes` to its newest half, kept in `<id>.log.1`; the replica (O_APPEND) writes on at the start. */
  boundLog(id: string, maxBytes: number): void {
    const path = this.logFile(id);
    let fd: number | undefined;
    try {
      fd = openSync(path, 'r');
      const size = fstatSync(fd).size;
      if (size <= maxBytes) return;
      const keep = Math.floor(maxBytes / 2);
      const tail = Buffer.alloc(keep);
      const n = readSync(fd, tail, 0, keep, size - keep);
      writeFileSync(`${path}.1`, tail.subarray(0, n), { mode: 0o600 });
      truncateSync(path, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn({ err, file: path }, 'local connector: cannot bound the log');
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }

  /** Deletes the oldest logs of replicas not in `live`, beyond `keep`. */
  pruneLogs(live: ReadonlySet<string>, keep: number): void {
    const dir = join(this.path, 'logs');
    try {
      const dead = readdirSync(dir)
        .filter((n) => n.endsWith('.log') && REPLICA_ID_PATTERN.test(n.slice(0, -4)) && !live.has(n.slice(0, -4)))
        .map((n) => ({ n, mtime: statSync(join(dir, n)).mtimeMs }))
        .sort((a, b) => b.mtime - a.mtime);
      for (const { n } of dead.slice(keep)) {
        rmSync(join(dir, n), { force: true });
        if (existsSync(join(dir, `${n}.1`))) rmSync(join(dir, `${n}.1`), { force: true });
      }
    } catch (err) {
      this.log.warn({ err, dir }, 'local connector: cannot prune old logs');
    }
  }
}

function readLock(path: string): { pid: number; startTicks: string } | undefined {
  try {
    const held = JSON.parse(readFileSync(path, 'utf8').slice(0, 1024)) as { pid?: unknown; startTicks?: unknown };
    if (typeof held.pid === 'number' && Number.isInteger(held.pid) && held.pid > 1 && typeof held.startTicks === 'string') return { pid: held.pid, startTicks: held.startTicks };
  } catch {
    /* missing, unreadable or corrupt: nobody holds it */
  }
  return undefined;
}

function writeAtomically(path: string, text: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, path);
}
