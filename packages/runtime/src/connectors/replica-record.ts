/**
 * What the local connector writes down about each replica it started, the decode edge of those files,
 * and the choice of which replicas a scale-down drains. Pure: no IO.
 *
 * State directory layout (owned by one connector at a time):
 *   <stateDir>/replicas/<id>.json   a {@link ReplicaRecord}, written when the replica is spawned,
 *                                   rewritten when its drain starts, deleted once it is gone
 *   <stateDir>/logs/<id>.log        the replica's stdout and stderr (<id>.log.1: the previous part)
 *   <stateDir>/connector.lock       the pid and start ticks of the connector using the directory
 * A record only ever names its replica by id; every path is built from the id, which is checked
 * against {@link REPLICA_ID_PATTERN}, so no record can point outside the state directory.
 */
import { describeValue, invalidArgument } from '@switchyard/common';
import { PORT_PLACEHOLDERS, type PortPlaceholder } from './worker-template.js';

export const REPLICA_RECORD_VERSION = 1;
/** Replica ids: `<pool>-<base-36 start time>-<8 hex>`. */
export const REPLICA_ID_PATTERN = /^(aggregated|prefill|decode)-[0-9a-z]{1,12}-[0-9a-f]{8}$/;
/** A record file is refused past this size (a real one is well under 8 KiB). */
export const MAX_RECORD_BYTES = 64 * 1024;
/** Linux's largest possible pid (`pid_max` ≤ 2^22). */
const MAX_PID = 4_194_304;

export type ReplicaPool = 'aggregated' | 'prefill' | 'decode';
const POOL_NAMES: readonly ReplicaPool[] = ['aggregated', 'prefill', 'decode'];

/** One replica the connector started. */
export interface ReplicaRecord {
  readonly v: typeof REPLICA_RECORD_VERSION;
  readonly id: string;
  readonly pool: ReplicaPool;
  readonly pid: number;
  /**
   * The process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`), read right
   * after the spawn: with the pid, it identifies the process, so a recycled pid is never adopted,
   * signalled or counted.
   */
  readonly startTicks: string;
  /** Epoch ms of the spawn. */
  readonly startedAt: number;
  readonly ports: Readonly<Partial<Record<PortPlaceholder, number>>>;
  /** The full command line it was started with (for the operator; adoption does not compare it). */
  readonly argv: readonly string[];
  /** Epoch ms its drain began (SIGTERM sent); absent while it serves. */
  readonly drainingSince?: number;
}

export function encodeReplicaRecord(record: ReplicaRecord): string {
  return JSON.stringify(record) + '\n';
}

/**
 * Decodes the record stored as `<fileId>.json`. Throws invalid_argument on anything but a record
 * of this version whose id matches its file name (corrupt, truncated, hand-edited or hostile files).
 */
export function decodeReplicaRecord(text: string, fileId: string): ReplicaRecord {
  const bad = (why: string) => invalidArgument(`replica record ${fileId.slice(0, 80)}: ${why}`);
  if (text.length > MAX_RECORD_BYTES) throw bad(`larger than ${MAX_RECORD_BYTES} bytes`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw invalidArgument(`replica record ${fileId.slice(0, 80)}: not JSON`, err);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw bad('not an object');
  const r = raw as Record<string, unknown>;
  if (r['v'] !== REPLICA_RECORD_VERSION) throw bad(`version ${describeValue(r['v'], 20)}, expected ${REPLICA_RECORD_VERSION}`);
  const id = r['id'];
  if (typeof id !== 'string' || !REPLICA_ID_PATTERN.test(id)) throw bad('bad id');
  if (id !== fileId) throw bad(`id ${id} does not match the file name`);
  const pool = r['pool'];
  if (typeof pool !== 'string' || !POOL_NAMES.includes(pool as ReplicaPool) || !id.startsWith(`${pool}-`)) throw bad('bad pool');
  const pid = r['pid'];
  // never 0, 1 or negative: kill(0) / kill(-1) signal whole process groups
  if (typeof pid !== 'number' || !Number.isInteger(pid) || pid < 2 || pid > MAX_PID) throw bad('bad pid');
  const startTicks = r['startTicks'];
  if (typeof startTicks !== 'string' || !/^[0-9]{1,20}$/.test(startTicks)) throw bad('bad startTicks');
  const startedAt = r['startedAt'];
  if (!isEpochMs(startedAt)) throw bad('bad startedAt');
  const portsRaw = r['ports'];
  if (typeof portsRaw !== 'object' || portsRaw === null || Array.isArray(portsRaw)) throw bad('bad ports');
  const ports: Partial<Record<PortPlaceholder, number>> = {};
  for (const [k, v] of Object.entries(portsRaw)) {
    if (!(PORT_PLACEHOLDERS as readonly string[]).includes(k)) throw bad(`unknown port ${k.slice(0, 40)}`);
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 65535) throw bad(`bad port ${k}`);
    ports[k as PortPlaceholder] = v;
  }
  const argv = r['argv'];
  if (!Array.isArray(argv) || argv.length > 1024 || !argv.every((a) => typeof a === 'string')) throw bad('bad argv');
  const drainingSince = r['drainingSince'];
  if (drainingSince !== undefined && !isEpochMs(drainingSince)) throw bad('bad drainingSince');
  return { v: REPLICA_RECORD_VERSION, id, pool: pool as ReplicaPool, pid, startTicks, startedAt: startedAt as number, ports, argv: argv as string[], ...(drainingSince === undefined ? {} : { drainingSince: drainingSince as number }) };
}

const isEpochMs = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < 1e14;

/** A replica as the drain choice sees it. `load`: its in-flight work if known (any non-negative unit), else undefined. */
export interface DrainCandidate {
  readonly id: string;
  readonly startedAt: number;
  readonly load?: number;
}

/**
 * Which `count` of `candidates` (serving replicas of one pool) to drain: the least loaded first
 * (a replica of unknown load ranks after every known one), ties to the newest (a young replica has
 * the least warm KV cache to lose), then by id so the choice is deterministic. Returns ids.
 */
export function pickToDrain(candidates: readonly DrainCandidate[], count: number): string[] {
  if (!Number.isInteger(count) || count <= 0) return [];
  const loadKey = (c: DrainCandidate) => (c.load !== undefined && Number.isFinite(c.load) && c.load >= 0 ? c.load : Infinity);
  return [...candidates]
    .sort((a, b) => loadKey(a) - loadKey(b) || b.startedAt - a.startedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(0, count)
    .map((c) => c.id);
}
