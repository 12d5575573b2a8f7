/**
 * The local connector's view of this machine's processes (Linux `/proc`) and free ports: the IO the
 * connector's decisions rest on, kept apart so the rest reads as plain logic.
 *
 * A process is identified by its pid **and** its start time in clock ticks since boot (field 22 of
 * `/proc/<pid>/stat`): a pid the kernel recycled for another process has another start time, so it is
 * never adopted or signalled in place of the replica that once held it.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';

/** Whether `/proc/<pid>/stat` can be read here (Linux). The local connector needs it. */
export function hasProcTable(): boolean {
  return readStat(process.pid) !== undefined;
}

/** The start ticks of a live (not zombie) process, or undefined when there is none with that pid. */
export function startTicksOf(pid: number): string | undefined {
  const stat = readStat(pid);
  if (stat === undefined || stat.state === 'Z' || stat.state === 'X' || stat.state === 'x') return undefined;
  return stat.startTicks;
}

/** Whether `pid` is still the live process that started at `startTicks`. */
export function isSameProcess(pid: number, startTicks: string): boolean {
  return startTicksOf(pid) === startTicks;
}

function readStat(pid: number): { state: string; startTicks: string } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid ..." — comm may hold spaces and parentheses: fields start after the last ')'
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const startTicks = fields[19]; // field 22 overall; fields[0] is field 3
  if (state === undefined || startTicks === undefined || !/^[0-9]+$/.test(startTicks)) return undefined;
  return { state, startTicks };
}

/** Sends `signal` to a process; false when it no longer exists (ESRCH), throws on anything else (EPERM). */
export function signalProcess(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/**
 * `count` distinct TCP ports the kernel reports free on 127.0.0.1, none of them in `avoid` (ports of
 * replicas that may not have bound theirs yet). All are held open until every one is chosen. A port
 * may still be taken by someone else before the replica binds it: that replica then fails to start and
 * is counted as gone like any other.
 */
export async function freePorts(count: number, avoid: ReadonlySet<number>): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let attempts = 0; ports.length < count; attempts++) {
      if (attempts > count + 64) throw new Error('no free port found');
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve());
      });
      const address = server.address();
      if (address === null || typeof address === 'string') continue;
      if (!avoid.has(address.port)) ports.push(address.port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }
}
