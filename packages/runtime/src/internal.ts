// For sibling packages (the coming etcd / NATS implementations), apps and tests; not a public API.
// Light on purpose: it imports none of the clients (the worker's flag check reads NAME_PATTERN here,
// so a standalone worker never loads etcd, NATS, Redis or Kubernetes modules).
export { NAME_PATTERN, subjectMatches } from './addressing.js';
export { AsyncChannel } from './async-channel.js';
export { WatchState } from './watch-state.js';
export { type IdleEntry, IdleSweep } from './idle-sweep.js';
