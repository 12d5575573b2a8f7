/**
 * The LeaderElection role: of every candidate campaigning for one election (a namespace and a name,
 * e.g. the namespace's planner), at most one leads at a time; the others wait and one of them takes
 * over when the leader goes. On etcd the leader is whoever holds the election key
 * (`electionKey(ns, name)`) under its own lease: the key is created only if absent, the waiting
 * candidates watch it and race to create it again once it is deleted — when the leader closes (its
 * lease is revoked) or dies (its lease expires).
 *
 * A candidate campaigns from the moment it is created until `close()`. Its life, per candidate:
 *
 *   following ──(the key was free: created under our lease)──► leading
 *   leading ──(lease lost or in doubt, key deleted or taken)──► following (campaigns again)
 *   following | leading ──close()──► closed (a leader's key is deleted with its lease)
 *
 * Losing the lease means stepping down at once, before anyone else can be elected: a leader whose
 * keep-alives go unanswered stops leading while its lease may still exist in etcd, so two
 * candidates never both believe they lead for longer than the clock skew between them.
 */

/** What a change of leadership tells the listeners. */
export interface LeadershipChange {
  readonly leading: boolean;
  /** Why: `elected`, `closed`, `lease lost: ...`, `key deleted`, ... (for logs, not for matching). */
  readonly reason: string;
}

export type LeadershipListener = (change: LeadershipChange) => void;

export interface LeaderElection {
  /** This candidate's id: the value of the election key while it leads. */
  readonly candidateId: string;
  /**
   * True while this candidate leads. It may turn false at any moment (lease lost); a caller checks
   * it right before every action only the leader may take.
   */
  isLeader(): boolean;
  /** The leading candidate's id as last seen (this one's while it leads), or undefined if none. */
  leader(): string | undefined;
  /**
   * Called on every change of this candidate's leadership, in order (never twice with the same
   * `leading`). Returns the unsubscribe function. Not called after `close()` has returned.
   */
  onChange(listener: LeadershipListener): () => void;
  /** Stop campaigning; a leader steps down (its listeners hear `closed`) and frees the key. Idempotent. */
  close(): Promise<void>;
}

/** The election key's value: who leads. */
export interface ElectionValue {
  readonly candidateId: string;
}

/** Reads an election key's value (any JSON); undefined when it is not one. */
export function decodeElectionValue(value: unknown): ElectionValue | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const id = (value as { candidateId?: unknown }).candidateId;
  return typeof id === 'string' && id.length > 0 ? { candidateId: id } : undefined;
}

/** Longest candidate id accepted (it is written to etcd and logged). */
export const MAX_CANDIDATE_ID_LENGTH = 256;

/** Calls every listener, in order; one that throws does not stop the others. */
export function notifyLeadership(listeners: Iterable<LeadershipListener>, change: LeadershipChange, onThrow: (err: unknown) => void): void {
  for (const l of [...listeners]) {
    try {
      l(change);
    } catch (err) {
      onThrow(err);
    }
  }
}
