/**
 * What only the etcd election meets (the contract suite covers the rest): etcd going away with the
 * leader's lease alive, etcd coming back without its data, and the key deleted by hand. Through all
 * of it no two candidates lead at once.
 */
import { randomBytes } from 'node:crypto';
import { startEtcd, type EtcdServer } from '@switchyard/testing';
import { Etcd3 } from 'etcd3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { electionKey, namespace } from './addressing.js';
import { EtcdLeaderElection, LEADER_FRESHNESS } from './etcd-leader-election.js';
import type { LeadershipChange } from './leader-election.js';

const prefix = `election-it-${randomBytes(4).toString('hex')}/`;
let etcd: EtcdServer;
let admin: Etcd3;
const open: EtcdLeaderElection[] = [];
let n = 0;

async function waitFor(what: string, cond: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Samples every few ms how many of `cs` lead; `stop()` returns the most seen at once. */
function leaderSampler(cs: readonly EtcdLeaderElection[]): { stop(): Promise<number> } {
  let max = 0;
  let on = true;
  const loop = (async () => {
    while (on) {
      max = Math.max(max, cs.filter((c) => c.isLeader()).length);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return max;
    },
  };
}

describe('EtcdLeaderElection (real etcd)', () => {
  let ns = '';
  const candidate = async (id: string, ttl = 2): Promise<{ c: EtcdLeaderElection; changes: LeadershipChange[] }> => {
    const c = await EtcdLeaderElection.connect({ url: etcd.url, namespace: ns, name: 'planner', candidateId: id, keyPrefix: prefix, leaseTtlSeconds: ttl });
    open.push(c);
    const changes: LeadershipChange[] = [];
    c.onChange((ch) => changes.push(ch));
    return { c, changes };
  };

  beforeAll(async () => {
    etcd = await startEtcd();
    admin = new Etcd3({ hosts: etcd.url });
  }, 60_000);
  afterAll(async () => {
    admin?.close();
    await etcd?.stop();
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  beforeEach(() => {
    ns = `it-${++n}`; // a fresh namespace per test
  });

  it('a leader cut off from etcd stops leading before its lease can expire, and leads again when etcd returns', async () => {
    const a = await candidate('a');
    const b = await candidate('b');
    expect(a.c.isLeader()).toBe(true);
    const sampler = leaderSampler([a.c, b.c]);
    const down = etcd.restart({ downMs: 4_000 });
    const cutAt = Date.now();
    await waitFor('a in doubt', () => !a.c.isLeader(), 3_000);
    // in doubt within 2/3 of the TTL (plus a keep-alive period of slack): before etcd could expire it
    expect(Date.now() - cutAt).toBeLessThan(2_000 * LEADER_FRESHNESS + 2_000 / 3 + 300);
    await waitFor('a stepped down', () => a.changes.some((ch) => !ch.leading), 5_000);
    expect(a.changes.find((ch) => !ch.leading)!.reason).toMatch(/^lease lost/);
    expect(b.c.isLeader()).toBe(false);
    await down;
    // etcd restored the lease (and the key under it): exactly one candidate leads again
    await waitFor('a leader again', () => a.c.isLeader() || b.c.isLeader(), 15_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(await sampler.stop()).toBe(1);
  }, 40_000);

  it('an etcd that comes back without its data: a new lease, a new key, one leader', async () => {
    // a long TTL: a's last keep-alive stays fresh long after etcd lost the lease and the key
    const a = await candidate('a', 10);
    const b = await candidate('b', 10);
    const sampler = leaderSampler([a.c, b.c]);
    expect(a.c.isLeader()).toBe(true);
    const down = etcd.restart({ wipe: true, downMs: 2_000 });
    // a leader whose watch lost etcd is in doubt at once, long before its keep-alives go stale
    await waitFor('a in doubt', () => !a.c.isLeader(), 1_500);
    await down;
    // the one leader is the one the new etcd's key names
    const key = electionKey(namespace(ns), 'planner');
    const deadline = Date.now() + 20_000;
    for (;;) {
      const leaders = [a.c, b.c].filter((c) => c.isLeader());
      const text = await admin.namespace(prefix).get(key).string().catch(() => null);
      if (leaders.length === 1 && text !== null && (JSON.parse(text) as { candidateId: string }).candidateId === leaders[0]!.candidateId) break;
      if (Date.now() > deadline) throw new Error(`no agreed leader: ${leaders.map((c) => c.candidateId).join(',')} lead, key ${text}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 500));
    expect(await sampler.stop()).toBe(1);
  }, 40_000);

  it('a key deleted by hand makes the leader step down; the election is held again', async () => {
    const a = await candidate('a', 5);
    const b = await candidate('b', 5);
    await admin.namespace(prefix).delete().key(electionKey(namespace(ns), 'planner'));
    await waitFor('a stepped down', () => a.changes.some((ch) => !ch.leading && ch.reason === 'election key deleted'), 5_000);
    await waitFor('a leader again', () => a.c.isLeader() || b.c.isLeader(), 5_000);
    const leader = a.c.isLeader() ? 'a' : 'b';
    expect(a.c.leader()).toBe(leader);
    expect(b.c.leader()).toBe(leader);
  });

  it('close() with etcd down ends within its bounds (the key then goes with the TTL)', async () => {
    const a = await candidate('a');
    const b = await candidate('b');
    const down = etcd.restart({ downMs: 4_000 });
    await waitFor('a in doubt', () => !a.c.isLeader(), 3_000);
    const t = Date.now();
    await a.c.close();
    expect(Date.now() - t).toBeLessThan(6_000);
    await down;
    // the lease etcd restored expires unrenewed: b takes over
    await waitFor('b leads', () => b.c.isLeader(), 15_000);
  }, 40_000);

  it('fails unavailable when etcd cannot be reached, invalid_argument on a bad TTL', async () => {
    await expect(EtcdLeaderElection.connect({ url: 'http://127.0.0.1:1', namespace: 'x', name: 'planner', candidateId: 'a', dialTimeoutMs: 500 })).rejects.toMatchObject({ code: 'unavailable' });
    await expect(EtcdLeaderElection.connect({ url: etcd.url, namespace: 'x', name: 'planner', candidateId: 'a', leaseTtlSeconds: 0 })).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});
